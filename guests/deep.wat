;; deep: unbounded recursion.
;;   run -> never returns normally; wasmtime's stack guard traps (stack overflow)
(module
  (func $down (param $n i32) (result i32)
    (i32.add (call $down (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))
  (func (export "run") (result i32)
    (call $down (i32.const 0))))
