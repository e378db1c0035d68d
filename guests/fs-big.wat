;; fs-big: writes a file of n bytes (byte i = (i * 31) mod 256) to "data/big.bin", then asks its size back.
;;   run (n) -> grows memory to hold n bytes at 65536, fills them, fs_write "data/big.bin", then fs_read with
;;              cap 0 (a size query); returns the size, or the negated error code of the call that failed.
;;   Files over 262144 bytes are UnixFS DAGs (a dag-pb root over raw leaves): both hosts must mint the same root.
(module
  (import "kuro" "fs_write" (func $fs_write (param i32 i32 i32 i32) (result i32)))
  (import "kuro" "fs_read" (func $fs_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "data/big.bin")
  (func (export "run") (param $n i32) (result i32)
    (local $i i32) (local $need i32) (local $r i32)
    (local.set $need (i32.add (i32.const 2) (i32.shr_u (local.get $n) (i32.const 16))))
    (if (i32.gt_u (local.get $need) (memory.size))
      (then (drop (memory.grow (i32.sub (local.get $need) (memory.size))))))
    (block $done
      (loop $fill
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store8 (i32.add (i32.const 65536) (local.get $i)) (i32.mul (local.get $i) (i32.const 31)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $fill)))
    (local.set $r (call $fs_write (i32.const 0) (i32.const 12) (i32.const 65536) (local.get $n)))
    (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (i32.sub (i32.const 0) (local.get $r)))))
    (call $fs_read (i32.const 0) (i32.const 12) (i32.const 65536) (i32.const 0))))
