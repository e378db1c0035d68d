;; A hostile component importing output.write with its own stream enum (stdin, bogus): the host's
;; function must not write to a stream it does not have. Its export "f" writes "hello" to stream "bogus".
(component
  (import "kuro:host/output@1.0.0" (instance $out
    (type $e0 (enum "stdin" "bogus"))
    (export "stream" (type $e (eq $e0)))
    (type $c0 (enum "denied"))
    (export "error-code" (type $errc (eq $c0)))
    (export "write" (func (param "s" $e) (param "data" (list u8)) (result (result (error $errc)))))))
  (core module $mem
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 4096)))
  (core instance $m (instantiate $mem))
  (core func $write (canon lower (func $out "write") (memory (core memory $m "memory"))))
  (core module $guest
    (import "h" "write" (func $write (param i32 i32 i32 i32)))
    (import "h" "memory" (memory 1))
    (data (i32.const 16) "hello")
    (func (export "f") (call $write (i32.const 1) (i32.const 16) (i32.const 5) (i32.const 64))))
  (core instance $g (instantiate $guest
    (with "h" (instance (export "write" (func $write)) (export "memory" (memory $m "memory"))))))
  (func (export "f") (canon lift (core func $g "f")))
)
