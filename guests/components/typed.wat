;; Component fixture (world kuro:fixtures/typed): the kuro command `run` plus typed exports.
;; Canonical ABI by hand: flat params, results past one value through a return area.
;; run(args): args[0] picks a behaviour by its first letter —
;;   "trap" unreachable · "spin" loops forever · "flood" writes 1 KiB chunks forever ·
;;   "cat" copies stdin to stdout · "deep" recurses until the stack is exhausted ·
;;   "read PATH" writes the file to stdout (exit 1 if fs.read answers an error) ·
;;   "len PATH" reads the file and exits with its length (1 on an error, 0 for an empty file) ·
;;   "many PATH…" calls fs.read once on each PATH, whatever it answers, and exits 0 ·
;;   anything else (or none) writes one line to stdout and one to stderr; exit code = number of args.
(module
  (import "kuro:host/output@1.0.0" "write" (func $write (param i32 i32 i32 i32)))
  (import "kuro:host/stdin@1.0.0" "read" (func $read (param i32 i32)))
  (import "kuro:host/fs@1.0.0" "read" (func $fsread (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "hello, kuro\n")          ;; 12 bytes
  (data (i32.const 32) "note: stderr works\n")   ;; 19 bytes
  (data (i32.const 64) "too big")                ;; 7 bytes
  (data (i32.const 80) "stdin: denied\n")        ;; 14 bytes

  (func $realloc (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                          (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
        (br $grow)))
    (local.get $p))

  ;; ---- run
  (func $deep (param $n i32) (result i32)
    (i32.add (call $deep (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))

  (func (export "run") (param $args i32) (param $n i32) (result i32)
    (local $c i32)
    (local $i i32)
    (if (i32.gt_u (local.get $n) (i32.const 0))
      (then
        (if (i32.gt_u (i32.load offset=4 (local.get $args)) (i32.const 0))
          (then (local.set $c (i32.load8_u (i32.load (local.get $args))))))))
    (if (i32.eq (local.get $c) (i32.const 116)) (then unreachable))                      ;; t: trap
    (if (i32.eq (local.get $c) (i32.const 115)) (then (loop $spin (br $spin))))          ;; s: spin
    (if (i32.eq (local.get $c) (i32.const 102))                                          ;; f: flood
      (then (loop $flood
        (call $write (i32.const 0) (i32.const 4096) (i32.const 1024) (i32.const 128))
        (br $flood))))
    (if (i32.eq (local.get $c) (i32.const 100)) (then (drop (call $deep (i32.const 0)))))  ;; d: deep
    (if (i32.eq (local.get $c) (i32.const 108))                                          ;; l: len PATH
      (then
        (call $fsread (i32.load offset=8 (local.get $args)) (i32.load offset=12 (local.get $args)) (i32.const 128))
        (if (i32.load8_u (i32.const 128)) (then (return (i32.const 1))))
        (return (i32.load (i32.const 136)))))
    (if (i32.eq (local.get $c) (i32.const 114))                                          ;; r: read PATH
      (then
        (call $fsread (i32.load offset=8 (local.get $args)) (i32.load offset=12 (local.get $args)) (i32.const 128))
        (if (i32.load8_u (i32.const 128)) (then (return (i32.const 1))))
        (call $write (i32.const 0) (i32.load (i32.const 132)) (i32.load (i32.const 136)) (i32.const 144))
        (return (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 109))                                          ;; m: many PATH…
      (then
        (local.set $i (i32.const 1))
        (block $done
          (loop $each
            (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
            (call $fsread (i32.load (i32.add (local.get $args) (i32.shl (local.get $i) (i32.const 3))))
                          (i32.load offset=4 (i32.add (local.get $args) (i32.shl (local.get $i) (i32.const 3))))
                          (i32.const 128))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $each)))
        (return (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 99))                                           ;; c: cat
      (then
        (loop $copy
          (call $read (i32.const 4096) (i32.const 128))
          (if (i32.load8_u (i32.const 128))
            (then
              (call $write (i32.const 1) (i32.const 80) (i32.const 14) (i32.const 144))
              (return (i32.const 1))))
          (if (i32.load (i32.const 136))
            (then
              (call $write (i32.const 0) (i32.load (i32.const 132)) (i32.load (i32.const 136)) (i32.const 144))
              (br $copy))))
        (return (i32.const 0))))
    (call $write (i32.const 0) (i32.const 16) (i32.const 12) (i32.const 128))
    (call $write (i32.const 1) (i32.const 32) (i32.const 19) (i32.const 128))
    (local.get $n))

  ;; ---- typed exports
  (func (export "add") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1)))

  (func (export "echo-point") (param $x i32) (param $y i32) (param $p i32) (param $l i32) (result i32)
    (i32.store (i32.const 256) (local.get $x))
    (i32.store (i32.const 260) (local.get $y))
    (i32.store (i32.const 264) (local.get $p))
    (i32.store (i32.const 268) (local.get $l))
    (i32.const 256))

  (func (export "echo-shape") (param $d i32) (param $v f64) (result i32)
    (i32.store8 (i32.const 272) (local.get $d))
    (f64.store (i32.const 280) (local.get $v))
    (i32.const 272))

  (func (export "echo-opt") (param $d i32) (param $v i32) (result i32)
    (i32.store8 (i32.const 288) (local.get $d))
    (i32.store (i32.const 292) (local.get $v))
    (i32.const 288))

  (func (export "echo-perms") (param i32) (result i32) (local.get 0))
  (func (export "echo-color") (param i32) (result i32) (local.get 0))

  (func (export "echo-list") (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 296) (local.get $p))
    (i32.store (i32.const 300) (local.get $n))
    (i32.const 296))

  (func (export "halve") (param $n i32) (result i32)
    (if (i32.lt_u (local.get $n) (i32.const 1000))
      (then
        (i32.store8 (i32.const 304) (i32.const 0))
        (i32.store (i32.const 308) (i32.shr_u (local.get $n) (i32.const 1))))
      (else
        (i32.store8 (i32.const 304) (i32.const 1))
        (i32.store (i32.const 308) (i32.const 64))
        (i32.store (i32.const 312) (i32.const 7))))
    (i32.const 304))

  (func (export "sum-bytes") (param $p i32) (param $n i32) (result i64)
    (local $sum i64)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $sum (i64.add (local.get $sum) (i64.load8_u (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $sum))

  (func (export "nothing"))

  ;; fill(n) -> list<u8>: n bytes of 7 (a result much larger than its argument)
  (func (export "fill") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (call $realloc (i32.const 0) (i32.const 0) (i32.const 1) (local.get $n)))
    (memory.fill (local.get $p) (i32.const 7) (local.get $n))
    (i32.store (i32.const 320) (local.get $p))
    (i32.store (i32.const 324) (local.get $n))
    (i32.const 320))

  ;; empties(n) -> list<list<u8>>: n empty lists (n counted bytes, ~20 n bytes of DAG-JSON in the receipt)
  (func (export "empties") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.shl (local.get $n) (i32.const 3))))
    (memory.fill (local.get $p) (i32.const 0) (i32.shl (local.get $n) (i32.const 3)))
    (i32.store (i32.const 320) (local.get $p))
    (i32.store (i32.const 324) (local.get $n))
    (i32.const 320))

  ;; ---- interface kuro:fixtures/calc (exported as an instance: `kuro:fixtures/calc@1.0.0#double`)
  (func (export "kuro:fixtures/calc@1.0.0#double") (param $n i32) (result i32)
    (i32.mul (local.get $n) (i32.const 2)))
  (func (export "kuro:fixtures/calc@1.0.0#length") (param $p i32) (param $len i32) (result i32)
    (local.get $len))
)
