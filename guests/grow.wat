;; grow: grows memory one page at a time until memory.grow answers -1.
;;   run -> the number of pages it managed to add (the exit code)
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (local $pages i32)
    (block $refused
      (loop $more
        (br_if $refused (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (local.set $pages (i32.add (local.get $pages) (i32.const 1)))
        (br_if $refused (i32.ge_u (local.get $pages) (i32.const 65535)))
        (br $more)))
    (local.get $pages)))
