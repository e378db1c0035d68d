;; A component that reads the monotonic clock, sleeps for the longest duration there is (2^64 - 1 ns), and
;; reads it again. In a deterministic run the sleep moves the virtual clock instead of waiting: the clock
;; must stop at its end (2^64 - 1), never wrap around to a small reading. Export f: the second reading.
(component $C
  (import "wasi:io/poll@0.2.0" (instance $p
    (export "pollable" (type $pl (sub resource)))
    (export "[method]pollable.block" (func (param "self" (borrow $pl))))))
  (alias export $p "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer $C $pollable (type $pl0))
    (export "pollable" (type $pl (eq $pl0)))
    (export "now" (func (result u64)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $pl))))))
  (core func $block (canon lower (func $p "[method]pollable.block")))
  (core func $now (canon lower (func $clock "now")))
  (core func $sleep (canon lower (func $clock "subscribe-duration")))
  (core module $guest
    (import "h" "block" (func $block (param i32)))
    (import "h" "now" (func $now (result i64)))
    (import "h" "sleep" (func $sleep (param i64) (result i32)))
    (func (export "f") (result i64)
      (drop (call $now))
      (call $block (call $sleep (i64.const -1)))
      (call $now)))
  (core instance $g (instantiate $guest
    (with "h" (instance (export "block" (func $block)) (export "now" (func $now)) (export "sleep" (func $sleep))))))
  (func (export "f") (result u64) (canon lift (core func $g "f")))
)
