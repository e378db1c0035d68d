;; Component fixture (world kuro:fixtures/exiting): wasi:cli/environment, then wasi:cli/exit.
;; run(args): writes "vars: N\n" (N = the number of environment variables, one digit), then
;; exits through wasi:cli/exit with err when given an arg, ok without: exit code 1 or 0.
(module
  (import "kuro:host/output@1.0.0" "write" (func $write (param i32 i32 i32 i32)))
  (import "wasi:cli/environment@0.2.0" "get-environment" (func $env (param i32)))
  (import "wasi:cli/exit@0.2.0" "exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 16) "vars: 0\n")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.add (local.get 3) (i32.const 8))))
    (local.get $p))
  (func (export "run") (param $args i32) (param $n i32) (result i32)
    (call $env (i32.const 64))
    (i32.store8 (i32.const 22) (i32.add (i32.const 48) (i32.load (i32.const 68))))
    (call $write (i32.const 0) (i32.const 16) (i32.const 8) (i32.const 96))
    (call $exit (i32.ne (local.get $n) (i32.const 0)))
    unreachable)
)
