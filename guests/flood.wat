;; flood: writes 1 KiB chunks to stdout forever.
;;   run -> never returns; the output cap stops it
;;   write_then_spin -> writes one 1 KiB chunk, then loops forever in pure wasm (no more imports)
(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
  (func (export "run") (result i32)
    (loop $forever
      (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1024)))
      (br $forever))
    (i32.const 0))
  (func (export "write_then_spin") (result i32)
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1024)))
    (loop $forever (br $forever))
    (i32.const 0)))
