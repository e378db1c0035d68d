;; A component writing to WASI stdout with and without the permits WASI 0.2 requires: a `write` must be within
;; what `check-write` last permitted (less what was written since), and `blocking-write-and-flush` takes at
;; most 4096 bytes a call; past either the guest traps (as the spec says, and wasmtime's own WASI does for the
;; latter). Exports, each taking n, writing n bytes (of "x") and answering 0:
;;   write           check-write, then write n
;;   write-twice     check-write, then write n, then write n again (the permit is used up)
;;   write-unchecked write n with no check-write before it
;;   blocking        blocking-write-and-flush n
(component $C
  (import "wasi:io/error@0.2.0" (instance $e (export "error" (type (sub resource)))))
  (alias export $e "error" (type $error))
  (import "wasi:io/streams@0.2.0" (instance $s
    (alias outer $C $error (type $err))
    (export "error" (type $errx (eq $err)))
    (type $se (variant (case "last-operation-failed" (own $errx)) (case "closed")))
    (export "stream-error" (type $sev (eq $se)))
    (export "output-stream" (type $os (sub resource)))
    (export "[method]output-stream.check-write"
      (func (param "self" (borrow $os)) (result (result u64 (error $sev)))))
    (export "[method]output-stream.write"
      (func (param "self" (borrow $os)) (param "contents" (list u8)) (result (result (error $sev)))))
    (export "[method]output-stream.blocking-write-and-flush"
      (func (param "self" (borrow $os)) (param "contents" (list u8)) (result (result (error $sev)))))))
  (alias export $s "output-stream" (type $os))
  (import "wasi:cli/stdout@0.2.0" (instance $out
    (alias outer $C $os (type $o)) (export "output-stream" (type $o2 (eq $o)))
    (export "get-stdout" (func (result (own $o2))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $m (instantiate $mem))
  (core func $get-stdout (canon lower (func $out "get-stdout")))
  (core func $check (canon lower (func $s "[method]output-stream.check-write") (memory (core memory $m "memory"))))
  (core func $write (canon lower (func $s "[method]output-stream.write") (memory (core memory $m "memory"))))
  (core func $blocking (canon lower (func $s "[method]output-stream.blocking-write-and-flush")
    (memory (core memory $m "memory"))))
  (core module $guest
    (import "h" "get-stdout" (func $get-stdout (result i32)))
    (import "h" "check" (func $check (param i32 i32)))
    (import "h" "write" (func $write (param i32 i32 i32 i32)))
    (import "h" "blocking" (func $blocking (param i32 i32 i32 i32)))
    (import "h" "memory" (memory 1))
    ;; n bytes of "x" from 4096 (n < 61440); results at 64
    (func $fill (param $n i32) (memory.fill (i32.const 4096) (i32.const 120) (local.get $n)))
    (func (export "write") (param $n i32) (result i32) (local $o i32)
      (call $fill (local.get $n))
      (local.set $o (call $get-stdout))
      (call $check (local.get $o) (i32.const 64))
      (call $write (local.get $o) (i32.const 4096) (local.get $n) (i32.const 64))
      (i32.load8_u (i32.const 64)))
    (func (export "write-twice") (param $n i32) (result i32) (local $o i32)
      (call $fill (local.get $n))
      (local.set $o (call $get-stdout))
      (call $check (local.get $o) (i32.const 64))
      (call $write (local.get $o) (i32.const 4096) (local.get $n) (i32.const 64))
      (call $write (local.get $o) (i32.const 4096) (local.get $n) (i32.const 64))
      (i32.load8_u (i32.const 64)))
    (func (export "write-unchecked") (param $n i32) (result i32)
      (call $fill (local.get $n))
      (call $write (call $get-stdout) (i32.const 4096) (local.get $n) (i32.const 64))
      (i32.load8_u (i32.const 64)))
    (func (export "blocking") (param $n i32) (result i32)
      (call $fill (local.get $n))
      (call $blocking (call $get-stdout) (i32.const 4096) (local.get $n) (i32.const 64))
      (i32.load8_u (i32.const 64))))
  (core instance $g (instantiate $guest
    (with "h" (instance
      (export "get-stdout" (func $get-stdout)) (export "check" (func $check)) (export "write" (func $write))
      (export "blocking" (func $blocking)) (export "memory" (memory $m "memory"))))))
  (func (export "write") (param "n" u32) (result u32) (canon lift (core func $g "write")))
  (func (export "write-twice") (param "n" u32) (result u32) (canon lift (core func $g "write-twice")))
  (func (export "write-unchecked") (param "n" u32) (result u32) (canon lift (core func $g "write-unchecked")))
  (func (export "blocking") (param "n" u32) (result u32) (canon lift (core func $g "blocking")))
)
