;; A component that makes N pollables (subscribe-duration) and drops none: past its store's handle limit
;; wasmtime refuses one more, which is the guest's trap (it holds them), not the host's error. Export f(n): 0.
(component $C
  (import "wasi:io/poll@0.2.0" (instance $p
    (export "pollable" (type $pl (sub resource)))))
  (alias export $p "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer $C $pollable (type $pl0))
    (export "pollable" (type $pl (eq $pl0)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $pl))))))
  (core func $sleep (canon lower (func $clock "subscribe-duration")))
  (core module $guest
    (import "h" "sleep" (func $sleep (param i64) (result i32)))
    (func (export "f") (param $n i32) (result i32)
      (block $done (loop $l
        (br_if $done (i32.eqz (local.get $n)))
        (drop (call $sleep (i64.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $l)))
      (i32.const 0)))
  (core instance $g (instantiate $guest (with "h" (instance (export "sleep" (func $sleep))))))
  (func (export "f") (param "n" u32) (result u32) (canon lift (core func $g "f")))
)
