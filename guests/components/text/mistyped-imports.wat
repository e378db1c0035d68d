;; A hostile component (component text, not a world: no WIT can state these imports): it imports functions
;; of the kuro world and of WASI under their names but with other types, and each export calls one of them.
;; The host must not read a value as the type its own function declares (a u64 read as a list<u8> is a
;; wild pointer in the host) nor write a result the guest did not declare: each call is the guest's trap.
(component
  (import "kuro:host/output@1.0.0" (instance $out
    (export "write" (func (param "s" u64) (param "data" u64)))))
  (import "kuro:host/fs@1.0.0" (instance $fs
    (export "read" (func (param "path" u64) (result u32)))
    (export "stat" (func (param "path" string)))))
  (import "wasi:io/poll@0.2.0" (instance $poll
    (export "poll" (func (param "in" (list u64)) (result (list u32))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 4096)))
  (core instance $m (instantiate $mem))
  (core func $write (canon lower (func $out "write")))
  (core func $read (canon lower (func $fs "read")))
  (core func $stat (canon lower (func $fs "stat") (memory (core memory $m "memory")) string-encoding=utf8))
  (core func $poll (canon lower (func $poll "poll")
    (memory (core memory $m "memory")) (realloc (core func $m "realloc"))))
  (core module $guest
    (import "h" "write" (func $write (param i64 i64)))
    (import "h" "read" (func $read (param i64) (result i32)))
    (import "h" "stat" (func $stat (param i32 i32)))
    (import "h" "poll" (func $poll (param i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "a.txt")
    (data (i32.const 32) "\ef\be\ad\de\ef\be\ad\de\01\00\00\00\00\00\00\00")
    ;; a u64 of 1000000 where a list<u8> belongs: its "data pointer" would be whatever lies beside it
    (func (export "write") (call $write (i64.const 0) (i64.const 1000000)))
    (func (export "read") (result i32) (call $read (i64.const 5)))
    (func (export "stat") (call $stat (i32.const 16) (i32.const 5)))
    ;; two u64s where borrow<pollable> handles belong
    (func (export "poll") (result i32) (call $poll (i32.const 32) (i32.const 2) (i32.const 64)) (i32.const 0)))
  (core instance $g (instantiate $guest
    (with "h" (instance
      (export "write" (func $write)) (export "read" (func $read)) (export "stat" (func $stat))
      (export "poll" (func $poll)) (export "memory" (memory $m "memory"))))))
  (func (export "write") (canon lift (core func $g "write")))
  (func (export "read") (result u32) (canon lift (core func $g "read")))
  (func (export "stat") (canon lift (core func $g "stat")))
  (func (export "poll") (result u32) (canon lift (core func $g "poll")))
)
