;; fs-ls: lists a directory to stdout ("name\n", directories "name/\n", sorted).
;;   run   -> ls "." (the root)
;;   docs  -> ls "docs"
;;   short -> ls "." with a 4-byte buffer; writes what fit, returns the full length needed
;; run/docs return 0, or the negated ABI error code.
(module
  (import "kuro" "fs_ls" (func $fs_ls (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) ".")
  (data (i32.const 16) "docs")
  (func $ls (param $p i32) (param $l i32) (result i32)
    (local $n i32)
    (local.set $n (call $fs_ls (local.get $p) (local.get $l) (i32.const 1024) (i32.const 4096)))
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then (return (i32.sub (i32.const 0) (local.get $n)))))
    (drop (call $write (i32.const 1) (i32.const 1024) (local.get $n)))
    (i32.const 0))
  (func (export "run") (result i32) (call $ls (i32.const 0) (i32.const 1)))
  (func (export "docs") (result i32) (call $ls (i32.const 16) (i32.const 4)))
  (func (export "short") (result i32)
    (local $n i32)
    (local.set $n (call $fs_ls (i32.const 0) (i32.const 1) (i32.const 1024) (i32.const 4)))
    (drop (call $write (i32.const 1) (i32.const 1024) (i32.const 4)))
    (local.get $n)))
