;; trap: wasm traps.
;;   run  -> unreachable
;;   div0 -> integer division by zero
;;   oob  -> a load outside memory
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32) (unreachable))
  (func (export "div0") (param $d i32) (result i32) (i32.div_s (i32.const 1) (local.get $d)))
  (func (export "oob") (result i32) (i32.load (i32.const 70000))))
