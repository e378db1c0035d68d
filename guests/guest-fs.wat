;; guest-fs: the original kuro's capability demo guest (kuro-browser-v0), unchanged in behaviour.
;;   run (len) -> fs_read(2048, len), ignoring its result, then returns the sum of the bytes in
;;                [2048, 2048+len). The file is the one the guest spec names (kuro/fs-read-path);
;;                without fs/read the import returns -1 and copies nothing, so the sum is 0.
(module
  (import "kuro" "fs_read" (func $fs_read (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (param $len i32) (result i32)
    (local $i i32) (local $sum i32)
    (drop (call $fs_read (i32.const 2048) (local.get $len)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $sum (i32.add (local.get $sum)
          (i32.load8_u (i32.add (i32.const 2048) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $sum)))
