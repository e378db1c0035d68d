"""A ledger whose directory cannot be written (a read-only home, a full disk) is still read, or refused in one line.

SQLite in WAL mode makes ``-wal``/``-shm`` files beside the database even to read it: where it cannot,
the ledger opens it for reading only (``mode=ro``, else ``immutable=1`` when no ``-wal`` holds writes).
The real cases run ``kuro`` in a private mount namespace (``unshare -m``) over a read-only bind mount
or a full tmpfs; the library case injects a ``connect`` that cannot open the file for writing.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ledger_fakes import NOT_LEDGERS, FakeStarter, command, make_session, write_not_a_ledger

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import LedgerCorrupt, LedgerError
from kuro_wasm.ledger.db import LedgerDB, default_connect
from kuro_wasm.ledger.ledger import Claim, Ledger

ROOT = Path(__file__).resolve().parents[2]


def _filled(db: Path, n: int = 3) -> None:
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as ledger:
        for i in range(n):
            ledger.run(f"op-{i}", make_session(), command(i))


def _cannot_write(path: Path, timeout: float) -> sqlite3.Connection:
    """What SQLite says when it cannot make its ``-wal``/``-shm`` files beside the database."""
    raise sqlite3.OperationalError("unable to open database file")


def test_a_ledger_that_cannot_be_opened_for_writing_is_read_and_refuses_runs_before_anything_runs(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.sqlite"
    _filled(db)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=_cannot_write) as ledger:
        assert [row["kuro/op-id"] for row in ledger.operations()] == ["op-0", "op-1", "op-2"]
        assert ledger.result("op-1")["kuro/status"] == "done"
        assert ledger.run("op-2", make_session(), command(2))["kuro/replayed"] is True  # a replay needs no write
        with pytest.raises(LedgerError, match="nothing ran"):
            ledger.run("op-new", make_session(), command(9))
        assert not isinstance(ledger.claim("op-1", make_session(), command(1)), Claim)
    assert starter.total == 0


def test_a_file_that_is_not_there_is_still_refused_not_opened_read_only(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="unable to open"):
        Ledger(tmp_path / "ledger.sqlite", store=MemoryBlockStore(), connect=_cannot_write)


class _Flaky:
    """A ``connect`` that fails with SQLite's "disk I/O error" ``failures`` times, then opens as the default does."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def __call__(self, path: Path, timeout: float) -> sqlite3.Connection:
        if self.failures > 0:
            self.failures -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return default_connect(path, timeout)


def test_a_ledger_opened_read_only_by_a_passing_disk_error_writes_again_once_the_disk_does(tmp_path: Path) -> None:
    """A transient "disk I/O error" at open made the ledger read-only for its whole life: every later run was
    refused though the disk had come back. A write now opens it for writing again first."""
    db = tmp_path / "ledger.sqlite"
    _filled(db)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=_Flaky(1)) as ledger:
        assert ledger.result("op-1")["kuro/status"] == "done"  # read while the disk refused
        receipt = ledger.run("op-new", make_session(), command(9))
        assert receipt["kuro/exit-code"] == 0 and starter.total == 1
        assert ledger.result("op-new")["kuro/status"] == "done"
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as again:  # it was written, not journaled
        assert again.result("op-new")["kuro/status"] == "done"


def test_a_ledger_whose_disk_still_refuses_stays_read_only_and_refuses_the_run(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    _filled(db)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=_Flaky(10**6)) as ledger:
        with pytest.raises(LedgerError, match="nothing ran"):
            ledger.run("op-new", make_session(), command(9))
        assert ledger.result("op-1")["kuro/status"] == "done"
    assert starter.total == 0


@pytest.mark.parametrize("content", NOT_LEDGERS, ids=["random-bytes", "another-sqlite-database"])
def test_a_file_that_is_no_ledger_where_nothing_can_be_written_is_ledger_corrupt(
    tmp_path: Path, content: bytes | str
) -> None:
    """Read read-only, a file of random bytes or another program's SQLite database raised a LedgerError saying
    "no such table"/"not a database" — as if the disk had failed; it is not a ledger, and says so."""
    db = tmp_path / "ledger.sqlite"
    write_not_a_ledger(db, content)
    with pytest.raises(LedgerCorrupt, match="is not a kuro ledger") as info:
        Ledger(db, store=MemoryBlockStore(), connect=_cannot_write)
    assert str(db) in str(info.value)


# ---- the real thing: a read-only mount, a full disk (root in a private mount namespace)


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


needs_unshare = pytest.mark.skipif(not _can_unshare(), reason="no private mount namespace here (unshare -m)")

_MOUNT = {
    "read-only": 'mount --bind -o ro "$HOME_SRC" "$MNT"',
    "full": 'mount -t tmpfs -o size=1m tmpfs "$MNT" && cp -a "$HOME_SRC"/. "$MNT"/ '
    '&& (dd if=/dev/zero of="$MNT"/fill bs=4k 2>/dev/null; true)',
}


def _kuro_in(kind: str, home: Path, mnt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kuro --home MNT ARGS`` where MNT is ``home`` mounted read-only, or a full disk holding a copy of it."""
    script = f'{_MOUNT[kind]} && exec "$PY" -m kuro_wasm --home "$MNT" "$@"'
    env = {**os.environ, "HOME_SRC": str(home), "MNT": str(mnt), "PY": sys.executable}
    env.pop("KURO_DEBUG", None)
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "kuro", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,  # a hang guard, not a measure
    )  # fmt: skip


@needs_unshare
@pytest.mark.parametrize("kind", ["read-only", "full"])
def test_kuro_ledger_list_and_receipt_show_read_a_ledger_on_a_read_only_or_full_disk(kind: str, tmp_path: Path) -> None:
    home, mnt = tmp_path / "home", tmp_path / "mnt"
    mnt.mkdir()
    (home / "blocks").mkdir(parents=True)
    _filled(home / "ledger.sqlite")
    listed = _kuro_in(kind, home, mnt, "ledger", "list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()] == [[f"op-{i}", "done"] for i in range(3)]
    shown = _kuro_in(kind, home, mnt, "receipt", "show", "op-1", "--json")
    assert shown.returncode == 0, shown.stderr
    assert '"kuro/op-id": "op-1"' in shown.stdout


_KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from ledger_fakes import FakeStarter, command, make_session
from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.ledger.ledger import Ledger
ledger = Ledger(sys.argv[1], store=MemoryBlockStore(), starter=FakeStarter())
ledger.run("op-late", make_session(), command(7))
os.kill(os.getpid(), signal.SIGKILL)  # its WAL is never checkpointed into the database file
"""


@needs_unshare
@pytest.mark.parametrize("shm", [True, False], ids=["with-shm", "without-shm"])
def test_a_read_only_ledger_whose_wal_holds_writes_is_read_with_them_or_refused_in_one_line(
    tmp_path: Path, shm: bool
) -> None:
    home, mnt = tmp_path / "home", tmp_path / "mnt"
    mnt.mkdir()
    (home / "blocks").mkdir(parents=True)
    _filled(home / "ledger.sqlite")
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(home / "ledger.sqlite"), str(Path(__file__).parent)])
    assert (home / "ledger.sqlite-wal").stat().st_size > 0
    if not shm:  # SQLite cannot read the WAL read-only without its index, nor make one on a read-only mount
        (home / "ledger.sqlite-shm").unlink()
    listed = _kuro_in("read-only", home, mnt, "ledger", "list")
    assert "Traceback" not in listed.stderr
    if shm:  # read through the WAL: the late row is there
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[0] for line in listed.stdout.splitlines()] == ["op-0", "op-1", "op-2", "op-late"]
    else:  # never read without it (immutable=1 would silently miss the late row): one line, status 1
        assert listed.returncode == 1 and len(listed.stderr.splitlines()) == 1, listed.stderr
        assert "holds writes not yet in the database file" in listed.stderr


# ---- immutable=1 (no -shm can be had): SQLite trusts the file not to change; another process may still write it


def _read_only_then_immutable(monkeypatch: pytest.MonkeyPatch, on_immutable_open: list[Any]) -> None:
    """SQLite cannot open the ledger ``mode=ro`` (no ``-shm`` can be made, as on a read-only mount): ``immutable=1``
    is what is left; ``on_immutable_open`` (callables) run right after each immutable connection is opened."""
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if isinstance(database, str) and "mode=ro" in database:
            raise sqlite3.OperationalError("unable to open database file")
        conn = real(database, *args, **kwargs)
        if isinstance(database, str) and "immutable=1" in database:
            for hook in on_immutable_open:
                hook()
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)


def test_an_immutable_read_never_serves_stale_rows_nor_calls_the_ledger_damaged_when_another_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.sqlite"
    _filled(db)
    _read_only_then_immutable(monkeypatch, [])
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter(), connect=_cannot_write) as reader:
        assert len(reader.operations()) == 3
        with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as writer:  # another process's, in effect
            for i in range(3, 300):
                writer.run(f"op-{i}", make_session(), command(i))
            with pytest.raises(LedgerError, match="holds writes not yet in the database file"):
                reader.operations()  # never the 3 rows of the database file alone, 297 silently missing
        # the writer is gone (its WAL copied into the database file): read anew, whatever was read before
        assert [row["kuro/op-id"] for row in reader.operations()] == [f"op-{i}" for i in range(300)]
        assert reader.result("op-299")["kuro/status"] == "done"  # never "database disk image is malformed"


def test_an_immutable_read_the_ledger_changed_under_is_refused_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.sqlite"
    _filled(db)
    hooks: list[Any] = []
    _read_only_then_immutable(monkeypatch, hooks)
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter(), connect=_cannot_write) as reader:

        def another_process_writes() -> None:  # a new row each time: its WAL is copied into the file as it closes
            with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as writer:
                writer.run(f"op-late-{len(written)}", make_session(), command(len(written)))
            written.append(1)

        written: list[int] = []
        hooks.append(another_process_writes)
        with pytest.raises(LedgerError, match="changed while it was read"):
            reader.operations()
        hooks.clear()
        assert len(reader.operations()) == 3 + len(written)  # read again, it stood still: every row


# ---- a ledger opened read-only by a passing disk error, written again


class _Then:
    """A ``connect`` that fails with SQLite's "disk I/O error" once (the open), then as ``probe`` says (the
    reopening probe: an exception to raise, or None to open as the default does), recording each timeout."""

    def __init__(self, probe: sqlite3.Error | None) -> None:
        self.calls = 0
        self.probe = probe
        self.timeouts: list[float] = []

    def __call__(self, path: Path, timeout: float) -> sqlite3.Connection:
        self.calls += 1
        self.timeouts.append(timeout)
        if self.calls == 1:
            raise sqlite3.OperationalError("disk I/O error")
        if self.calls == 2 and self.probe is not None:
            raise self.probe
        return default_connect(path, timeout)


def _older_ledger(path: Path) -> None:
    """A ledger as older code made it: no cancel table, no indexes (same schema version)."""
    _filled(path, 1)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE cancel_requests")
        conn.execute("DROP INDEX operations_started")
        conn.execute("DROP INDEX operations_order")
    conn.close()


def test_a_write_to_a_read_only_ledger_another_process_holds_locked_waits_for_the_lock_not_the_probe(
    tmp_path: Path,
) -> None:
    """The probe waited the busy timeout for another writer's lock, failed, and called the ledger read-only
    "database is locked" (losing why it was): a lock held is a writable file — the write itself waits for it."""
    path = tmp_path / "ledger.sqlite"
    _filled(path, 1)
    connect = _Then(None)
    db = LedgerDB(path, connect, 0.2)
    assert db.read_only == "disk I/O error"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            db.insert_started("op-new", "sha256:0", os.getpid(), "t", 1)
        assert db.read_only is None  # writable: only the lock was in the way
        assert connect.timeouts[1] == 0  # the probe does not wait for a lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert db.insert_started("op-new", "sha256:0", os.getpid(), "t", 1) is None
    db.close()


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        (sqlite3.OperationalError("interrupted"), "disk I/O error"),
        (sqlite3.OperationalError("unable to open database file"), "unable to open database file"),
    ],
    ids=["another-error-keeps-the-cause", "a-disk-error-is-the-new-cause"],
)
def test_a_failed_probe_keeps_why_the_ledger_is_read_only_unless_the_disk_refuses_again(
    tmp_path: Path, probe: sqlite3.Error, reason: str
) -> None:
    path = tmp_path / "ledger.sqlite"
    _filled(path, 1)
    db = LedgerDB(path, _Then(probe), 2.0)
    with pytest.raises(sqlite3.Error):
        db.insert_started("op-new", "sha256:0", os.getpid(), "t", 1)
    assert db.read_only == reason
    db.close()


def test_an_older_ledger_opened_read_only_gets_its_cancel_table_once_it_is_written_again(tmp_path: Path) -> None:
    """After the swap to writable the schema additions never ran: a cancel of a running operation of an older
    ledger first opened read-only was "not-recorded" (no such table: cancel_requests)."""
    path = tmp_path / "ledger.sqlite"
    _older_ledger(path)
    db = LedgerDB(path, _Then(None), 2.0)
    assert db.read_only is not None
    assert db.insert_started("op-new", "sha256:0", os.getpid(), "t", 1) is None
    assert db.request_cancel("op-new", 2) == "requested"
    assert db.cancel_requested("op-new")
    db.close()


# ---- a ledger made but never given its tables, opened read-only


def _no_tables(path: Path) -> None:
    """What the first ``kuro run`` leaves before its schema commits: an SQLite file with no tables."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


NOT_YET_LEDGERS = [lambda p: p.write_bytes(b""), _no_tables]


@pytest.mark.parametrize("make", NOT_YET_LEDGERS, ids=["zero-bytes", "no-tables"])
def test_a_ledger_with_no_tables_yet_that_cannot_be_written_holds_no_operations_and_refuses_runs(
    tmp_path: Path, make: Any
) -> None:
    """Opened read-only (the disk refused), a ledger file made but never given its tables said LedgerCorrupt
    ("no such table"): it is a ledger with no operations yet, as :func:`kuro_wasm.ledger.lookup.lookup` reads it."""
    db = tmp_path / "ledger.sqlite"
    make(db)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=_cannot_write) as ledger:
        assert ledger.operations() == []
        assert ledger.result("op-1")["kuro/status"] == "not-found"
        with pytest.raises(LedgerError, match="nothing ran"):
            ledger.run("op-new", make_session(), command(9))
    assert starter.total == 0


@pytest.mark.parametrize("make", NOT_YET_LEDGERS, ids=["zero-bytes", "no-tables"])
def test_a_ledger_with_no_tables_yet_opened_read_only_by_a_passing_disk_error_gets_them_at_its_first_write(
    tmp_path: Path, make: Any
) -> None:
    db = tmp_path / "ledger.sqlite"
    make(db)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=_Flaky(1)) as ledger:
        assert ledger.operations() == []
        receipt = ledger.run("op-new", make_session(), command(9))
        assert receipt["kuro/exit-code"] == 0 and starter.total == 1
    with Ledger(db, store=MemoryBlockStore(), starter=FakeStarter()) as again:  # written, with every table
        assert again.result("op-new")["kuro/status"] == "done"
        assert [row["kuro/op-id"] for row in again.operations()] == ["op-new"]
    with sqlite3.connect(db) as conn:
        names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert {"operations", "ledger_meta", "cancel_requests", "operations_started", "operations_order"} <= names


class _DiskErrorThenFullOnce:
    """A ``connect`` that fails with "disk I/O error" once (the open), then opens connections whose first script
    (the schema: the one script a ledger runs) finds the disk full — before any of it runs, or ``partway``: its
    transaction begun and a table made; ``refused`` holds that script."""

    def __init__(self, partway: bool = False) -> None:
        self.calls = 0
        self.refused: list[str] = []
        self.partway = partway

    def __call__(self, path: Path, timeout: float) -> sqlite3.Connection:
        self.calls += 1
        if self.calls == 1:
            raise sqlite3.OperationalError("disk I/O error")
        refused, partway = self.refused, self.partway

        class FullOnce(sqlite3.Connection):
            def executescript(self, script: str, /) -> sqlite3.Cursor:
                if not refused:
                    refused.append(script)
                    if partway:
                        super().executescript("BEGIN IMMEDIATE; CREATE TABLE ledger_meta (key TEXT PRIMARY KEY);")
                    raise sqlite3.OperationalError("database or disk is full")
                return super().executescript(script)

        return sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False, factory=FullOnce)


@pytest.mark.parametrize("partway", [False, True], ids=["before-any-sql", "partway"])
def test_a_ledger_with_no_tables_yet_whose_schema_cannot_be_made_refuses_the_run_and_makes_it_at_the_next(
    tmp_path: Path, partway: bool
) -> None:
    """Writable again but its schema refused (a full disk): the run is refused (nothing ran, not "not a kuro
    ledger") saying what SQLite refused — not the "no such table" the write then met, which read like a damaged
    ledger and hid the disk —, reads still find no operations, and the next write makes the schema and runs."""
    db = tmp_path / "ledger.sqlite"
    _no_tables(db)
    connect = _DiskErrorThenFullOnce(partway)
    starter = FakeStarter()
    with Ledger(db, store=MemoryBlockStore(), starter=starter, connect=connect) as ledger:
        with pytest.raises(LedgerError, match="nothing ran") as refused:
            ledger.run("op-1", make_session(), command(1))
        assert not isinstance(refused.value, LedgerCorrupt) and connect.refused
        assert "disk is full" in str(refused.value) and "no such table" not in str(refused.value)
        assert isinstance(refused.value.__cause__, sqlite3.OperationalError)
        assert "disk is full" in str(refused.value.__cause__)
        assert ledger.operations() == [] and starter.total == 0
        assert ledger.run("op-2", make_session(), command(2))["kuro/exit-code"] == 0
        assert [row["kuro/op-id"] for row in ledger.operations()] == ["op-2"]


def test_a_ledger_read_with_no_tables_sees_the_operations_another_process_records_after_it_opened(
    tmp_path: Path,
) -> None:
    """Opened read-only with no tables yet, a ledger answered "no operations" for its whole life, though
    another writer gave the file its tables and rows since: a long-lived reader said not-found for them and
    its crash sweep missed their started rows. It looks again while it has seen no tables."""
    db = tmp_path / "ledger.sqlite"
    db.write_bytes(b"")
    reader = LedgerDB(db, _Flaky(1), 5.0)
    assert reader.read_only is not None and reader.no_tables
    assert reader.read_row("op-x") is None and reader.started_rows() == [] and reader.operations() == []
    writer = LedgerDB(db, default_connect, 5.0)
    try:
        assert writer.insert_started("op-x", "d" * 64, os.getpid(), "token", 1) is None
        assert writer.request_cancel("op-x", 2) == "requested"
        row = reader.read_row("op-x")
        assert row is not None and row.status == "started"
        assert [r.op_id for r in reader.started_rows()] == ["op-x"]
        assert [r["kuro/op-id"] for _, r in reader.operations()] == ["op-x"]
        assert reader.cancel_requested("op-x") and not reader.no_tables
    finally:
        writer.close()
        reader.close()
