;; A component that polls an empty list of pollables (WASI 0.2's poll: "at least one"; wasmtime traps).
;; Waiting for none of nothing would never end: the guest's trap. Export f: polls, then answers 7.
(component
  (import "wasi:io/poll@0.2.0" (instance $p
    (export "pollable" (type $pl (sub resource)))
    (export "poll" (func (param "in" (list (borrow $pl))) (result (list u32))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 4096)))
  (core instance $m (instantiate $mem))
  (core func $poll (canon lower (func $p "poll")
    (memory (core memory $m "memory")) (realloc (core func $m "realloc"))))
  (core module $guest
    (import "h" "poll" (func $poll (param i32 i32 i32)))
    (func (export "f") (result i32) (call $poll (i32.const 0) (i32.const 0) (i32.const 64)) (i32.const 7)))
  (core instance $g (instantiate $guest (with "h" (instance (export "poll" (func $poll))))))
  (func (export "f") (result u32) (canon lift (core func $g "f")))
)
