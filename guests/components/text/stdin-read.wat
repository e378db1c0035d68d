;; A component making one WASI stdin read (wasi:io/streams input-stream.read) of n bytes; export `read` answers
;; the number of bytes it got, or 4294967295 when the stream answered an error (closed). What the host hands
;; back is bounded by its own limits (kuro_wasm/host/wasi_p2.py _read), and a read of 0 bytes asks for nothing.
(component $C
  (import "wasi:io/error@0.2.0" (instance $e (export "error" (type (sub resource)))))
  (alias export $e "error" (type $error))
  (import "wasi:io/streams@0.2.0" (instance $s
    (alias outer $C $error (type $err))
    (export "error" (type $errx (eq $err)))
    (type $se (variant (case "last-operation-failed" (own $errx)) (case "closed")))
    (export "stream-error" (type $sev (eq $se)))
    (export "input-stream" (type $is (sub resource)))
    (export "[method]input-stream.read"
      (func (param "self" (borrow $is)) (param "len" u64) (result (result (list u8) (error $sev)))))))
  (alias export $s "input-stream" (type $is))
  (import "wasi:cli/stdin@0.2.0" (instance $in
    (alias outer $C $is (type $i)) (export "input-stream" (type $i2 (eq $i)))
    (export "get-stdin" (func (result (own $i2))))))
  (core module $mem
    (memory (export "memory") 40)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 65536)))
  (core instance $m (instantiate $mem))
  (core func $get-stdin (canon lower (func $in "get-stdin")))
  (core func $read (canon lower (func $s "[method]input-stream.read")
    (memory (core memory $m "memory")) (realloc (core func $m "realloc"))))
  (core module $guest
    (import "h" "get-stdin" (func $get-stdin (result i32)))
    (import "h" "read" (func $read (param i32 i64 i32)))
    (import "h" "memory" (memory 40))
    ;; the result<list<u8>, stream-error> at 64: its case at 64, the list's length at 72
    (func (export "read") (param $n i64) (result i32)
      (call $read (call $get-stdin) (local.get $n) (i32.const 64))
      (if (result i32) (i32.load8_u (i32.const 64))
        (then (i32.const -1))
        (else (i32.load (i32.const 72))))))
  (core instance $g (instantiate $guest
    (with "h" (instance
      (export "get-stdin" (func $get-stdin)) (export "read" (func $read)) (export "memory" (memory $m "memory"))))))
  (func (export "read") (param "n" u64) (result u32) (canon lift (core func $g "read")))
)
