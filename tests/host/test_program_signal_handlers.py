"""A program's own signal handler that raises during a run on the main thread: the run stops, then run() raises it.

Python runs a signal handler at the next bytecode of the main thread; during a run that is inside a
ctypes callback of wasmtime's (the epoch check, a host call) before any ``try`` of the host's. Such a
raise used to be swallowed by ctypes, which then handed wasmtime an uninitialised pointer, and the
process aborted (``free(): invalid pointer``). Each case runs in a fresh interpreter (the abort would
end the test run otherwise); faulthandler ends a hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hostkit import GUESTS, component

HANG_GUARD = 60.0  # seconds for the whole script: only so a hang fails instead of hanging the suite

_SCRIPT = """
import faulthandler, json, os, signal, sys, threading
faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
with open(sys.argv[1], "rb") as f:
    cid = add_guest(store, f.read() if sys.argv[1].endswith(".wasm") else f.read().decode())
sess = session("s-handler", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
export, args, how, warm = json.loads(sys.argv[3])
isolation = None if sys.argv[4] == "-" else sys.argv[4]
run(sess, guest(cid, *warm), store=store, home=False, isolation=isolation)  # compiled, and a worker started

if how == "alarm":
    def handler(_signum, _frame):
        raise TimeoutError("the program's own timeout")
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
else:  # a SIGTERM handler that exits
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    spec = guest(cid, export, args)
    got = run(sess, spec, store=store, home=False, timeout_ms=int(sys.argv[2]) * 1000, isolation=isolation)
    print(json.dumps({"returned": got["kuro/outcome"]}))
except BaseException as exc:
    print(json.dumps({"raised": type(exc).__name__, "args": list(exc.args), "notes": getattr(exc, "__notes__", [])}))
"""

_STOPPED = "kuro: raised during a run, which was stopped: its receipt says cancelled"


@pytest.mark.parametrize(
    ("guest_name", "call", "isolation"),
    [
        ("spin.wat", ["run", [], "alarm", ["count", [1]]], "-"),  # pure wasm: the signal lands in the epoch callback
        ("deny-loop.wat", ["same", [2**31 - 1], "alarm", ["same", [1]]], "-"),  # host calls back to back
        ("typed.wasm", ["run", ["spin"], "alarm", ["run", ["trap"]]], "-"),  # a component
        ("spin.wat", ["run", [], "exit", ["count", [1]]], "-"),  # a SIGTERM handler calling sys.exit
        ("spin.wat", ["run", [], "alarm", ["count", [1]]], "process"),  # the caller waits for a worker's frames
    ],
)
def test_a_raising_handler_stops_the_run_and_run_raises_it_after_the_receipt(
    tmp_path: Path, guest_name: str, call: list[object], isolation: str
) -> None:
    script = tmp_path / "handler.py"
    script.write_text(_SCRIPT, encoding="utf-8")
    if guest_name.endswith(".wasm"):
        guest_file = tmp_path / guest_name
        guest_file.write_bytes(component(guest_name.removesuffix(".wasm")))
    else:
        guest_file = GUESTS / guest_name
    done = subprocess.run(
        [sys.executable, str(script), str(guest_file), str(int(HANG_GUARD)), json.dumps(call), isolation],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD + 30,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    if call[2] == "alarm":
        assert got == {"raised": "TimeoutError", "args": ["the program's own timeout"], "notes": [_STOPPED]}
    else:
        assert got == {"raised": "SystemExit", "args": [3], "notes": [_STOPPED]}


_WAKEUP_SCRIPT = """
import os, signal, socket, sys
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
with open(sys.argv[1], encoding="utf-8") as f:
    cid = add_guest(store, f.read())
sess = session("s-wakeup", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
# as trio sets its wakeup fd: a socket that holds a few bytes, and no warning when it is full
read_end, write_end = socket.socketpair()
for s in (read_end, write_end):
    s.setblocking(False)
write_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
read_end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
signal.set_wakeup_fd(write_end.fileno(), warn_on_full_buffer=False)
signal.signal(signal.SIGUSR1, lambda *_: None)
assert run(sess, guest(cid, "count", [1]), store=store, home=False)["kuro/outcome"] == "ok"
for _ in range(200):  # far more than the socket holds
    os.kill(os.getpid(), signal.SIGUSR1)
print(signal.set_wakeup_fd(-1) == write_end.fileno(), end="")
"""


def test_a_main_thread_run_leaves_the_programs_wakeup_fd_warning_setting_as_it_was(tmp_path: Path) -> None:
    script = tmp_path / "wakeup.py"
    script.write_text(_WAKEUP_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(GUESTS / "spin.wat")], capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True", "")


_MID_FRAME_SCRIPT = """
import faulthandler, json, signal, sys
faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host import interrupts
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
cids = {}
for name in ("flood", "cat"):
    with open(f"{sys.argv[1]}/{name}.wat", encoding="utf-8") as f:
        cids[name] = add_guest(store, f.read())
sess = session("s-mid-frame", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke", "stdin/read"])
signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[3] == "ignored" else signal.default_int_handler)
said = []
told = interrupts.raised_after
interrupts.raised_after = lambda exc, receipt: said.append(receipt) or told(exc, receipt)  # (to see the receipt)
raised_in = []

def alarm(_signum, frame):
    # raise only while the main thread is inside the reading of a worker's frame (else let the timer fire again)
    names = set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    if "_pump" in names and not raised_in:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raised_in.append(sorted(names & {"_pump", "read_frame", "_on_frame", "chunk"}))
        raise TimeoutError("the program's own timeout")

with WorkerPool(1, spare=0) as pool:
    warm = run(sess, guest(cids["cat"], "run"), store=store, isolation=pool, stdin=b"warm")
    signal.signal(signal.SIGALRM, alarm)
    out = {"runs": 0}
    while not raised_in and out["runs"] < 500:  # until a signal lands inside a frame read (most land between)
        out["runs"] += 1
        signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
        try:
            got = run(sess, guest(cids["flood"], "run"), store=store, isolation=pool, timeout_ms=20000)
            out["returned"] = [got["kuro/outcome"], got.get("kuro/error")]
        except BaseException as exc:
            out["raised"] = [type(exc).__name__, list(exc.args), getattr(exc, "__notes__", [])]
        signal.setitimer(signal.ITIMER_REAL, 0)
    out["in"] = raised_in
    out["receipt"] = [[r["kuro/outcome"], r.get("kuro/error")] for r in said if r is not None]
    after = run(sess, guest(cids["cat"], "run"), store=store, isolation=pool, stdin=b"next")
    same = after["kuro/worker"]["pid"] == warm["kuro/worker"]["pid"]
    out["next"] = [after["kuro/outcome"], after["kuro/stdout"].decode(), same]
print(json.dumps(out))
"""


@pytest.mark.parametrize("sigint", ["python's-own", "ignored"])
def test_a_handler_raising_while_the_caller_reads_a_workers_frame_stops_the_run_and_leaves_the_channel_whole(
    tmp_path: Path, sigint: str
) -> None:
    """A main-thread run() caller reads its worker's frames itself (Ctrl-C routed to the run, or ignored); a SIGALRM
    handler of the program's that raised *inside* a frame read left the channel half-read: the pool took it for a
    host bug, killed the worker, and the run had no receipt of its own. Now it is guarded as a main-thread guest
    run is: the run is stopped (``cancelled``, its receipt naming the handler's exception), run() raises the
    exception after it, and the same worker runs the next run."""
    script = tmp_path / "mid_frame.py"
    script.write_text(_MID_FRAME_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(GUESTS), str(int(HANG_GUARD)), sigint],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD + 30,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["in"] and "_pump" in got["in"][0], got  # the handler did raise inside a frame read
    assert got["raised"] == ["TimeoutError", ["the program's own timeout"], [_STOPPED]], got  # in that run
    assert got.get("returned", ["output-capped"])[0] == "output-capped", got  # each run before: its own end
    error = "interrupted: a signal handler raised TimeoutError: the program's own timeout"
    assert got["receipt"] == [["cancelled", error]], got
    assert got["next"] == ["ok", "next", True], got
