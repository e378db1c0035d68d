;; fs-sum: the checksum guest of the original design.
;;   run (len)     -> fs_read "greeting.txt" into memory at 2048 (cap len), return the sum of the bytes
;;                    in [2048, 2048+len). A refused read copies nothing, so the sum is 0.
;;   read_big (cap) -> grow memory to hold cap bytes at 65536, fs_read "big.bin" there;
;;                    0 if the whole file was copied, the negated error code otherwise (benchmarks)
;;   read_big_twice (cap) -> the same, then fs_read again into the same (now touched) memory: the
;;                    difference to read_big is the cost of one gated read alone (benchmarks)
(module
  (import "kuro" "fs_read" (func $fs_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "greeting.txt")
  (data (i32.const 16) "big.bin")
  (func (export "run") (param $len i32) (result i32)
    (local $i i32) (local $sum i32)
    (drop (call $fs_read (i32.const 0) (i32.const 12) (i32.const 2048) (local.get $len)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $sum (i32.add (local.get $sum)
          (i32.load8_u (i32.add (i32.const 2048) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $sum))
  (func $read_big (export "read_big") (param $cap i32) (result i32)
    (local $need i32) (local $n i32)
    (local.set $need (i32.add (i32.const 2)
      (i32.shr_u (local.get $cap) (i32.const 16))))
    (if (i32.gt_u (local.get $need) (memory.size))
      (then (drop (memory.grow (i32.sub (local.get $need) (memory.size))))))
    (local.set $n (call $fs_read (i32.const 16) (i32.const 7) (i32.const 65536) (local.get $cap)))
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then (return (i32.sub (i32.const 0) (local.get $n)))))
    (i32.const 0))
  (func (export "read_big_twice") (param $cap i32) (result i32)
    (local $r i32)
    (local.set $r (call $read_big (local.get $cap)))
    (if (local.get $r) (then (return (local.get $r))))
    (call $read_big (local.get $cap))))
