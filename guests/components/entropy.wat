;; Component fixture (world kuro:fixtures/entropy): WASI 0.2 clocks and randomness, raw.
;; run(args): writes to stdout, as raw little-endian bytes: get-random-bytes(16) (16 bytes),
;; wall-clock now (seconds u64, nanoseconds u32: 12 bytes), monotonic now (8), get-random-u64 (8),
;; insecure-seed (two u64: 16), monotonic now again (8) — 68 bytes; exit code 0.
;; With any arg ("greedy") it only asks get-random-bytes(1 MiB + 1), past the host's cap, then writes
;; one of the bytes (which a host keeping the cap never lets it do).
(module
  (import "kuro:host/output@1.0.0" "write" (func $write (param i32 i32 i32 i32)))
  (import "wasi:random/random@0.2.0" "get-random-bytes" (func $bytes (param i64 i32)))
  (import "wasi:random/random@0.2.0" "get-random-u64" (func $u64 (result i64)))
  (import "wasi:random/insecure-seed@0.2.0" "insecure-seed" (func $seed (param i32)))
  (import "wasi:clocks/wall-clock@0.2.0" "now" (func $wall (param i32)))
  (import "wasi:clocks/monotonic-clock@0.2.0" "now" (func $mono (result i64)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.add (local.get 3) (i32.const 8))))
    (local.get $p))
  (func $out (param $ptr i32) (param $len i32)
    (call $write (i32.const 0) (local.get $ptr) (local.get $len) (i32.const 200)))
  (func (export "run") (param $args i32) (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 0))
      (then
        (call $bytes (i64.const 1048577) (i32.const 64))
        (call $out (i32.load (i32.const 64)) (i32.const 1))
        (return (i32.const 0))))
    (call $bytes (i64.const 16) (i32.const 64))
    (call $out (i32.load (i32.const 64)) (i32.load (i32.const 68)))
    (call $wall (i32.const 72))  ;; seconds at 72, nanoseconds at 80
    (call $out (i32.const 72) (i32.const 12))
    (i64.store (i32.const 88) (call $mono))
    (call $out (i32.const 88) (i32.const 8))
    (i64.store (i32.const 96) (call $u64))
    (call $out (i32.const 96) (i32.const 8))
    (call $seed (i32.const 104))
    (call $out (i32.const 104) (i32.const 16))
    (i64.store (i32.const 120) (call $mono))
    (call $out (i32.const 120) (i32.const 8))
    (i32.const 0))
)
