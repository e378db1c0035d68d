"""Crash honesty and many processes, for real: child Python processes on one SQLite file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ledger_fakes import FakeStarter, command, fake_receipt, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import OperationConflict, StillRunning
from kuro_wasm.ledger.db import LedgerDB, default_connect
from kuro_wasm.ledger.journal import encode_line
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.operation import argument_digest

CHILD = Path(__file__).with_name("ledger_child.py")


def _child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHILD.parent), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[0]


def test_a_run_killed_mid_flight_is_unknown_after_reopen_and_never_runs_again(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    child = _child("hang", str(db), "op-crash")
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "running", child.stderr.read() if child.stderr else ""
        # While the owner lives, another process sees it running (this owner never looks for cancel requests).
        with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as other:
            live = other.result("op-crash", cancel=True)
        assert live["kuro/status"] == "running"
        assert live["kuro/owner-pid"] == child.pid
        assert live["kuro/cancel"] == "requested"
        os.kill(child.pid, signal.SIGKILL)
        while _proc_state(child.pid) not in ("Z", None):  # unreaped: a zombie is not an owner either
            time.sleep(0.001)
        starter = FakeStarter()
        with Ledger(db, store=MemoryBlockStore(), starter=starter) as reopened:
            with sqlite3.connect(db) as conn:
                row = conn.execute("SELECT status, reason FROM operations WHERE op_id = 'op-crash'").fetchone()
            assert row == ("unknown", "owner-process-gone")
            got = reopened.result("op-crash")
            again = reopened.run("op-crash", make_session("s-hang"), command())
        assert got["kuro/status"] == again["kuro/status"] == "unknown"
        assert got["kuro/persistence"] == "saved"
        assert starter.total == 0
    finally:
        child.kill()
        child.wait()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def test_cancel_from_another_process_stops_the_run_and_its_receipt_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    child = _child("cancellable", str(db), "op-c")
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "running", child.stderr.read() if child.stderr else ""
        starter = FakeStarter()
        with Ledger(db, store=MemoryBlockStore(), starter=starter) as other:
            asked = other.result("op-c", cancel=True)
            assert asked["kuro/status"] == "running"
            assert asked["kuro/cancel"] == "requested"
            assert child.stdout.readline().strip() == "cancelled 130"  # the owner saw the request and killed its run
            assert child.wait(30) == 0
            got = other.result("op-c")
        assert got["kuro/status"] == "done"
        assert got["kuro/exit-code"] == 130
        assert got["kuro/persistence"] == "saved"
        assert starter.total == 0
    finally:
        child.kill()
        child.wait()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def test_a_crash_between_the_journal_and_sqlite_is_pending_never_saved_and_never_rerun(tmp_path: Path) -> None:
    db, go = tmp_path / "ledger.sqlite", tmp_path / "go"
    Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()).close()
    child = _child("pending", str(db), "op-j", str(go))
    holder = None
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "running", child.stderr.read() if child.stderr else ""
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # SQLite refuses the child's save
        go.touch()
        assert child.stdout.readline().strip() == "pending"
        os.kill(child.pid, signal.SIGKILL)  # dies with its receipt only in the journal
        while _proc_state(child.pid) not in ("Z", None):
            time.sleep(0.001)
        starter = FakeStarter()
        with Ledger(db, store=MemoryBlockStore(), starter=starter, timeout=0.1) as led:
            while_locked = led.result("op-j")
            replay = led.run("op-j", make_session("s-pending"), command())
            assert holder.execute("SELECT status FROM operations WHERE op_id = 'op-j'").fetchall() == [("started",)]
            holder.execute("COMMIT")
            holder.close()
            holder = None
            after = led.result("op-j")
        assert while_locked["kuro/status"] == replay["kuro/status"] == "done"
        assert while_locked["kuro/persistence"] == replay["kuro/persistence"] == "pending"  # not saved: not yet
        assert after["kuro/persistence"] == "saved"
        assert after["kuro/stdout-preview"] == "finished before the crash"
        assert starter.total == 0
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status FROM operations WHERE op_id = 'op-j'").fetchall() == [("done",)]
        conn.close()
        assert (tmp_path / "ledger.journal").stat().st_size == 0
    finally:
        if holder is not None:
            holder.execute("COMMIT")
            holder.close()
        child.kill()
        child.wait()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def test_a_torn_journal_line_of_a_crashed_run_is_not_a_receipt_and_the_run_is_unknown(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()).close()
    digest = argument_digest(make_session(), command())
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
            "VALUES ('op-t', ?, 'started', 1, 'another-boot:0', 0)",
            (digest,),
        )
    conn.close()
    entry = {
        "op-id": "op-t",
        "digest": digest,
        "owner-pid": 1,
        "owner-token": "another-boot:0",
        "started-at": 0,
        "finished-at": 1,
        "receipt": {"kuro/status": "done", "kuro/exit-code": 0},
    }
    (tmp_path / "ledger.journal").write_bytes(encode_line(entry)[:-9])  # the crash cut the line short
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter) as led:
        got = led.result("op-t")
        again = led.run("op-t", make_session(), command())
    assert got["kuro/status"] == again["kuro/status"] == "unknown"
    assert starter.total == 0


def test_processes_writing_different_operations_lose_nothing_and_race_one_operation_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    go = tmp_path / "go"
    Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()).close()  # schema first, so children race on rows
    children = [_child("many", str(db), f"p{k}", "15", str(go)) for k in range(3)]
    go.touch()
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    ran = Counter(sid for report in reports for sid in report["ran"])
    assert ran["shared"] == 1
    assert all(count == 1 for count in ran.values())
    assert sum(1 for r in reports if r["answers"]["shared"] == "done") >= 1
    with sqlite3.connect(db) as conn:
        done = {op for (op,) in conn.execute("SELECT op_id FROM operations WHERE status = 'done'")}
    assert done == {"shared"} | {f"p{k}-{i}" for k in range(3) for i in range(15)}


def test_an_unknown_left_by_a_crash_conflicts_with_different_arguments(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()).close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at, reason) "
            "VALUES ('op', ?, 'unknown', 1, 'x', 0, 'owner-process-gone')",
            (argument_digest(make_session(), command(1)),),
        )
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter) as led:
        with pytest.raises(OperationConflict):
            led.run("op", make_session(), command(2))
    assert starter.total == 0


class _PolledThrice:
    """A run that ends on its own after the ledger has waited on it (and so looked for cancel requests) 3 times."""

    def __init__(self, sess: Any, cmd: Any) -> None:
        self.result = fake_receipt(sess, cmd, 0)
        self.waits = 0
        self.killed = False

    def kill(self) -> None:
        self.killed = True
        self.result = {**self.result, "kuro/exit-code": 130, "kuro/outcome": "cancelled"}
        self.waits = 3

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        if self.waits < 3:
            self.waits += 1
            raise StillRunning("still running")
        return self.result


def test_a_cancel_asked_of_a_claim_that_was_released_does_not_cancel_the_op_ids_later_run(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    sess, cmd = make_session(), command(1)
    handles: list[_PolledThrice] = []

    def starter(s: Any, c: Any, **_options: Any) -> _PolledThrice:
        handles.append(_PolledThrice(s, c))
        return handles[-1]

    with Ledger(db, store=MemoryBlockStore(), starter=starter) as ledger:
        claim = ledger.claim("op-r", sess, cmd)  # claimed (a batch about to send it) ...
        asked = subprocess.run(  # ... another process asks to cancel it ...
            [sys.executable, "-c", f"from kuro_wasm.ledger.ledger import Ledger\n"
             f"print(Ledger({str(db)!r}).result('op-r', cancel=True)['kuro/cancel'])"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert asked.stdout.strip() == "not-cancellable"  # a claim's run is its claimant's: nothing recorded
        assert not isinstance(claim, dict)
        ledger.release([claim])  # ... and it never ran: the op id is free, as if never claimed
        got = ledger.run("op-r", sess, cmd)  # its real run, later, is not the run that cancel was for
    assert not handles[0].killed
    assert (got["kuro/outcome"], got["kuro/exit-code"]) == ("ok", 0)


def test_a_cancel_request_arriving_after_the_claim_is_withdrawn_is_not_recorded(tmp_path: Path) -> None:
    # the asker read `running`, then the claim was released before its request was written
    db = tmp_path / "ledger.sqlite"
    sess, cmd = make_session(), command(1)
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as ledger:
        claim = ledger.claim("op-r", sess, cmd)
        assert not isinstance(claim, dict)
        ledger.release([claim])
        late = LedgerDB(db, default_connect, 1.0)
        assert late.request_cancel("op-r", 1) == "not-recorded"
        late.close()
        again = ledger.claim("op-r", sess, cmd)
        assert not isinstance(again, dict)
        other = LedgerDB(db, default_connect, 1.0)
        assert other.request_cancel("op-r", 2) == "not-cancellable"  # a standing claim, but its claimant's run
        assert other.insert_started("op-q", "digest", 1, "token", 0) is None  # a standing claim of Ledger.run's
        assert other.request_cancel("op-q", 3) == "requested"
        other.close()


_SIGNAL_CANCEL = """
import os, signal, sys, threading
from ledger_fakes import FakeStarter, command, make_session
from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.ledger.ledger import Ledger

starter = FakeStarter(block=True)
ledger = Ledger(sys.argv[1], store=MemoryBlockStore(), starter=starter)
asked = []
signal.signal(signal.SIGUSR1, lambda *_: asked.append(ledger.result("op-s", cancel=True)))
threading.Thread(target=lambda: (starter.wait_started("s1"), os.kill(os.getpid(), signal.SIGUSR1)), daemon=True).start()
got = ledger.run("op-s", make_session(), command())
print(got["kuro/outcome"], asked[0]["kuro/status"], asked[0]["kuro/cancel"])
"""


def test_a_cancel_from_a_signal_handler_interrupting_the_run_ends_it_cancelled_instead_of_hanging(
    tmp_path: Path,
) -> None:
    # the handler runs on the thread that waits for the run: it cannot wait there for the run's receipt
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHILD.parent), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SIGNAL_CANCEL, str(tmp_path / "ledger.sqlite")],
            capture_output=True, text=True, env=env, timeout=120,  # a hang guard, not a measure
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError("a cancel from a signal handler hung the ledgered run") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cancelled", "running", "requested"]


_KILLED_BATCH = """
import os, signal, sys
from ledger_fakes import command, make_session
from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.ledger.ledger import Ledger
ledger = Ledger(sys.argv[1], store=MemoryBlockStore())
ledger.claim_many([(f"op-{i}", make_session(), command(i), {}) for i in range(int(sys.argv[2]))])
os.kill(os.getpid(), signal.SIGKILL)  # a batch driver killed with its chunks out: every claim is orphaned
"""


def test_the_first_open_after_a_killed_batch_marks_all_its_claims_unknown_in_one_transaction(tmp_path: Path) -> None:
    # one transaction (one fsync) per orphaned claim made that open take seconds for a large batch
    db = tmp_path / "ledger.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHILD.parent), os.environ.get("PYTHONPATH")]))}
    killed = subprocess.run([sys.executable, "-c", _KILLED_BATCH, str(db), "300"], env=env, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    writes: list[str] = []

    def counting(path: Path, timeout: float) -> sqlite3.Connection:
        conn = default_connect(path, timeout)
        conn.set_trace_callback(lambda sql: writes.append(sql) if sql.startswith("BEGIN IMMEDIATE") else None)
        return conn

    with Ledger(db, store=MemoryBlockStore(), connect=counting) as reopened:
        assert len(writes) == 1
        rows = reopened.operations()
    assert len(rows) == 300 and {row["kuro/status"] for row in rows} == {"unknown"}
    assert len(writes) == 1  # listing sweeps again, and finds nothing left to write
