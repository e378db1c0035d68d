;; batch: small guests for the batch tests and benchmarks; each leaves a trace that names its argument.
;;   echo (n)   -> writes "n=<n>\n" to stdout, returns 0
;;   note (n)   -> fs_write "notes/<n>" = "<n>" (needs fs/write), returns 0 or the negated ABI error
;;   exit (n)   -> returns n (0 is ok, anything else the exit code)
(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (import "kuro" "fs_write" (func $fs_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "n=")
  (data (i32.const 16) "notes/")
  ;; $digits (n, at) -> writes the decimal digits of unsigned n at `at`, returns how many
  (func $digits (param $n i32) (param $at i32) (result i32)
    (local $len i32) (local $m i32) (local $i i32)
    (local.set $m (local.get $n))
    (local.set $len (i32.const 1))
    (block $done
      (loop $count
        (br_if $done (i32.lt_u (local.get $m) (i32.const 10)))
        (local.set $m (i32.div_u (local.get $m) (i32.const 10)))
        (local.set $len (i32.add (local.get $len) (i32.const 1)))
        (br $count)))
    (local.set $m (local.get $n))
    (local.set $i (local.get $len))
    (loop $emit
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (local.get $at) (local.get $i))
        (i32.add (i32.const 48) (i32.rem_u (local.get $m) (i32.const 10))))
      (local.set $m (i32.div_u (local.get $m) (i32.const 10)))
      (br_if $emit (i32.gt_u (local.get $i) (i32.const 0))))
    (local.get $len))
  (func (export "echo") (param $n i32) (result i32)
    (local $len i32)
    (local.set $len (call $digits (local.get $n) (i32.const 2)))
    (i32.store8 (i32.add (i32.const 2) (local.get $len)) (i32.const 10))
    (drop (call $write (i32.const 1) (i32.const 0) (i32.add (local.get $len) (i32.const 3))))
    (i32.const 0))
  (func (export "note") (param $n i32) (result i32)
    (local $len i32)
    (local.set $len (call $digits (local.get $n) (i32.const 22)))
    (drop (call $digits (local.get $n) (i32.const 64)))
    (i32.sub (i32.const 0)
      (call $fs_write (i32.const 16) (i32.add (i32.const 6) (local.get $len)) (i32.const 64) (local.get $len))))
  (func (export "exit") (param $n i32) (result i32)
    (local.get $n)))
