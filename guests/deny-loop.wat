;; deny-loop: calls fs_read over and over (run it without fs/read: every call is refused).
;; Each export returns 0 after n calls; the receipt's kuro/denials must stay bounded.
;;   same (n)          -> n calls with the path "greeting.txt"
;;   distinct (n)      -> n calls, the i-th with the 4-digit path of i ("0000", "0001", …)
;;   long (n, len)     -> n calls with a path of len bytes (NULs: valid UTF-8, too long to name a file)
(module
  (import "kuro" "fs_read" (func $fs_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "greeting.txt")
  (func $digit (param $at i32) (param $v i32)
    (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10)))))
  (func (export "same") (param $n i32) (result i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (drop (call $fs_read (i32.const 16) (i32.const 12) (i32.const 1024) (i32.const 0)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 0))
  (func (export "distinct") (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $digit (i32.const 0) (i32.div_u (local.get $i) (i32.const 1000)))
        (call $digit (i32.const 1) (i32.div_u (local.get $i) (i32.const 100)))
        (call $digit (i32.const 2) (i32.div_u (local.get $i) (i32.const 10)))
        (call $digit (i32.const 3) (local.get $i))
        (drop (call $fs_read (i32.const 0) (i32.const 4) (i32.const 1024) (i32.const 0)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))
  (func (export "long") (param $n i32) (param $len i32) (result i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (drop (call $fs_read (i32.const 2048) (local.get $len) (i32.const 1024) (i32.const 0)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 0)))
