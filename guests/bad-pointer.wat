;; bad-pointer: passes out-of-range pointers and lengths to every import.
;; Each call must answer -5 (fault) and never touch host memory.
;;   run -> the number of calls that did NOT answer -5 (0 when the host is right)
;;   probe_write (ptr len)                   -> what write(1, ptr, len) answered
;;   probe_fs_read (pptr plen bptr cap)      -> what fs_read answered
;;   probe_fs_write (pptr plen dptr dlen)    -> what fs_write answered
;;   probe_read (ptr cap)                    -> what read answered
;;   probe_fs_read_at (pptr plen bptr cap)   -> what fs_read_at(…, offset 0, …) answered
;;   probe_fs_ls (pptr plen bptr cap)        -> what fs_ls answered
;;   probe_fs_rm (pptr plen)                 -> what fs_rm answered
(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (import "kuro" "read" (func $read (param i32 i32) (result i32)))
  (import "kuro" "fs_read" (func $fs_read (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_read_at" (func $fs_read_at (param i32 i32 i64 i32 i32) (result i32)))
  (import "kuro" "fs_write" (func $fs_write (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_ls" (func $fs_ls (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_rm" (func $fs_rm (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "greeting.txt")
  (global $wrong (mut i32) (i32.const 0))
  (func $expect_fault (param $r i32)
    (if (i32.ne (local.get $r) (i32.const -5))
      (then (global.set $wrong (i32.add (global.get $wrong) (i32.const 1))))))
  (func (export "run") (result i32)
    ;; past the end of the one 64 KiB page
    (call $expect_fault (call $write (i32.const 1) (i32.const 65530) (i32.const 100)))
    ;; a negative length is a huge one
    (call $expect_fault (call $write (i32.const 1) (i32.const 0) (i32.const -1)))
    ;; a "negative" pointer is near 4 GiB
    (call $expect_fault (call $write (i32.const 2) (i32.const -16) (i32.const 8)))
    ;; ptr+len wraps past 2^32 to 16: in u32 arithmetic it would look in bounds
    (call $expect_fault (call $write (i32.const 1) (i32.const -16) (i32.const 32)))
    (call $expect_fault (call $read (i32.const 0) (i32.const -1)))
    (call $expect_fault (call $read (i32.const 65535) (i32.const 2)))
    (call $expect_fault (call $fs_read (i32.const -1) (i32.const 12) (i32.const 0) (i32.const 10)))
    (call $expect_fault (call $fs_read (i32.const 0) (i32.const 12) (i32.const 65000) (i32.const 1000)))
    (call $expect_fault (call $fs_read_at (i32.const 0) (i32.const 12) (i64.const 0) (i32.const 70000) (i32.const 1)))
    (call $expect_fault (call $fs_read_at (i32.const -8) (i32.const 20) (i64.const 0) (i32.const 0) (i32.const 1)))
    (call $expect_fault (call $fs_write (i32.const 0) (i32.const 12) (i32.const 65535) (i32.const 2)))
    (call $expect_fault (call $fs_write (i32.const 0) (i32.const 100000) (i32.const 0) (i32.const 2)))
    (call $expect_fault (call $fs_ls (i32.const 0) (i32.const 1) (i32.const -4096) (i32.const 4096)))
    (call $expect_fault (call $fs_rm (i32.const 65535) (i32.const 100)))
    (global.get $wrong))
  (func (export "probe_write") (param i32 i32) (result i32)
    (call $write (i32.const 1) (local.get 0) (local.get 1)))
  (func (export "probe_fs_read") (param i32 i32 i32 i32) (result i32)
    (call $fs_read (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "probe_fs_write") (param i32 i32 i32 i32) (result i32)
    (call $fs_write (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "probe_read") (param i32 i32) (result i32)
    (call $read (local.get 0) (local.get 1)))
  (func (export "probe_fs_read_at") (param i32 i32 i32 i32) (result i32)
    (call $fs_read_at (local.get 0) (local.get 1) (i64.const 0) (local.get 2) (local.get 3)))
  (func (export "probe_fs_ls") (param i32 i32 i32 i32) (result i32)
    (call $fs_ls (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "probe_fs_rm") (param i32 i32) (result i32)
    (call $fs_rm (local.get 0) (local.get 1))))
