;; wasi-grow: fd_write after memory.grow reaches the new page (a host that remembers the memory's size must
;; read it again before answering EFAULT). _start first writes from the first page, then asks for an iovec on
;; the second page before it exists (EFAULT, 21), grows the memory by one page, and writes "abc" through an
;; iovec, a buffer and an nwritten all on the new page. It exits 0, or 100 + the step that went wrong.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\10\00\00\00\02\00\00\00")  ;; iovec {buf 16, len 2}
  (data (i32.const 16) "xy")
  (func $fail (param i32) (call $proc_exit (i32.add (i32.const 100) (local.get 0))))
  (func (export "_start")
    (if (i32.ne (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 32)) (i32.const 0))
      (then (call $fail (i32.const 1))))
    (if (i32.ne (call $fd_write (i32.const 1) (i32.const 65536) (i32.const 1) (i32.const 32)) (i32.const 21))
      (then (call $fail (i32.const 2))))
    (if (i32.ne (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 65536)) (i32.const 21))
      (then (call $fail (i32.const 3))))
    (drop (memory.grow (i32.const 1)))
    (i32.store (i32.const 65536) (i32.const 65544))  ;; iovec {buf 65544, len 3} on the new page
    (i32.store (i32.const 65540) (i32.const 3))
    (i32.store8 (i32.const 65544) (i32.const 97))
    (i32.store8 (i32.const 65545) (i32.const 98))
    (i32.store8 (i32.const 65546) (i32.const 99))
    (if (i32.ne (call $fd_write (i32.const 1) (i32.const 65536) (i32.const 1) (i32.const 131068)) (i32.const 0))
      (then (call $fail (i32.const 4))))
    (if (i32.ne (i32.load (i32.const 131068)) (i32.const 3))
      (then (call $fail (i32.const 5))))
    (if (i32.ne (call $fd_write (i32.const 1) (i32.const 65536) (i32.const 1) (i32.const 131072)) (i32.const 21))
      (then (call $fail (i32.const 6))))))
