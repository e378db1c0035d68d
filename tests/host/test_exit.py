"""The host must never crash the interpreter on its way out.

wasmtime objects that die during interpreter shutdown (a shared linker, a store kept
alive by a handle) must not call back into Python: ctypes thunks may already be
freed then, and a call into one is a segfault at exit (seen: exit status 139 after a
green test run). These tests run a real program in a subprocess and check its exit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kuro_wasm.host import engine

GUESTS = Path(__file__).resolve().parents[2] / "guests"

PROGRAM = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kuro_fs import Fs, MemoryBlockStore
    from kuro_wasm import add_guest, guest, run, session, start

    guests, home = Path(sys.argv[1]), Path(sys.argv[2])
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("exit", fs.root)
    hello = add_guest(store, (guests / "hello.wat").read_bytes())
    spin = add_guest(store, (guests / "spin.wat").read_bytes())
    assert run(sess, guest(hello, "run"), store=store, fs=fs, home=home)["kuro/exit-code"] == 0
    killed = start(sess, guest(spin, "run"), store=store, fs=fs, home=home)
    killed.kill()
    assert killed.wait(10)["kuro/exit-code"] == 130
    kept_alive = start(sess, guest(hello, "run"), store=store, fs=fs, home=home)
    kept_alive.wait(10)
    print("done", flush=True)
    """
)


def test_a_program_that_ran_guests_exits_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM, encoding="utf-8")
    for _ in range(3):  # the crash depended on teardown order: try more than once
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", str(script), str(GUESTS), str(tmp_path / "home")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr[-2000:]


def test_finished_runs_leave_no_interrupt_registration_behind() -> None:
    from kuro_fs import Fs, MemoryBlockStore
    from kuro_wasm import add_guest, guest, run, session

    store = MemoryBlockStore()
    fs = Fs.empty(store)
    hello = add_guest(store, (GUESTS / "hello.wat").read_bytes())
    before = len(engine._CHECKS)
    for _ in range(5):
        run(session("leak", fs.root), guest(hello, "run"), store=store, fs=fs, home=False)
    assert len(engine._CHECKS) == before
