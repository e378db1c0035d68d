;; A hostile component (component text): it imports kuro:host/fs#write with the host's parameters but another
;; result (result<u64, u32> where the host answers result<_, error-code>). The host must find that out before
;; it acts: a file written and then the call refused would be an effect the guest's type never allowed.
;; Export f: writes "hello" to b.txt.
(component
  (import "kuro:host/fs@1.0.0" (instance $fs
    (export "write" (func (param "path" string) (param "data" (list u8)) (result (result u64 (error u32)))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 8192)))
  (core instance $m (instantiate $mem))
  (core func $fsw (canon lower (func $fs "write") (memory (core memory $m "memory")) string-encoding=utf8))
  (core module $guest
    (import "h" "fsw" (func $fsw (param i32 i32 i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "b.txt")
    (data (i32.const 32) "hello")
    (func (export "f") (call $fsw (i32.const 16) (i32.const 5) (i32.const 32) (i32.const 5) (i32.const 64))))
  (core instance $g (instantiate $guest
    (with "h" (instance (export "fsw" (func $fsw)) (export "memory" (memory $m "memory"))))))
  (func (export "f") (canon lift (core func $g "f")))
)
