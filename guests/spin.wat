;; spin: CPU-bound loops in pure wasm (no imports).
;;   run        -> an infinite loop; never returns; only the deadline, kill() or fuel stop it
;;   count (n)  -> counts down from n and returns 0 (a bounded CPU-bound guest, for benchmarks)
(module
  (func (export "run") (result i32)
    (loop $forever (br $forever))
    (i32.const 0))
  (func (export "count") (param $n i32) (result i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 0)))
