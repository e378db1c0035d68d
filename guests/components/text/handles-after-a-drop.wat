;; A component holding WASI handles (written as component text: its WIT stand-ins here have no wasi:io):
;; it gets stdout and stderr, drops stdout, gets stdin, then writes to stderr. The new handle must not take
;; the rep of a live one (stderr would then be stdin, the write answered err closed). Export f: the case (0 ok).
(component $C
  (import "wasi:io/error@0.2.0" (instance $e (export "error" (type (sub resource)))))
  (alias export $e "error" (type $error))
  (import "wasi:io/streams@0.2.0" (instance $s
    (alias outer $C $error (type $err))
    (export "error" (type $errx (eq $err)))
    (type $se (variant (case "last-operation-failed" (own $errx)) (case "closed")))
    (export "stream-error" (type $sev (eq $se)))
    (export "output-stream" (type $os (sub resource)))
    (export "input-stream" (type $is (sub resource)))
    (export "[method]output-stream.blocking-write-and-flush"
      (func (param "self" (borrow $os)) (param "contents" (list u8)) (result (result (error $sev)))))))
  (alias export $s "output-stream" (type $os))
  (alias export $s "input-stream" (type $is))
  (import "wasi:cli/stdout@0.2.0" (instance $out
    (alias outer $C $os (type $o)) (export "output-stream" (type $o2 (eq $o)))
    (export "get-stdout" (func (result (own $o2))))))
  (import "wasi:cli/stderr@0.2.0" (instance $err
    (alias outer $C $os (type $o)) (export "output-stream" (type $o2 (eq $o)))
    (export "get-stderr" (func (result (own $o2))))))
  (import "wasi:cli/stdin@0.2.0" (instance $in
    (alias outer $C $is (type $i)) (export "input-stream" (type $i2 (eq $i)))
    (export "get-stdin" (func (result (own $i2))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 4096)))
  (core instance $m (instantiate $mem))
  (core func $get-stdout (canon lower (func $out "get-stdout")))
  (core func $get-stderr (canon lower (func $err "get-stderr")))
  (core func $get-stdin (canon lower (func $in "get-stdin")))
  (core func $drop-out (canon resource.drop $os))
  (core func $write (canon lower (func $s "[method]output-stream.blocking-write-and-flush")
    (memory (core memory $m "memory"))))
  (core module $guest
    (import "h" "get-stdout" (func $get-stdout (result i32)))
    (import "h" "get-stderr" (func $get-stderr (result i32)))
    (import "h" "get-stdin" (func $get-stdin (result i32)))
    (import "h" "drop-out" (func $drop-out (param i32)))
    (import "h" "write" (func $write (param i32 i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "to stderr\n")
    ;; stdout, stderr; drop stdout; stdin; then write to stderr: answers the result's case (0 ok, 1 err)
    (func (export "f") (result i32)
      (local $out i32) (local $err i32)
      (local.set $out (call $get-stdout))
      (local.set $err (call $get-stderr))
      (call $drop-out (local.get $out))
      (drop (call $get-stdin))
      (call $write (local.get $err) (i32.const 16) (i32.const 10) (i32.const 64))
      (i32.load8_u (i32.const 64))))
  (core instance $g (instantiate $guest
    (with "h" (instance
      (export "get-stdout" (func $get-stdout)) (export "get-stderr" (func $get-stderr))
      (export "get-stdin" (func $get-stdin)) (export "drop-out" (func $drop-out))
      (export "write" (func $write)) (export "memory" (memory $m "memory"))))))
  (func (export "f") (result u32) (canon lift (core func $g "f")))
)
