;; Component fixture (world kuro:fixtures/outside): imports wasi:keyvalue/store, outside what the host provides.
(module
  (import "wasi:keyvalue/store@0.2.0-draft" "get" (func (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32 i32) (result i32) (i32.const 0))
)
