;; wasi-fault: WASI calls whose pointers leave guest memory answer EFAULT (21) and touch nothing.
;; Each export exits (proc_exit) with the errno fd_write answered:
;;   _start  the iovec array itself crosses the end of memory
;;   buffer  an iovec in memory points at a buffer that crosses the end
;;   result  the nwritten pointer lies past the end, aligned (nothing is written to stdout first; a misaligned
;;           one would trap the guest instead, as the witx rule says: tests/wasi/test_wasi_arguments.py)
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\10\00\00\00\05\00\00\00")  ;; iovec {buf 16, len 5}
  (data (i32.const 8) "\fc\ff\00\00\10\00\00\00")  ;; iovec {buf 65532, len 16}
  (data (i32.const 16) "hello")
  (func (export "_start")
    (call $proc_exit (call $fd_write (i32.const 1) (i32.const 65532) (i32.const 1) (i32.const 32))))
  (func (export "buffer")
    (call $proc_exit (call $fd_write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 32))))
  (func (export "result")
    (call $proc_exit (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 65536)))))
