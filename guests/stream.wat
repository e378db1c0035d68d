;; stream: the original kuro's browser stream guest (kuro-browser-v0), byte for byte in behaviour.
;;   run (a b) -> writes "sum=" and the two ASCII digits '0'+(a+b)/10, '0'+(a+b)%10 at offset 2048
;;                (NUL-terminated by the zeroed memory after it) and returns a+b. No imports: the host
;;                delivers the text at 2048 as one stdout chunk when run returns.
;;   A sum of 100 or more gives a non-digit character, as in the original.
(module
  (memory (export "memory") 1)
  (func (export "run") (param $a i32) (param $b i32) (result i32)
    (local $sum i32)
    (local.set $sum (i32.add (local.get $a) (local.get $b)))
    (i32.store8 (i32.const 2048) (i32.const 115))   ;; s
    (i32.store8 (i32.const 2049) (i32.const 117))   ;; u
    (i32.store8 (i32.const 2050) (i32.const 109))   ;; m
    (i32.store8 (i32.const 2051) (i32.const 61))    ;; =
    (i32.store8 (i32.const 2052) (i32.add (i32.const 48) (i32.div_u (local.get $sum) (i32.const 10))))
    (i32.store8 (i32.const 2053) (i32.add (i32.const 48) (i32.rem_u (local.get $sum) (i32.const 10))))
    (local.get $sum)))
