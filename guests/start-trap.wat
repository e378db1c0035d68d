;; start-trap: the start function traps during instantiation.
(module
  (func $boom (unreachable))
  (start $boom)
  (func (export "run") (result i32) (i32.const 0)))
