;; A hostile component (component text): it imports the kuro world's functions that take a list<u8> with a
;; list<option<u8>> there instead. Each element of such a list is a 32-byte engine value whose byte 8 is the
;; low byte of a pointer into the host's heap, not a byte the guest wrote: the host must not take those bytes
;; for the guest's data (output, a file). Exports: write (output.write), fs-write (fs.write of b.txt), each
;; with 16 x some(0x41).
(component
  (import "kuro:host/output@1.0.0" (instance $out
    (type $st (enum "stdout" "stderr"))
    (export "stream" (type $stv (eq $st)))
    (export "write" (func (param "s" $stv) (param "data" (list (option u8))) (result (result (error u32)))))))
  (import "kuro:host/fs@1.0.0" (instance $fs
    (export "write" (func (param "path" string) (param "data" (list (option u8))) (result (result (error u32)))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 8192)))
  (core instance $m (instantiate $mem))
  (core func $write (canon lower (func $out "write") (memory (core memory $m "memory"))))
  (core func $fsw (canon lower (func $fs "write") (memory (core memory $m "memory")) string-encoding=utf8))
  (core module $guest
    (import "h" "write" (func $write (param i32 i32 i32 i32)))
    (import "h" "fsw" (func $fsw (param i32 i32 i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "b.txt")
    ;; 16 x option<u8> = some(0x41): 2 bytes each (case, payload)
    (data (i32.const 1024) "\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41\01\41")
    (func (export "write") (call $write (i32.const 0) (i32.const 1024) (i32.const 16) (i32.const 64)))
    (func (export "fs-write") (call $fsw (i32.const 16) (i32.const 5) (i32.const 1024) (i32.const 16) (i32.const 64))))
  (core instance $g (instantiate $guest
    (with "h" (instance (export "write" (func $write)) (export "fsw" (func $fsw)) (export "memory" (memory $m "memory"))))))
  (func (export "write") (canon lift (core func $g "write")))
  (func (export "fs-write") (canon lift (core func $g "fs-write")))
)
