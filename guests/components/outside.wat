;; Component fixture (world kuro:fixtures/outside): imports wasi:cli/environment, outside the kuro world.
(module
  (import "wasi:cli/environment@0.2.0" "get-environment" (func (param i32)))
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32 i32) (result i32) (i32.const 0))
)
