"""Why workers are forked from an engine-less zygote: a child forked after its parent compiled hangs compiling.

The hang is in wasmtime's parallel compilation (its thread pool exists in the parent only); these
tests keep the hazard, and the rule the zygote follows, visible. Each child runs under a bound, and a
hung child is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from kuro_wasm.host.worker.pool import WorkerPool

SCRIPT = textwrap.dedent(
    """
    import os, sys, time, wasmtime
    wasm = wasmtime.wat2wasm('(module (func (export "f") (result i32) i32.const 1))')
    if sys.argv[1] == "compiled":
        wasmtime.Module(wasmtime.Engine(), wasm)  # the parent compiles: wasmtime's compile threads now exist
    pid = os.fork()
    if pid == 0:
        wasmtime.Module(wasmtime.Engine(), wasm)
        os._exit(0)
    deadline = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            print("compiled")
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("hung")
    """
)


def _child_compiles(mode: str, bound_s: float) -> str:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(bound_s)], capture_output=True, text=True, timeout=120
    )
    return out.stdout.strip()


def test_a_child_forked_after_its_parent_compiled_hangs_when_it_compiles() -> None:
    assert _child_compiles("compiled", 3.0) == "hung"


def test_a_child_forked_before_any_engine_existed_compiles() -> None:
    assert _child_compiles("fresh", 60.0) == "compiled"


def test_the_zygote_forks_with_one_thread_and_its_workers_compile(pool: WorkerPool) -> None:
    from kuro_fs.blocks import MemoryBlockStore
    from kuro_fs.fs import Fs
    from kuro_wasm.host.api import run
    from kuro_wasm.host.loader import add_guest
    from kuro_wasm.model.sessions import guest, session

    store = MemoryBlockStore()
    fresh = add_guest(store, f'(module (func (export "run") (result i32) (i32.const {id(store) % 1000})))')
    receipt = run(session("s", Fs.empty(store).root), guest(fresh, "run"), store=store, isolation=pool, home=False)
    assert receipt["kuro/outcome"] in ("ok", "exit")  # compiled in a forked worker, not hung
    assert os.listdir(f"/proc/{pool.zygote_pid}/task") == [str(pool.zygote_pid)]
