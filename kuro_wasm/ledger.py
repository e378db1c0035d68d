"""The receipt ledger: durable receipts keyed by operation id, replay without re-running, crash honesty.

## The one decision
An operation id runs **at most once**. :meth:`Ledger.run` first *claims* the id:
an ``INSERT … ON CONFLICT DO NOTHING`` of a ``started`` row (argument digest,
owner pid, owner process-start token) inside one ``BEGIN IMMEDIATE``
transaction, so of any number of racing threads or processes exactly one
inserts, and within one process a registry of live runs answers first. Only the
claimant runs; it then saves the terminal receipt in one transaction. Everyone
else gets an answer from the row, never a second run:

============================== ===================================================
row for the op id              ``run`` returns
============================== ===================================================
none                           claims, runs, saves: ``kuro/replayed`` False
``done``, same digest          the stored receipt, ``kuro/replayed`` True
``done``/any, other digest     raises :class:`OperationConflict` (nothing runs)
``unknown``                    the ``unknown`` value as is (never retried; use a new op id)
``started``, owner alive       ``{"kuro/status": "running", …}`` (nothing runs)
``started``, owner gone        becomes ``unknown``, returned as such
============================== ===================================================

A ``started`` row whose owner process is gone (crash, ``kill -9``, a run that
ended without its receipt being saved) becomes ``unknown`` on open (a sweep
over the ``started`` rows, indexed) and whenever ``run``/``result`` meet it:
``unknown`` is not success, and is never retried automatically. Owners
are (pid, boot id + kernel start time of that pid), so a reused pid is not
mistaken for the owner, and a zombie counts as gone.

Persistence is reported, never assumed: ``kuro/persistence`` is ``saved`` (the
SQLite transaction committed), ``pending`` (SQLite refused — locked past
``timeout``, read-only, full — and the receipt was appended and fsync-ed to the
private journal ``<name>.journal``; the next ``result``/``run``/open moves it
into SQLite without running anything) or ``failed`` (both refused: replay
protection cannot be promised, and ``kuro/persistence-error`` says so). A
journal entry is moved before every ``run``/``result`` answers.

What a row keeps is the receipt's *stored form* (:func:`kuro_wasm.operation.stored_form`:
output bytes in the block store, redacted previews in which the run's stdin
lines and the values of secret-named environment variables are concealed too,
no stdin, no environment).
Every receipt the ledger hands out — fresh or replayed — has that one shape,
plus ``kuro/status`` (``done``), ``kuro/op-id``, ``kuro/argument-digest``,
``kuro/receipt-cid``, ``kuro/redactions``, ``kuro/replayed`` and
``kuro/persistence``. Other answers are values too: ``running``, ``unknown``
(with ``kuro/unknown-reason`` and a hint) and ``not-found``. A historical
result does not complete new work: ``result(op_id, for_new_task=True)`` marks
its answer ``kuro/current: False``.

## Effects
SQLite (stdlib ``sqlite3``, WAL, ``synchronous=FULL``) at ``path`` (default
:func:`kuro_fs.home.ledger_path`), a journal file beside it, the block store,
``/proc`` for owner liveness, ``os.environ`` (secret-named values, to conceal).
Connections are pooled per ledger (a connection serves one thread at a time;
one that saw an error is closed, not reused; a forked child opens its own).
Injected: ``starter`` (default :func:`kuro_wasm.host.start`, imported on first
use), ``store``, ``now`` (ms) and ``connect`` (how a SQLite connection is
opened; it must be usable from any thread, ``check_same_thread=False``).

## Not done here
Cancel across processes is a request: ``cancel=True`` on another process's
run records it (``kuro/cancel: "requested"``) and returns at once; the owner
polls for requests every :data:`CANCEL_POLL_S` seconds while it waits and then
kills its run, whose receipt a later ``result`` returns. No
waiting for another process's run, no retention policy, no signing of rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol

from kuro_fs.blocks import BlockStore
from kuro_fs.home import ledger_path
from kuro_wasm.errors import LedgerCorrupt, LedgerError, ModelError, OperationConflict
from kuro_wasm.journal import Journal
from kuro_wasm.model import Session
from kuro_wasm.operation import argument_digest, run_limits, stdin_text, stored_form

__all__ = ["CANCEL_POLL_S", "Ledger", "RunHandle", "Starter"]

_SCHEMA_VERSION: Final = "1"
#: How often (seconds) a running ledgered run looks for a cancel request from another process.
CANCEL_POLL_S: Final = 0.25
_HINT_UNKNOWN: Final = "unknown is not success: run again under a new operation id"
_ENTRY_KEYS: Final = frozenset({"op-id", "digest", "receipt", "owner-pid", "owner-token", "started-at", "finished-at"})
_POOL_IDLE_MAX: Final = 4
#: Environment variables whose values are concealed in previews (a guest has no env, but stdin or fs may carry one).
_SECRET_ENV_NAME: Final = re.compile(r"token|secret|passw|api_?key|private_?key|credential", re.IGNORECASE)
_SECRET_ENV_MIN: Final = 8


class RunHandle(Protocol):
    """What a starter returns for a run it started (``kuro_wasm.host.Handle`` fits).

    A handle that also has ``close_stdin()`` gets it called right after the start:
    a ledgered run's ``stdin`` bytes are all its input (they are in the digest).
    """

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]: ...


#: ``starter(session, command, *, store, **options) -> RunHandle | denial mapping``.
Starter = Callable[..., "RunHandle | Mapping[str, Any]"]
Connect = Callable[[Path, float], sqlite3.Connection]

# ---- owners (who holds a started row, and are they alive)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


_BOOT_ID: Final = (_read("/proc/sys/kernel/random/boot_id") or "no-boot-id").strip()


def _process_token(pid: int) -> str | None:
    """``boot-id:start-time`` of a live pid; ``None`` if gone or a zombie; ``"pid"`` without /proc."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "pid"
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{_BOOT_ID}:{fields[19]}"


_OWN: dict[int, str] = {}


def _own_token() -> tuple[int, str]:
    pid = os.getpid()  # recomputed after a fork
    if pid not in _OWN:
        _OWN[pid] = _process_token(pid) or "pid"
    return pid, _OWN[pid]


# ---- runs of this process


@dataclass(eq=False)
class _Live:
    """One run in progress in this process: the in-process half of the claim."""

    digest: str
    started_at: int
    handle: RunHandle | None = None
    cancel_requested: bool = False
    final: dict[str, Any] | None = None
    owner: bool = False
    decided: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, owner: bool) -> None:
        """The claim is settled: this entry owns the run, or (``False``) it has left the registry."""
        self.owner = owner
        self.decided.set()

    def attach(self, handle: RunHandle) -> None:
        with self.lock:
            self.handle = handle
            kill = self.cancel_requested
        if kill:
            handle.kill()

    def cancel(self) -> None:
        with self.lock:
            self.cancel_requested = True
            handle = self.handle
        if handle is not None:
            handle.kill()

    def finish(self, value: dict[str, Any]) -> None:
        self.final = value
        self.done.set()


_LIVE: dict[tuple[int, str, str], _Live] = {}  # (pid, db path, op id): a forked child sees none of its parent's
_LIVE_LOCK = threading.Lock()


def _stream_facts(handle: RunHandle | None) -> dict[str, Any]:
    stream = getattr(handle, "stream", None)
    facts: dict[str, Any] = {}
    for attr, key in (
        ("state", "stream-state"),
        ("seq", "seq"),
        ("stdout_bytes", "stdout-bytes"),
        ("stderr_bytes", "stderr-bytes"),
        ("dropped_bytes", "dropped-bytes"),
    ):
        value = getattr(stream, attr, None)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            facts["kuro/" + key] = value
    return facts


def _answer(value: Mapping[str, Any], *, replayed: bool, persistence: str) -> dict[str, Any]:
    return {**value, "kuro/replayed": replayed, "kuro/persistence": persistence}


def _live_value(op_id: str, live: _Live) -> dict[str, Any]:
    """The answer for a run of this process still going: its status and its stream's counters so far."""
    value = {
        "kuro/status": "running",
        "kuro/op-id": op_id,
        "kuro/argument-digest": live.digest,
        "kuro/started-at": live.started_at,
        "kuro/owner-pid": os.getpid(),
        **_stream_facts(live.handle),
    }
    return _answer(value, replayed=True, persistence="saved")


def _secret_env_values() -> list[str]:
    """Values of this process's secret-named environment variables (long enough to conceal)."""
    return [v for k, v in os.environ.items() if _SECRET_ENV_NAME.search(k) and len(v) >= _SECRET_ENV_MIN]


class _Pool:
    """Idle SQLite connections of one ledger: each serves one caller at a time, and only in this process."""

    def __init__(self, opener: Callable[[], sqlite3.Connection]) -> None:
        self._opener = opener
        self._idle: list[sqlite3.Connection] = []
        self._forked_away: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._pid != os.getpid():
                # A forked child must not use (nor close: closing may checkpoint) its parent's connections.
                self._forked_away.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._opener()
        clean = False
        try:
            yield conn
            clean = not conn.in_transaction
        finally:
            self._give_back(conn, clean)

    def _give_back(self, conn: sqlite3.Connection, clean: bool) -> None:
        if clean:
            with self._lock:
                if not self._closed and self._pid == os.getpid() and len(self._idle) < _POOL_IDLE_MAX:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        """Close the idle connections; connections in use are closed when given back."""
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()


# ---- the ledger


def _default_starter() -> Starter:
    from kuro_wasm.host import start  # lazily: the ledger is usable (and testable) without wasmtime

    return start


def _default_connect(path: Path, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS operations (
    op_id          TEXT PRIMARY KEY,
    digest         TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('started', 'done', 'unknown')),
    owner_pid      INTEGER NOT NULL,
    owner_token    TEXT NOT NULL,
    started_at     INTEGER NOT NULL,
    finished_at    INTEGER,
    reason         TEXT,
    exit_code      INTEGER,
    outcome        TEXT,
    receipt        TEXT,
    receipt_sha256 TEXT
);
INSERT OR IGNORE INTO ledger_meta (key, value) VALUES ('schema-version', '1');
"""
#: Added to ledgers made before them (schema version unchanged: older code ignores both).
#: The crash sweep reads only ``started`` rows; without the index it would scan the whole ledger.
_ADDITIONS: Final = (
    "CREATE INDEX IF NOT EXISTS operations_started ON operations (op_id) WHERE status = 'started'",
    "CREATE TABLE IF NOT EXISTS cancel_requests (op_id TEXT PRIMARY KEY, requested_at INTEGER NOT NULL)",
)
_ADDED_NAMES: Final = ("operations_started", "cancel_requests")
_COLUMNS: Final = (
    "op_id, digest, status, owner_pid, owner_token, started_at, finished_at, reason, receipt, receipt_sha256"
)


@dataclass(frozen=True)
class _Row:
    op_id: str
    digest: str
    status: str
    owner_pid: int
    owner_token: str
    started_at: int
    finished_at: int | None
    reason: str | None
    receipt: str | None
    receipt_sha256: str | None


class Ledger:
    """Durable receipts by operation id. See the module docstring for the rules.

    ``Ledger(path=None, *, home=None, store=None, starter=None, now=None, connect=None, timeout=2.0)``:
    ``path`` defaults to ``<home>/ledger.sqlite``; ``store`` (where output bytes
    and full receipts go) defaults to a ``FileBlockStore`` in ``blocks/`` beside
    the ledger; ``timeout`` is how long (seconds) a write waits for a SQLite lock
    before the receipt goes to the journal.

    Raises LedgerCorrupt: if ``path`` is not a ledger database. LedgerError: if it
    cannot be opened or created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
        store: BlockStore | None = None,
        starter: Starter | None = None,
        now: Callable[[], int] | None = None,
        connect: Connect | None = None,
        timeout: float = 2.0,
    ) -> None:
        self._path = Path(path) if path is not None else ledger_path(home)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._key = str(self._path.resolve())
        self._journal = Journal(self._path.with_suffix(".journal"))
        self._store = store
        self._starter = starter
        self._now = now or _now_ms
        self._connect_fn = connect or _default_connect
        self._timeout = timeout
        self._closed = False
        self._pool = _Pool(self._connect)
        self._init_schema()
        self.recover()

    # -- plumbing

    @property
    def path(self) -> Path:
        return self._path

    @property
    def journal_path(self) -> Path:
        return self._journal.path

    def _connect(self) -> sqlite3.Connection:
        conn = self._connect_fn(self._path, self._timeout)
        conn.isolation_level = None
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._pool.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _init_schema(self) -> None:
        try:
            with self._pool.connection() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                present = conn.execute("SELECT name FROM sqlite_master WHERE name = 'operations'").fetchall()
                if not present:
                    conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} {'; '.join(_ADDITIONS)}; COMMIT;")
                version = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema-version'").fetchone()
                names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master").fetchall()}
            if not names.issuperset(_ADDED_NAMES):
                self._add_missing()
        except sqlite3.DatabaseError as exc:
            if any(word in str(exc) for word in ("not a database", "malformed", "no such table")):
                raise LedgerCorrupt(f"{self._path} is not a kuro ledger: {exc}") from exc
            raise LedgerError(f"cannot open or prepare the ledger {self._path}: {exc}") from exc
        if version is None or version[0] != _SCHEMA_VERSION:
            raise LedgerCorrupt(f"{self._path}: ledger schema version {version!r}, this code reads {_SCHEMA_VERSION}")

    def _add_missing(self) -> None:
        """Add the index and the cancel table to an older ledger; a locked or read-only file stays without."""
        try:
            with self._tx() as conn:
                for statement in _ADDITIONS:
                    conn.execute(statement)
        except sqlite3.OperationalError:
            pass

    def _live_key(self, op_id: str) -> tuple[int, str, str]:
        return (os.getpid(), self._key, op_id)

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self._path} is closed")

    def _store_for(self, store: BlockStore | None) -> BlockStore:
        if store is not None:
            return store
        if self._store is None:
            from kuro_fs.filestore import FileBlockStore

            self._store = FileBlockStore(self._path.parent / "blocks")
        return self._store

    def _start(self, session: Session, command: object, store: BlockStore, options: dict[str, Any]) -> Any:
        if self._starter is None:
            self._starter = _default_starter()
        return self._starter(session, command, store=store, **options)

    # -- rows

    def _row(self, conn: sqlite3.Connection, op_id: str) -> _Row | None:
        found = conn.execute(f"SELECT {_COLUMNS} FROM operations WHERE op_id = ?", (op_id,)).fetchall()
        return _Row(*found[0]) if found else None

    def _receipt_of(self, row: _Row) -> dict[str, Any]:
        text, sha = row.receipt, row.receipt_sha256
        if text is None or sha is None or hashlib.sha256(text.encode()).hexdigest() != sha:
            raise LedgerCorrupt(f"ledger row {row.op_id!r} is done but its receipt does not match its checksum")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise LedgerCorrupt(f"ledger row {row.op_id!r} holds a receipt that is not JSON") from exc
        if not isinstance(value, dict):
            raise LedgerCorrupt(f"ledger row {row.op_id!r} holds a receipt that is not a map")
        return value

    def _status_value(self, row: _Row) -> dict[str, Any]:
        base = {
            "kuro/op-id": row.op_id,
            "kuro/argument-digest": row.digest,
            "kuro/started-at": row.started_at,
            "kuro/owner-pid": row.owner_pid,
        }
        if row.status == "unknown":
            return _answer(
                {"kuro/status": "unknown", **base, "kuro/unknown-reason": row.reason, "kuro/hint": _HINT_UNKNOWN},
                replayed=True,
                persistence="saved",
            )
        return _answer({"kuro/status": "running", **base}, replayed=True, persistence="saved")

    def _owner_gone(self, row: _Row) -> str | None:
        """Why the owner of a started row is gone, or ``None`` if it may still be running."""
        pid, token = _own_token()
        if row.owner_pid == pid and row.owner_token == token:
            with _LIVE_LOCK:
                live = self._live_key(row.op_id) in _LIVE
            return None if live else "run-ended-without-saved-receipt"
        current = _process_token(row.owner_pid)
        if current is None:
            return "owner-process-gone"
        if row.owner_token not in ("pid", current) and current != "pid":
            return "owner-process-gone"  # the pid was reused by another process
        return None

    def _mark_unknown(self, row: _Row, reason: str) -> _Row:
        try:
            with self._tx() as conn:
                conn.execute(
                    "UPDATE operations SET status = 'unknown', reason = ? "
                    "WHERE op_id = ? AND status = 'started' AND owner_pid = ? AND owner_token = ?",
                    (reason, row.op_id, row.owner_pid, row.owner_token),
                )
                fresh = self._row(conn, row.op_id)
        except sqlite3.Error:
            fresh = None  # cannot write: still report the truth we found
        if fresh is None or fresh.status == "started":
            return replace(row, status="unknown", reason=reason)
        return fresh

    def _apply_terminal(self, conn: sqlite3.Connection, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            text = json.dumps(entry["receipt"], sort_keys=True, ensure_ascii=False, allow_nan=False)
            receipt = entry["receipt"]
            code = receipt.get("kuro/exit-code")
            conn.execute(
                "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at, finished_at, "
                "exit_code, outcome, receipt, receipt_sha256) VALUES (?, ?, 'done', ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(op_id) DO UPDATE SET status = 'done', finished_at = excluded.finished_at, "
                "exit_code = excluded.exit_code, outcome = excluded.outcome, receipt = excluded.receipt, "
                "receipt_sha256 = excluded.receipt_sha256, reason = NULL "
                "WHERE operations.status != 'done' AND operations.digest = excluded.digest",
                (
                    entry["op-id"],
                    entry["digest"],
                    entry["owner-pid"],
                    entry["owner-token"],
                    entry["started-at"],
                    entry["finished-at"],
                    code if isinstance(code, int) else None,
                    receipt.get("kuro/outcome", receipt.get("kuro/reason")),
                    text,
                    hashlib.sha256(text.encode()).hexdigest(),
                ),
            )

    def _journal_entry(self, op_id: str) -> dict[str, Any] | None:
        try:
            entries = self._journal.read()
        except OSError:
            return None
        found = [e for e in entries if e.get("op-id") == op_id and isinstance(e.get("receipt"), dict)]
        return found[-1] if found else None

    # -- public

    def recover(self) -> int:
        """Move journal entries into SQLite, then turn ``started`` rows of gone owners into ``unknown``.

        Runs on open (and from :meth:`operations`); runs nothing. ``run`` and
        ``result`` move journal entries before they answer and judge the one row
        they read, so they need no sweep. Returns the number of journal entries
        moved (0 if SQLite still refuses them: they stay).
        """
        moved = self._drain()
        try:
            with self._pool.connection() as conn:
                started = conn.execute(f"SELECT {_COLUMNS} FROM operations WHERE status = 'started'").fetchall()
        except sqlite3.Error:
            return moved
        for found in started:
            row = _Row(*found)
            reason = self._owner_gone(row)
            if reason is not None:
                self._mark_unknown(row, reason)
        return moved

    def _drain(self) -> int:
        """Move the journal's entries into SQLite (all or none); 0 if there are none or SQLite refuses."""
        try:
            return self._journal.drain(self._migrate)
        except (OSError, sqlite3.Error):
            return 0

    def _migrate(self, entries: list[dict[str, Any]]) -> None:
        good = [e for e in entries if _ENTRY_KEYS <= set(e) and isinstance(e["receipt"], dict)]
        with self._tx() as conn:
            self._apply_terminal(conn, good)

    def run(self, op_id: str, session: Session, command: object, **run_options: Any) -> dict[str, Any]:
        """Run ``command`` under operation ``op_id`` at most once; return its receipt (see the module table).

        ``run_options``: ``store`` (this run's block store, else the ledger's), and
        what the starter takes — ``fs``, ``stdin`` (bytes), ``timeout_ms``,
        ``max_output_bytes``, ``max_memory_bytes``, ``fuel``, ``home``,
        ``on_chunk``, ``on_exit``. A denial from the starter is stored and replayed
        like a receipt.

        Raises OperationConflict: ``op_id`` is known with a different argument digest.
        ModelError: a bad op id, option or argument (before anything is recorded).
        LedgerError: the start could not be recorded (nothing ran), or the ledger is closed.
        Whatever the starter raises propagates, after the row is marked ``unknown``.
        """
        self._check_open()
        _check_op_id(op_id)
        store = self._store_for(run_options.pop("store", None))
        digest = argument_digest(session, command, **run_options)
        options = {**run_options, **run_limits(run_options)}
        self._drain()
        live = _Live(digest, self._now())
        while True:
            with _LIVE_LOCK:
                other = _LIVE.setdefault(self._live_key(op_id), live)
            if other is live:
                break
            other.decided.wait()  # another thread of this process is claiming this op id: wait for its verdict
            if not other.owner:
                continue  # it found the op id already recorded and left: ask SQLite ourselves
            if other.digest != digest:
                raise OperationConflict(f"operation {op_id!r} is running with different arguments")
            return _live_value(op_id, other)
        try:
            existing = self._claim(op_id, digest, live.started_at)
        except BaseException:
            self._unregister(op_id, live)
            live.decide(False)
            raise
        if existing is not None:
            self._unregister(op_id, live)
            live.decide(False)
            return existing
        live.decide(True)
        return self._run_claimed(op_id, digest, live, session, command, store, options)

    def _unregister(self, op_id: str, live: _Live) -> None:
        with _LIVE_LOCK:
            if _LIVE.get(self._live_key(op_id)) is live:
                del _LIVE[self._live_key(op_id)]

    def _claim(self, op_id: str, digest: str, started_at: int) -> dict[str, Any] | None:
        """``None`` if this call now owns ``op_id``; else the answer for the existing record.

        A row, once written, keeps its op id and digest, so a row found by a plain
        read is answered without taking the write lock: a replay is answered even
        while another writer holds SQLite.
        """
        try:
            with self._pool.connection() as conn:
                row = self._row(conn, op_id)
        except sqlite3.Error:
            row = None  # the claim below meets the same trouble and says what it is
        if row is not None:
            return self._existing(row, digest)
        pid, token = _own_token()
        try:
            with self._tx() as conn:
                inserted = conn.execute(
                    "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
                    "VALUES (?, ?, 'started', ?, ?, ?) ON CONFLICT(op_id) DO NOTHING",
                    (op_id, digest, pid, token, started_at),
                ).rowcount
                row = None if inserted == 1 else self._row(conn, op_id)
        except sqlite3.Error as exc:
            pending = self._journal_entry(op_id)
            if pending is None:
                raise LedgerError(f"could not record the start of operation {op_id!r} ({exc}); nothing ran") from exc
            if pending["digest"] != digest:
                raise OperationConflict(f"operation {op_id!r} already ran with different arguments") from exc
            return _answer(pending["receipt"], replayed=True, persistence="pending")
        return None if row is None else self._existing(row, digest)

    def _existing(self, row: _Row, digest: str) -> dict[str, Any]:
        """The answer ``run`` gives for an op id already recorded (a receipt still in the journal wins)."""
        if row.digest != digest:
            raise OperationConflict(
                f"operation {row.op_id!r} is recorded with argument digest {row.digest}, not {digest}; "
                "use a new operation id for different work"
            )
        if row.status != "done":
            pending = self._journal_entry(row.op_id)
            if pending is not None and pending["digest"] == row.digest:
                return _answer(pending["receipt"], replayed=True, persistence="pending")
        return self._answer_for(row)

    def _answer_for(self, row: _Row) -> dict[str, Any]:
        if row.status == "done":
            return _answer(self._receipt_of(row), replayed=True, persistence="saved")
        if row.status == "started":
            reason = self._owner_gone(row)
            if reason is not None:
                row = self._mark_unknown(row, reason)
                if row.status == "done":
                    return self._answer_for(row)
        return self._status_value(row)

    def _run_claimed(
        self,
        op_id: str,
        digest: str,
        live: _Live,
        session: Session,
        command: object,
        store: BlockStore,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        phase = "host-raised"
        try:
            started = self._start(session, command, store, options)
            if isinstance(started, Mapping):
                result: Mapping[str, Any] = started
            else:
                live.attach(started)
                close_stdin = getattr(started, "close_stdin", None)
                if callable(close_stdin):
                    close_stdin()  # the stdin bytes given are all the input there is
                result = self._wait(op_id, started, live)
            phase = "ledger-raised"
            conceal = [stdin_text(options.get("stdin")), *_secret_env_values()]
            stored = stored_form(op_id, digest, result, store, conceal=conceal)
            value = self._save(op_id, digest, live.started_at, stored)
        except BaseException as exc:
            if live.handle is not None:
                live.handle.kill()
            pid, token = _own_token()
            row = _Row(op_id, digest, "started", pid, token, live.started_at, None, None, None, None)
            unknown = self._status_value(self._mark_unknown(row, f"{phase}: {type(exc).__name__}"))
            self._unregister(op_id, live)
            live.finish(unknown)
            raise
        self._unregister(op_id, live)
        live.finish({**value, "kuro/replayed": True})
        return value

    def _wait(self, op_id: str, handle: RunHandle, live: _Live) -> Mapping[str, Any]:
        """The run's result; meanwhile, every :data:`CANCEL_POLL_S` s, honour a cancel request from another process."""
        while True:
            try:
                return handle.wait(CANCEL_POLL_S)
            except TimeoutError:
                if not live.cancel_requested and self._cancel_requested(op_id):
                    live.cancel()

    def _cancel_requested(self, op_id: str) -> bool:
        try:
            with self._pool.connection() as conn:
                return bool(conn.execute("SELECT 1 FROM cancel_requests WHERE op_id = ?", (op_id,)).fetchall())
        except sqlite3.Error:
            return False  # cannot read the request now: the next poll tries again

    def _request_cancel(self, op_id: str) -> str:
        try:
            with self._tx() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO cancel_requests (op_id, requested_at) VALUES (?, ?)", (op_id, self._now())
                )
        except sqlite3.Error:
            return "not-recorded"
        return "requested"

    def _save(self, op_id: str, digest: str, started_at: int, stored: dict[str, Any]) -> dict[str, Any]:
        pid, token = _own_token()
        entry = {
            "op-id": op_id,
            "digest": digest,
            "owner-pid": pid,
            "owner-token": token,
            "started-at": started_at,
            "finished-at": self._now(),
            "receipt": stored,
        }
        try:
            with self._tx() as conn:
                self._apply_terminal(conn, [entry])
            return _answer(stored, replayed=False, persistence="saved")
        except sqlite3.Error as exc:
            db_error = exc
        try:
            self._journal.append(entry)
            return _answer(stored, replayed=False, persistence="pending")
        except OSError as exc:
            message = (
                f"the receipt was not saved (SQLite: {db_error}; journal: {exc}): replay protection "
                f"cannot be promised for operation {op_id!r}"
            )
            return {**_answer(stored, replayed=False, persistence="failed"), "kuro/persistence-error": message}

    def result(self, op_id: str, *, cancel: bool = False, for_new_task: bool = False) -> dict[str, Any]:
        """What is known about ``op_id``; never starts anything.

        Returns the stored receipt (``kuro/status`` ``done``, ``kuro/replayed``
        True, ``kuro/persistence`` ``saved``, or ``pending`` while it waits in the
        journal); for a run in progress ``{"kuro/status": "running", …}``; for a
        run whose owner is gone ``{"kuro/status": "unknown", …}``; for an id never
        seen ``{"kuro/status": "not-found", "kuro/op-id": op_id}``.

        ``cancel=True`` kills a run of this process and returns its terminal
        receipt once saved; for a run of another process it records a cancel
        request and returns the running status at once with ``kuro/cancel``
        ``requested`` (``not-recorded`` if SQLite refused it): the owner kills
        its run within :data:`CANCEL_POLL_S` s. On anything else it is a no-op.
        ``for_new_task=True`` marks the answer ``kuro/current: False``: a
        historical result does not complete new work.

        Raises LedgerCorrupt: a stored row fails its checksum. LedgerError: closed, or SQLite unreadable.
        """
        self._check_open()
        _check_op_id(op_id)
        self._drain()
        value = self._lookup(op_id, cancel)
        if for_new_task:
            value["kuro/current"] = False
        return value

    def _lookup(self, op_id: str, cancel: bool) -> dict[str, Any]:
        with _LIVE_LOCK:
            live = _LIVE.get(self._live_key(op_id))
        if live is not None:
            live.decided.wait()
        if live is not None and live.owner:
            if not cancel:
                return _live_value(op_id, live)
            live.cancel()
            live.done.wait()
            assert live.final is not None
            return dict(live.final)
        try:
            with self._pool.connection() as conn:
                row = self._row(conn, op_id)
        except sqlite3.Error as exc:
            pending = self._journal_entry(op_id)
            if pending is None:
                raise LedgerError(f"cannot read the ledger {self._path}: {exc}") from exc
            return _answer(pending["receipt"], replayed=True, persistence="pending")
        if row is None or row.status != "done":
            pending = self._journal_entry(op_id)
            if pending is not None and (row is None or pending["digest"] == row.digest):
                return _answer(pending["receipt"], replayed=True, persistence="pending")
        if row is None:
            return {"kuro/status": "not-found", "kuro/op-id": op_id}
        value = self._answer_for(row)
        if cancel and value["kuro/status"] == "running":
            value["kuro/cancel"] = self._request_cancel(op_id)
        return value

    def operations(self) -> list[dict[str, Any]]:
        """Every recorded operation, oldest first: op id, status, digest, times, exit code, outcome.

        Sweeps first (:meth:`recover`), so a run whose owner is gone is listed ``unknown``, not ``started``.
        """
        self._check_open()
        self.recover()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT op_id, status, digest, started_at, finished_at, exit_code, outcome, reason "
                "FROM operations ORDER BY started_at, op_id"
            ).fetchall()
        keys = ("op-id", "status", "argument-digest", "started-at", "finished-at", "exit-code", "outcome", "reason")
        return [{f"kuro/{k}": v for k, v in zip(keys, r, strict=True) if v is not None} for r in rows]

    def close(self) -> None:
        """Stop accepting calls (idempotent). Runs already in progress still save their receipts."""
        self._closed = True
        self._pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Ledger:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self._path)!r}{', closed' if self._closed else ''})"


def _check_op_id(op_id: object) -> None:
    if not isinstance(op_id, str) or not op_id.strip() or len(op_id) > 1024:
        raise ModelError(
            f"operation id must be a non-blank string of at most 1024 characters, got {op_id!r}", reason="invalid-op-id"
        )
