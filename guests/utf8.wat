;; utf8: writes multi-byte UTF-8 split across writes: "あこsum=42".
;;   run -> writes E3 81 | 82 E3 | 81 93 | "sum=42" as four chunks; returns 0
(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\e3\81\82\e3\81\93sum=42")
  (func (export "run") (result i32)
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 2)))
    (drop (call $write (i32.const 1) (i32.const 2) (i32.const 2)))
    (drop (call $write (i32.const 1) (i32.const 4) (i32.const 2)))
    (drop (call $write (i32.const 1) (i32.const 6) (i32.const 6)))
    (i32.const 0)))
