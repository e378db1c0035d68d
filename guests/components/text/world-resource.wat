;; A component importing a resource type from a kuro world instance: the world has no resources,
;; so this is a load-error naming it (as a function the world lacks is).
(component
  (import "kuro:host/fs@1.0.0" (instance $fs
    (export "handle" (type (sub resource)))))
  (core module $m (func (export "f") (result i32) (i32.const 7)))
  (core instance $i (instantiate $m))
  (func (export "f") (result u32) (canon lift (core func $i "f")))
)
