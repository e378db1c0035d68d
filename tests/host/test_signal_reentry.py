"""A signal handler may make a run at any point of another run on the main thread: nothing deadlocks.

Python runs a signal handler on the main thread between two bytecodes of whatever that thread runs —
during a run, inside the host's own code, with its locks held. A handler that makes a run of its own then
takes the same locks on the same thread. The script below makes one warm run, counts the C calls it
returns from, and then, for each such point in turn, makes the run again with a signal arriving right
there; the handler makes a run (a nested one, on the main thread). A lock a run takes that is not
re-entrant hangs the script; faulthandler ends it with the stacks, so the test fails instead of hanging.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hostkit import component

HANG_GUARD = 60.0  # seconds for the whole script: only so a deadlock fails instead of hanging the suite

_SCRIPT = """
import faulthandler, json, os, signal, sys
faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.cache import ModuleCache
from kuro_wasm.host.loader import add_guest, forget_prepared
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
with open(sys.argv[1], "rb") as f:
    spin = add_guest(store, f.read() if sys.argv[1].endswith(".wasm") else f.read().decode())
sess = session("s-handler", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
export, args = json.loads(sys.argv[4])
spec = guest(spin, export, args)
home = sys.argv[3] if sys.argv[3] != "-" else False
inner = []


def handler(_signum, _frame):
    inner.append(run(sess, spec, store=store, home=home)["kuro/outcome"])


def outer():
    if home is not False:  # every run loads from the disk layer of the module cache
        forget_prepared()
        ModuleCache.forget_memory()
    return run(sess, spec, store=store, home=home)["kuro/outcome"]


signal.signal(signal.SIGUSR1, handler)
outer()
points = [0]


def counting(_frame, event, _arg):
    if event == "c_return":
        points[0] += 1


sys.setprofile(counting)
outer()
sys.setprofile(None)
for at in range(1, points[0] + 1):
    seen = [0]

    def firing(_frame, event, _arg, at=at):
        if event == "c_return":
            seen[0] += 1
            if seen[0] == at:
                os.kill(os.getpid(), signal.SIGUSR1)

    inner.clear()
    sys.setprofile(firing)
    got = outer()
    sys.setprofile(None)
    assert (got, inner) in (("ok", []), ("ok", ["ok"])), (at, got, inner)
print(points[0] > 50, end="")
"""


@pytest.mark.parametrize(
    ("layer", "kind"), [("memory", "core"), ("disk", "core"), ("memory", "component"), ("disk", "component")]
)
def test_a_run_made_by_a_signal_handler_at_any_point_of_a_main_thread_run_completes(
    tmp_path: Path, layer: str, kind: str
) -> None:
    script = tmp_path / "reentry.py"
    script.write_text(_SCRIPT, encoding="utf-8")
    if kind == "component":  # the kuro:host world's linker and thunk locks are taken too
        guest_file = tmp_path / "typed.wasm"
        guest_file.write_bytes(component("typed"))
        call = json.dumps(["run", []])
    else:
        guest_file = Path(__file__).resolve().parents[2] / "guests" / "spin.wat"
        call = json.dumps(["count", [1]])
    home = str(tmp_path / "home") if layer == "disk" else "-"
    done = subprocess.run(
        [sys.executable, str(script), str(guest_file), str(HANG_GUARD), home, call],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD + 30,
    )
    assert (done.returncode, done.stdout) == (0, "True"), done.stderr[-3000:]


_PROCESS_SCRIPT = """
import faulthandler, json, signal, sys, threading, time
faulthandler.dump_traceback_later(float(sys.argv[3]), exit=True)
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
with open(sys.argv[1], encoding="utf-8") as f:
    spin = add_guest(store, f.read())
sess = session("s-handler", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
landed, inner = [], []
main = threading.main_thread()
with WorkerPool(int(sys.argv[2]), spare=0) as pool:
    assert pool.wait_ready(60)

    def handler(_signum, frame):
        landed.append(frame.f_code.co_name)
        try:
            inner.append(run(sess, guest(spin, "count", [1]), store=store, isolation=pool)["kuro/outcome"])
        except Exception as exc:
            inner.append(repr(exc))
        print("handler's run:", inner, file=sys.stderr, flush=True)

    def fire():  # once the main thread waits in poll for its run's frames: the run cannot end before its deadline
        while sys._current_frames()[main.ident].f_code.co_name != "_await":
            time.sleep(0.001)
        signal.pthread_kill(main.ident, signal.SIGUSR1)

    signal.signal(signal.SIGUSR1, handler)
    run(sess, guest(spin, "count", [1]), store=store, isolation=pool)  # warm: the worker has the guest
    threading.Thread(target=fire, daemon=True).start()
    outer = run(sess, guest(spin, "run"), store=store, isolation=pool, timeout_ms=1500)["kuro/outcome"]
    after = run(sess, guest(spin, "count", [1]), store=store, isolation=pool)["kuro/outcome"]
print(json.dumps([landed, inner, outer, after]), end="")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_made_by_a_signal_handler_while_a_main_thread_process_run_waits_for_its_frames_completes(
    tmp_path: Path, workers: int
) -> None:
    """The handler's run lands on the outer run's worker (1: the same worker, after the outer's end) or on another (2).

    Its caller hands the outer run's channel on to the worker's keeper while it waits; the outer's wait (restarted
    in ``poll`` when the handler returns) is woken to take the channel back — or to find its run ended, its
    receipt read by the keeper — and never reads a frame the keeper reads. On the same worker the handler's run
    waits for its own frames while the outer's wait is still inside ``poll`` on the main thread."""
    script = tmp_path / "process_reentry.py"
    script.write_text(_PROCESS_SCRIPT, encoding="utf-8")
    spin = Path(__file__).resolve().parents[2] / "guests" / "spin.wat"
    done = subprocess.run(
        [sys.executable, str(script), str(spin), str(workers), "30"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, json.dumps([["_await"], ["ok"], "timeout", "ok"])), done.stderr[-3000:]
