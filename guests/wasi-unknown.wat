;; wasi-unknown: imports a name wasi_snapshot_preview1 does not have. Refused at load, naming it.
(module
  (import "wasi_snapshot_preview1" "fd_frobnicate" (func (param i32) (result i32)))
  (func (export "_start")))
