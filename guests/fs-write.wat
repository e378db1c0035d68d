;; fs-write: writes and removes files. Returns 0, or the negated ABI error code.
;;   run  -> fs_write "out/hello.txt" = "written by a guest"
;;   rm   -> fs_rm "greeting.txt"
;;   rm_dir -> fs_rm "docs" (a non-empty directory: 6)
(module
  (import "kuro" "fs_write" (func $fs_write (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_rm" (func $fs_rm (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "out/hello.txt")
  (data (i32.const 16) "written by a guest")
  (data (i32.const 48) "greeting.txt")
  (data (i32.const 64) "docs")
  (func (export "run") (result i32)
    (i32.sub (i32.const 0) (call $fs_write (i32.const 0) (i32.const 13) (i32.const 16) (i32.const 18))))
  (func (export "rm") (result i32)
    (i32.sub (i32.const 0) (call $fs_rm (i32.const 48) (i32.const 12))))
  (func (export "rm_dir") (result i32)
    (i32.sub (i32.const 0) (call $fs_rm (i32.const 64) (i32.const 4)))))
