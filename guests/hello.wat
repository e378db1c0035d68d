;; hello: writes to stdout and stderr. Exports:
;;   run          -> writes "hello, kuro\n" to stdout and "note: stderr works\n" to stderr, returns 0
;;   exit (code)  -> returns its argument as the exit code, writes nothing
;;   add (a b)    -> writes "sum=" through the write import and returns a+b (the original stream guest,
;;                   which writes "sum=42" at 2048 with no imports, is stream.wat: kuro-browser-v0)
;;   bad_fd       -> write to fd 3; returns 0 if the host answered -8 (bad fd), else 1
;;   trivial      -> does nothing, returns 0 (benchmarks)
(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "hello, kuro\n")
  (data (i32.const 16) "note: stderr works\n")
  (data (i32.const 48) "sum=")
  (func (export "run") (result i32)
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 12)))
    (drop (call $write (i32.const 2) (i32.const 16) (i32.const 19)))
    (i32.const 0))
  (func (export "exit") (param $code i32) (result i32)
    (local.get $code))
  (func (export "add") (param $a i32) (param $b i32) (result i32)
    (drop (call $write (i32.const 1) (i32.const 48) (i32.const 4)))
    (i32.add (local.get $a) (local.get $b)))
  (func (export "bad_fd") (result i32)
    (i32.ne (call $write (i32.const 3) (i32.const 0) (i32.const 5)) (i32.const -8)))
  (func (export "trivial") (result i32)
    (i32.const 0)))
