;; A hostile component against the canonical ABI (component text): each export breaks one of its rules, and
;; the answer is a trap — on the engine's component path and on the host's own canonical ABI alike
;; (tests/host/test_canonical_abi.py). `bool-seven` breaks none: a bool is any non-zero value.
;;   oob-realloc(s)   its realloc answers a pointer outside memory for the string argument
;;   odd-realloc(l)   its realloc answers a pointer misaligned for a list<u32> argument
;;   trap-realloc(s)  its realloc traps
;;   bad-utf8()       returns a string that is not UTF-8
;;   huge-list()      returns a list<u8> of 2^32 - 1 bytes at 0 (past memory)
;;   bad-char()       returns 0xd800 as a char
;;   bad-option()     returns an option<u32> with discriminant 7
;;   read-oob()       calls fs.read("a.txt") with a realloc answering outside memory for the host's answer
;;   read-wild()      calls fs.read with a path of 8 MiB at 0xffff0000 (outside memory; past any bound too)
(component
  (import "kuro:host/fs@1.0.0" (instance $fs
    (type $c0 (enum "denied" "not-found" "wrong-type" "bad-path" "fault" "not-empty" "io" "bad-fd" "too-large"))
    (export "error-code" (type $errc (eq $c0)))
    (export "read" (func (param "path" string) (result (result (list u8) (error $errc)))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "oob") (param i32 i32 i32 i32) (result i32) (i32.const -16))
    (func (export "odd") (param i32 i32 i32 i32) (result i32) (i32.const 4097))
    (func (export "bad") (param i32 i32 i32 i32) (result i32) unreachable)
    (func (export "ok") (param i32 i32 i32 i32) (result i32) (i32.const 8192)))
  (core instance $m (instantiate $mem))
  (core func $read (canon lower (func $fs "read") (memory (core memory $m "memory")) (realloc (core func $m "oob"))
    string-encoding=utf8))
  (core module $guest
    (import "h" "read" (func $read (param i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "\ff\fe")
    (data (i32.const 32) "\10\00\00\00\02\00\00\00")      ;; (ptr 16, len 2)
    (data (i32.const 48) "\00\00\00\00\ff\ff\ff\ff")      ;; (ptr 0, len 2^32 - 1)
    (data (i32.const 64) "\07\00\00\00\01\00\00\00")      ;; option disc 7
    (data (i32.const 80) "a.txt")
    (func (export "take") (param i32 i32) (result i32) (i32.const 0))
    (func (export "bad-utf8") (result i32) (i32.const 32))
    (func (export "huge-list") (result i32) (i32.const 48))
    (func (export "bad-char") (result i32) (i32.const 0xd800))
    (func (export "bad-option") (result i32) (i32.const 64))
    (func (export "bool-seven") (result i32) (i32.const 7))
    (func (export "read-oob") (result i32) (call $read (i32.const 80) (i32.const 5) (i32.const 96)) (i32.const 0))
    (func (export "read-wild") (result i32) (call $read (i32.const 0xffff0000) (i32.const 0x800000) (i32.const 96)) (i32.const 0)))
  (core instance $g (instantiate $guest
    (with "h" (instance (export "read" (func $read)) (export "memory" (memory $m "memory"))))))
  (func (export "oob-realloc") (param "s" string) (result u32)
    (canon lift (core func $g "take") (memory (core memory $m "memory")) (realloc (core func $m "oob")) string-encoding=utf8))
  (func (export "odd-realloc") (param "l" (list u32)) (result u32)
    (canon lift (core func $g "take") (memory (core memory $m "memory")) (realloc (core func $m "odd"))))
  (func (export "trap-realloc") (param "s" string) (result u32)
    (canon lift (core func $g "take") (memory (core memory $m "memory")) (realloc (core func $m "bad")) string-encoding=utf8))
  (func (export "bad-utf8") (result string)
    (canon lift (core func $g "bad-utf8") (memory (core memory $m "memory")) string-encoding=utf8))
  (func (export "huge-list") (result (list u8)) (canon lift (core func $g "huge-list") (memory (core memory $m "memory"))))
  (func (export "bad-char") (result char) (canon lift (core func $g "bad-char")))
  (func (export "bad-option") (result (option u32)) (canon lift (core func $g "bad-option") (memory (core memory $m "memory"))))
  (func (export "bool-seven") (result bool) (canon lift (core func $g "bool-seven")))
  (func (export "read-oob") (result u32) (canon lift (core func $g "read-oob")))
  (func (export "read-wild") (result u32) (canon lift (core func $g "read-wild")))
)
