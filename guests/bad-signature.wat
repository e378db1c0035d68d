;; bad-signature: imports kuro.write with the wrong signature. Refused at load.
(module
  (import "kuro" "write" (func $write (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32) (i32.const 0)))
