"""A child process for the crash and multi-process tests: ``python ledger_child.py MODE DB [ARGS]``.

Modes:
- ``hang DB OP``: claim OP with a starter that never finishes; print ``running`` once the
  start is recorded, then block until killed.
- ``cancellable DB OP``: claim OP with a run that goes on until killed (exit 130); print ``running``
  once started, then ``<outcome> <exit code>`` when ``run`` returns, and exit.
- ``pending DB OP GO``: claim OP; the run finishes once the file GO exists (the test locks SQLite
  first, so the receipt goes to the journal); print the receipt's ``kuro/persistence``, then block
  until killed: a crash between the journal and SQLite.
- ``many DB PREFIX N GO``: wait until the file GO exists, run ``shared`` (which takes 0.3 s,
  so racers meet its ``started`` row) and then PREFIX-0 … PREFIX-(N-1), each finishing at once; print one JSON line
  ``{"ran": [session ids the starter was called for], "answers": {op: status}}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_wasm.errors import StillRunning
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.sessions import guest, session

ROOT = raw_cid(b"an empty fs root stand-in")
GUEST = raw_cid(b"a guest stand-in")


class Forever:
    def kill(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        threading.Event().wait()
        raise AssertionError("unreachable")


def hang(db: str, op_id: str) -> None:
    def starter(sess: Any, cmd: Any, **options: Any) -> Forever:
        print("running", flush=True)
        return Forever()

    led = Ledger(db, store=MemoryBlockStore(), starter=starter)
    led.run(op_id, session("s-hang", ROOT, "terminal-build"), guest(GUEST, "run", []))


class UntilKilled:
    def __init__(self) -> None:
        self.killed = threading.Event()

    def kill(self) -> None:
        self.killed.set()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        if not self.killed.wait(timeout):
            raise StillRunning("still running")
        return {"kuro/exit-code": 130, "kuro/outcome": "cancelled", "kuro/stdout": b""}


def cancellable(db: str, op_id: str) -> None:
    def starter(sess: Any, cmd: Any, **options: Any) -> UntilKilled:
        print("running", flush=True)
        return UntilKilled()

    led = Ledger(db, store=MemoryBlockStore(), starter=starter)
    got = led.run(op_id, session("s-cancellable", ROOT, "terminal-build"), guest(GUEST, "run", []))
    print(got["kuro/outcome"], got["kuro/exit-code"], flush=True)


class AfterGo:
    def __init__(self, go: str) -> None:
        self.go = go

    def kill(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        while not os.path.exists(self.go):
            time.sleep(0.005)
        return {"kuro/exit-code": 0, "kuro/outcome": "ok", "kuro/stdout": b"finished before the crash"}


def pending(db: str, op_id: str, go: str) -> None:
    def starter(sess: Any, cmd: Any, **options: Any) -> AfterGo:
        print("running", flush=True)
        return AfterGo(go)

    led = Ledger(db, store=MemoryBlockStore(), starter=starter, timeout=0.2)
    got = led.run(op_id, session("s-pending", ROOT, "terminal-build"), guest(GUEST, "run", []))
    print(got["kuro/persistence"], flush=True)
    threading.Event().wait()


class Done:
    def __init__(self, sess: Any, cmd: Any) -> None:
        self.receipt = {"kuro/exit-code": 0, "kuro/outcome": "ok", "kuro/session-id": sess.id, "kuro/stdout": b"ok"}

    def kill(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        if self.receipt["kuro/session-id"] == "shared":
            time.sleep(0.3)  # hold the claim open so the other processes meet a started row
        return self.receipt


def many(db: str, prefix: str, n: int, go: str) -> None:
    ran: list[str] = []

    def starter(sess: Any, cmd: Any, **options: Any) -> Done:
        ran.append(sess.id)
        return Done(sess, cmd)

    led = Ledger(db, store=MemoryBlockStore(), starter=starter, timeout=30)
    while not os.path.exists(go):
        time.sleep(0.005)
    answers = {}
    for op_id, sid in [("shared", "shared"), *((f"{prefix}-{i}", f"{prefix}-{i}") for i in range(n))]:
        answers[op_id] = led.run(op_id, session(sid, ROOT, "terminal-build"), guest(GUEST, "run", []))["kuro/status"]
    print(json.dumps({"ran": ran, "answers": answers}), flush=True)


if __name__ == "__main__":
    mode, db = sys.argv[1], sys.argv[2]
    if mode == "hang":
        hang(db, sys.argv[3])
    elif mode == "cancellable":
        cancellable(db, sys.argv[3])
    elif mode == "pending":
        pending(db, sys.argv[3], sys.argv[4])
    elif mode == "many":
        many(db, sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        raise SystemExit(f"unknown mode {mode}")
