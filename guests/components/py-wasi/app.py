"""Component fixture in Python built *with* WASI imports (componentize-py, no --stub-wasi): it
prints, reads its environment, the clocks and randomness, and tries a file outside kuro.fs.

run(args): prints "hello <args>" (stdout, print), "env <KURO_GREETING>" and "stderr works"
(sys.stderr), whether the clocks moved forward, whether open("/etc/passwd") was refused, the length
of 8 random bytes, and cats args[0] through kuro.fs when given. Exit code 0.
run(["--stdin"]): reads stdin to its end through WASI (sys.stdin) and prints its length.
run(["--sleep"]): sleeps an hour (time.sleep: a WASI pollable on the monotonic clock) and prints the
whole seconds the monotonic clock moved ("slept 3600" in a deterministic run, which does not wait).
"""

import os
import random
import sys
import time

import wit_world
from componentize_py_types import Err
from wit_world.imports import fs, output, types


class WitWorld(wit_world.WitWorld):
    def run(self, args: list[str]) -> int:
        if args == ["--stdin"]:
            print("stdin", len(sys.stdin.buffer.read()))
            return 0
        if args == ["--sleep"]:
            m0 = time.monotonic()
            time.sleep(3600)
            print("slept", int(time.monotonic() - m0))
            return 0
        print("hello", " ".join(args))
        print("env", os.environ.get("KURO_GREETING", "(unset)"))
        print("stderr works", file=sys.stderr)
        t0, m0 = time.time(), time.monotonic()
        print("clocks", "forward" if time.time() >= t0 and time.monotonic() >= m0 else "backward")
        try:
            open("/etc/passwd").read()
            print("open: allowed")
        except OSError as exc:
            print("open: refused", type(exc).__name__)
        print("random", len(os.urandom(8)), random.random() < 1.0)
        if args:
            try:
                output.write(types.Stream.STDOUT, fs.read(args[0]))
            except Err as e:
                print("cat:", e.value, file=sys.stderr)
                return 1
        sys.stdout.flush()
        return 0
