;; Component fixture (world kuro:fixtures/environ): what wasi:cli/environment says.
;; run(args): writes "NAME=VALUE\n" for each environment variable (get-environment), then
;; "arg A\n" for each argument (get-arguments, argv[0] first); exit code 0.
(module
  (import "kuro:host/output@1.0.0" "write" (func $write (param i32 i32 i32 i32)))
  (import "wasi:cli/environment@0.2.0" "get-environment" (func $env (param i32)))
  (import "wasi:cli/environment@0.2.0" "get-arguments" (func $argv (param i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 16) "=\n")
  (data (i32.const 20) "arg ")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                          (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
        (br $grow)))
    (local.get $p))
  (func $out (param $ptr i32) (param $len i32)
    (call $write (i32.const 0) (local.get $ptr) (local.get $len) (i32.const 96)))
  (func (export "run") (param $args i32) (param $n i32) (result i32)
    (local $i i32) (local $at i32)
    (call $env (i32.const 64))  ;; list<tuple<string, string>>: ptr at 64, len at 68; 16 bytes an element
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 68))))
        (local.set $at (i32.add (i32.load (i32.const 64)) (i32.mul (local.get $i) (i32.const 16))))
        (call $out (i32.load (local.get $at)) (i32.load offset=4 (local.get $at)))
        (call $out (i32.const 16) (i32.const 1))
        (call $out (i32.load offset=8 (local.get $at)) (i32.load offset=12 (local.get $at)))
        (call $out (i32.const 17) (i32.const 1))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (local.set $i (i32.const 0))
    (call $argv (i32.const 72))  ;; list<string>: ptr at 72, len at 76; 8 bytes an element
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 76))))
        (local.set $at (i32.add (i32.load (i32.const 72)) (i32.mul (local.get $i) (i32.const 8))))
        (call $out (i32.const 20) (i32.const 4))
        (call $out (i32.load (local.get $at)) (i32.load offset=4 (local.get $at)))
        (call $out (i32.const 17) (i32.const 1))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (i32.const 0))
)
