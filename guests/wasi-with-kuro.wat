;; wasi-with-kuro: imports from WASI and from the kuro ABI at once. No one kind provides both (their
;; filesystems would disagree), so it is refused at load.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
  (import "kuro" "write" (func (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")))
