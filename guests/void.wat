;; void: an export with no result; the exit code is 0.
(module
  (global $ran (mut i32) (i32.const 0))
  (func (export "run") (global.set $ran (i32.const 1))))
