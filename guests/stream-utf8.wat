;; stream-utf8: the original kuro's stream-worker guest (kuro-browser-v0): UTF-8 text at offset 2048.
;;   run (a b) -> leaves E3 81 82 E3 81 93 "sum=42" ("あこsum=42", UTF-8) at 2048, NUL-terminated by the
;;                zeroed memory after it, and returns a+b.
(module
  (memory (export "memory") 1)
  (data (i32.const 2048) "\e3\81\82\e3\81\93sum=42")
  (func (export "run") (param $a i32) (param $b i32) (result i32)
    (i32.add (local.get $a) (local.get $b))))
