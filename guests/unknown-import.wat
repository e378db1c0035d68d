;; unknown-import: imports a name from module "kuro" that the ABI does not have. Refused at load.
(module
  (import "kuro" "exec" (func $exec (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32) (i32.const 0)))
