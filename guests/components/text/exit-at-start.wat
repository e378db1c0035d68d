;; A component whose core start function (run while the component is instantiated, before any export is
;; called) calls wasi:cli/exit with err: the run ends there with exit code 1, as a WASI command that exits.
;; Export f (never reached): 42.
(component
  (import "wasi:cli/exit@0.2.0" (instance $exit
    (export "exit" (func (param "status" (result))))))
  (core func $exit (canon lower (func $exit "exit")))
  (core module $guest
    (import "h" "exit" (func $exit (param i32)))
    (func $start (call $exit (i32.const 1)))
    (start $start)
    (func (export "f") (result i32) (i32.const 42)))
  (core instance $g (instantiate $guest (with "h" (instance (export "exit" (func $exit))))))
  (func (export "f") (result u32) (canon lift (core func $g "f")))
)
