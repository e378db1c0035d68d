;; fs-edges: fs cases at the edges of the ABI.
;;   write_then_read -> fs_write "out/hello.txt" = "written by a guest", then fs_read it back
;;                      (cap 64) and write what was read to stdout: a later call in the same run
;;                      sees the root the write produced. 0, or the negated ABI error code.
;;   short_read      -> fs_read "greeting.txt" with cap 3 into zeroed memory at 1024, then write
;;                      the 6 bytes at 1024 to stdout: exactly 3 are copied, the rest stay 0.
;;                      Returns what fs_read answered (the file's full size, not 3).
(module
  (import "kuro" "fs_write" (func $fs_write (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_read" (func $fs_read (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "out/hello.txt")
  (data (i32.const 16) "written by a guest")
  (data (i32.const 48) "greeting.txt")
  (func (export "write_then_read") (result i32)
    (local $r i32)
    (local.set $r (call $fs_write (i32.const 0) (i32.const 13) (i32.const 16) (i32.const 18)))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (return (i32.sub (i32.const 0) (local.get $r)))))
    (local.set $r (call $fs_read (i32.const 0) (i32.const 13) (i32.const 1024) (i32.const 64)))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then (return (i32.sub (i32.const 0) (local.get $r)))))
    (drop (call $write (i32.const 1) (i32.const 1024) (local.get $r)))
    (i32.const 0))
  (func (export "short_read") (result i32)
    (local $r i32)
    (local.set $r (call $fs_read (i32.const 48) (i32.const 12) (i32.const 1024) (i32.const 3)))
    (drop (call $write (i32.const 1) (i32.const 1024) (i32.const 6)))
    (local.get $r)))
