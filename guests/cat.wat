;; cat: copies stdin to stdout until end of input.
;;   run  -> 0 at end of input; the negated error code if read fails (1 = stdin/read not granted)
;;   zero -> read with cap 0: returns 10 + what read answered (10: nothing asked, no waiting)
(module
  (import "kuro" "read" (func $read (param i32 i32) (result i32)))
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (local $n i32)
    (block $done
      (loop $next
        (local.set $n (call $read (i32.const 0) (i32.const 4096)))
        (br_if $done (i32.eqz (local.get $n)))
        (if (i32.lt_s (local.get $n) (i32.const 0))
          (then (return (i32.sub (i32.const 0) (local.get $n)))))
        (drop (call $write (i32.const 1) (i32.const 0) (local.get $n)))
        (br $next)))
    (i32.const 0))
  (func (export "zero") (result i32)
    (i32.add (i32.const 10) (call $read (i32.const 0) (i32.const 0)))))
