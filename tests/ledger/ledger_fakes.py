"""Fakes for the ledger suite: a starter the tests control, sessions, commands, a run on a thread.

The fake starter is the ledger's only seam to the host: it counts every start
(by session id), can hold a run until the test releases it, and honours
``kill`` like the real host (exit 130, outcome ``cancelled``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kuro_fs.cid import raw_cid
from kuro_wasm.errors import StillRunning
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.sessions import Session, guest, session

ROOT = raw_cid(b"an empty fs root stand-in")
GUEST = raw_cid(b"a guest stand-in")


def make_session(sid: str = "s1", mode: str = "terminal-build") -> Session:
    return session(sid, ROOT, mode)


def command(*args: int) -> dict[str, Any]:
    return guest(GUEST, "run", list(args))


#: What a ledger path may hold that is no kuro ledger: ``bytes`` (random ones), or a ``str``: another program's
#: SQLite database (with a table of its own).
NOT_LEDGERS: tuple[bytes | str, ...] = (b"random bytes, not SQLite at all " * 200, "another-sqlite-db")


def write_not_a_ledger(path: Path, content: bytes | str) -> None:
    """Write one of :data:`NOT_LEDGERS` at ``path``."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE notes (body TEXT)")
            other.execute("INSERT INTO notes VALUES ('mine')")
        other.close()


def fake_receipt(
    sess: Session, cmd: Any, exit_code: int = 0, stdout: bytes = b"", stderr: bytes = b""
) -> dict[str, Any]:
    outcome = {0: "ok", 130: "cancelled"}.get(exit_code, "exit")
    return {
        "kuro/type": "kuro/receipt",
        "kuro/session-id": sess.id,
        "kuro/mode": sess.mode,
        "kuro/command": dict(cmd),
        "kuro/isolation": "fake",
        "kuro/exit-code": exit_code,
        "kuro/outcome": outcome,
        "kuro/stdout": stdout,
        "kuro/stderr": stderr,
        "kuro/stdout-cid": raw_cid(stdout),
        "kuro/stderr-cid": raw_cid(stderr),
        "kuro/stdout-bytes": len(stdout),
        "kuro/stderr-bytes": len(stderr),
    }


class FakeHandle:
    """A run the test finishes with :meth:`release`, or the ledger stops with :meth:`kill`."""

    def __init__(self, sess: Session, cmd: Any, result: dict[str, Any] | None) -> None:
        self.session = sess
        self.command = cmd
        self._result = result
        self._finished = threading.Event()
        self.killed = False
        self.stdin_closed = False

    def release(self, exit_code: int = 0, stdout: bytes = b"", stderr: bytes = b"") -> None:
        if not self._finished.is_set():
            self._result = fake_receipt(self.session, self.command, exit_code, stdout, stderr)
            self._finished.set()

    def kill(self) -> None:
        self.killed = True
        self.release(130)

    def close_stdin(self) -> None:
        self.stdin_closed = True

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]:
        if self._result is not None and not self._finished.is_set():
            self._finished.set()
        if not self._finished.wait(timeout):
            raise StillRunning("fake run still going")
        assert self._result is not None
        return self._result


class FakeStarter:
    """``starter(session, command, *, store, **options)``: counts starts per session id.

    ``block=True`` holds every run until released; otherwise a run finishes at
    once with ``exit_code``/``stdout``. ``on_start`` is called with each handle.
    """

    def __init__(self, *, block: bool = False, exit_code: int = 0, stdout: bytes = b"", stderr: bytes = b"") -> None:
        self.block = block
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.starts: Counter[str] = Counter()
        self.handles: dict[str, FakeHandle] = {}
        self.options: list[dict[str, Any]] = []
        self.started = threading.Condition()
        self.raise_on_start: BaseException | None = None

    def __call__(self, sess: Session, cmd: Any, **options: Any) -> FakeHandle:
        if self.raise_on_start is not None:
            raise self.raise_on_start
        with self.started:
            self.starts[sess.id] += 1
            self.options.append(options)
            result = None if self.block else fake_receipt(sess, cmd, self.exit_code, self.stdout, self.stderr)
            handle = FakeHandle(sess, cmd, result)
            self.handles[sess.id] = handle
            self.started.notify_all()
        return handle

    def wait_started(self, sid: str, timeout: float = 10.0) -> FakeHandle:
        with self.started:
            assert self.started.wait_for(lambda: sid in self.handles, timeout), f"{sid} never started"
            return self.handles[sid]

    @property
    def total(self) -> int:
        return sum(self.starts.values())


class RunThread(threading.Thread):
    """``ledger.run`` on a thread, keeping its answer or its exception."""

    def __init__(self, ledger: Ledger, op_id: str, sess: Session, cmd: Any, **options: Any) -> None:
        super().__init__(daemon=True)
        self.args_ = (ledger, op_id, sess, cmd, options)
        self.value: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        ledger, op_id, sess, cmd, options = self.args_
        try:
            self.value = ledger.run(op_id, sess, cmd, **options)
        except BaseException as exc:
            self.error = exc

    def answer(self, timeout: float = 20.0) -> dict[str, Any]:
        self.join(timeout)
        assert not self.is_alive(), "ledger.run did not return"
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value
