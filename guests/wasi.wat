;; wasi: imports pre-preview-1 WASI ("wasi_unstable"), which this host does not provide (it runs
;; WASI preview 1, "wasi_snapshot_preview1"). Refused at load (load-error naming the import).
(module
  (import "wasi_unstable" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (result i32) (i32.const 0)))
