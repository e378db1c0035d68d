;; A component whose core start function (run while the component is instantiated) breaks a rule of a WASI
;; call: get-random-bytes(2^40), past what one call may carry (WASI gives it no error to answer). The run ends
;; as the guest's trap saying so, as it would in a call. Export f (never reached): 42.
(component
  (import "wasi:random/random@0.2.0" (instance $random
    (export "get-random-bytes" (func (param "len" u64) (result (list u8))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 4096)))
  (core instance $m (instantiate $mem))
  (core func $bytes (canon lower (func $random "get-random-bytes")
    (memory (core memory $m "memory")) (realloc (core func $m "realloc"))))
  (core module $guest
    (import "h" "bytes" (func $bytes (param i64 i32)))
    (func $start (call $bytes (i64.const 1099511627776) (i32.const 64)))
    (start $start)
    (func (export "f") (result i32) (i32.const 42)))
  (core instance $g (instantiate $guest (with "h" (instance (export "bytes" (func $bytes))))))
  (func (export "f") (result u32) (canon lift (core func $g "f")))
)
