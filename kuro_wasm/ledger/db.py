"""The ledger's SQLite database: schema, pooled connections, and row writes in one transaction each.

## The one decision
One row per operation id (``operations.op_id`` is the primary key), and every
write is one ``BEGIN IMMEDIATE`` transaction: the claim is an
``INSERT … ON CONFLICT DO NOTHING`` of a ``started`` row, so of any number of
racing threads or processes exactly one inserts; a terminal receipt is written
with its status, exit code, outcome and checksum in the same statement, and only
over a row that is not ``done`` and has the same digest, so a receipt once saved
is never replaced. Connections run in autocommit mode (``isolation_level=None``)
so the only transactions are the ones written here, with WAL and
``synchronous=FULL`` so a committed row survives a power cut.

A ledger that cannot be opened for writing (a read-only home, a full disk: in WAL
mode SQLite must make ``-wal``/``-shm`` files beside it even to read) is opened for
reading only — ``mode=ro``, else ``immutable=1`` if no ``-wal`` file holds writes
(immutable reads the database file alone, so each such read stands only if no ``-wal``
holds writes and the file did not change under it) — so what it holds can still be read. What
refused it may pass (a disk I/O error, a disk since freed), so each write first tries to open it for
writing again (never waiting for another writer's lock: a lock held means the file can be written);
while SQLite still refuses, the write is refused as any SQLite refusal is. Where neither
is possible the open raises :class:`LedgerError` saying why, never a raw SQLite error — or
:class:`LedgerCorrupt` if what it reads is no kuro ledger (random bytes, another program's database).
A file read so that holds no tables at all (empty, or made by a first open whose schema never
committed) is a ledger with no operations yet, and gets its tables at its first write.

## Effects
SQLite (stdlib ``sqlite3``) at one path. Connections are pooled per ledger (a
connection serves one thread at a time; one that saw an error is closed, not
reused; a forked child opens its own and never closes its parent's). Injected:
``connect`` (how a connection is opened; it must be usable from any thread,
``check_same_thread=False``) and ``timeout`` (seconds a write waits for the lock).

## Not done here
What to do when SQLite refuses (the journal, ``pending``/``failed``), who owns a
row and whether it is alive, and what a row answers are decided in
:mod:`kuro_wasm.ledger.ledger`, :mod:`kuro_wasm.ledger.liveness` and :mod:`kuro_wasm.ledger.answer`.
No migrations beyond adding the index and the cancel table to older ledgers;
no retention, no vacuum.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from kuro_wasm.errors import LedgerCorrupt, LedgerError
from kuro_wasm.ledger.answer import Row, stored_text

__all__ = ["BY_CLAIMANT", "SCHEMA_VERSION", "Connect", "LedgerDB", "default_connect"]

SCHEMA_VERSION: Final = "1"
_POOL_IDLE_MAX: Final = 4
#: The ``reason`` of a ``started`` row whose run is its claimant's (``Ledger.claim``: a batch), not the
#: ledger's: no owner polls cancel requests for it, so a cancel is answered ``not-cancellable``. (A started
#: row had no reason before; an ``unknown`` or ``done`` row's reason replaces or clears it.)
BY_CLAIMANT: Final = "run-by-claimant"

Connect = Callable[[Path, float], sqlite3.Connection]

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
    # pages of `kuro ledger list` before they were keyed by rowid (older code still lists through it)
    "CREATE INDEX IF NOT EXISTS operations_order ON operations (started_at, op_id)",
    "CREATE TABLE IF NOT EXISTS cancel_requests (op_id TEXT PRIMARY KEY, requested_at INTEGER NOT NULL)",
)
_ADDED_NAMES: Final = ("operations_started", "cancel_requests", "operations_order")
#: The whole schema, made in one transaction (a new ledger, or one whose first open never committed it).
_CREATE: Final = f"BEGIN IMMEDIATE; {_SCHEMA} {'; '.join(_ADDITIONS)}; COMMIT;"
#: The rowid a new row takes: past every row there is and every row there was (``rowid-high-water``, kept
#: when claims are withdrawn), so the listing's order — rowid, the order rows were recorded in — never puts
#: a new row before a page cursor already handed out (SQLite alone would reuse a deleted last rowid).
_NEXT_ROWID: Final = (
    "(SELECT max(coalesce((SELECT max(rowid) FROM operations), 0), "
    "coalesce((SELECT CAST(value AS INTEGER) FROM ledger_meta WHERE key = 'rowid-high-water'), 0)) + 1)"
)
_COLUMNS: Final = (
    "op_id, digest, status, owner_pid, owner_token, started_at, finished_at, reason, receipt, receipt_sha256"
)


def default_connect(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection usable from any thread (the pool hands it to one thread at a time), in autocommit mode."""
    return sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)


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


class _ImmutableReads(_Pool):
    """Connections of a ledger opened ``immutable=1``: SQLite then trusts the file never to change (no locks, no
    ``-wal``, pages cached across reads), though another process may write it (a writable mount of the same
    home, another user). So none is kept idle (a cached page outlives a change), and a read stands only if no
    ``-wal`` holds writes and the database file is the same (inode, size, mtime) before and after it; else
    ``sqlite3.OperationalError`` saying so: never stale or torn rows, never a ledger called damaged for it.
    (A write in the same coarse clock tick as the last one before the read, the read in between, is not seen.)
    """

    def __init__(self, opener: Callable[[], sqlite3.Connection], path: Path) -> None:
        super().__init__(opener)
        self._path = path

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        before = self._unchanged_since(None)
        conn = self._opener()
        try:
            yield conn
        except sqlite3.DatabaseError as exc:  # a torn read says "malformed": the change is the truth
            self._unchanged_since(before, exc)
            raise
        finally:
            conn.close()
        self._unchanged_since(before)

    def _unchanged_since(
        self, before: tuple[int, int, int] | None, cause: BaseException | None = None
    ) -> tuple[int, int, int]:
        """The database file's (inode, size, mtime); raises sqlite3.OperationalError: a ``-wal`` holds writes,
        or the file is not as ``before``."""
        if _wal_holds_frames(self._path):
            raise sqlite3.OperationalError(
                f"{self._path.name}-wal holds writes not yet in the database file, which is read alone here "
                "(immutable: its -wal/-shm cannot be used): another process writes it"
            ) from cause
        try:
            st = self._path.stat()
            now = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError as exc:
            raise sqlite3.OperationalError(f"{self._path.name} cannot be looked at: {exc}") from cause
        if before is not None and now != before:
            raise sqlite3.OperationalError(
                f"{self._path.name} changed while it was read (immutable: another process writes it); read it again"
            ) from cause
        return now


class LedgerDB:
    """The ``operations``/``cancel_requests`` tables of one ledger file.

    Opening prepares the schema (creating it in an empty file). Methods raise
    :class:`sqlite3.Error` when SQLite refuses, unless they say otherwise: what a
    refusal means is the caller's decision.

    ``reading=True`` opens it for reading only from the start (as a ledger that cannot be written is): no
    schema is prepared, nothing is written — for a caller that only looks (``kuro receipt show``). Opened
    for reading only either way, a file with no tables at all (:attr:`no_tables`: empty, or the first open
    of a ledger not yet committed its schema) holds no operations, and gets its tables at its first write
    once SQLite lets it write; one with other tables, or no SQLite, is still :class:`LedgerCorrupt`.

    Raises LedgerCorrupt: ``path`` is not a kuro ledger (or has another schema
    version). LedgerError: it cannot be opened or prepared.
    """

    def __init__(self, path: Path, connect: Connect, timeout: float, *, reading: bool = False) -> None:
        self._path = path
        self._connect_fn = connect
        self._timeout = timeout
        #: Why this ledger is open for reading only (None: it is writable): see :meth:`_open_read_only`.
        self.read_only: str | None = None
        self._immutable = False
        self._reopening = threading.Lock()
        self._reading = reading
        #: Opened for reading only, the file holds no tables at all (new, or its first open has not committed
        #: the schema yet): it holds no operations, not "not a kuro ledger". Each read looks again while it is
        #: set (another process may give the file its tables), and clears it once tables are there.
        self.no_tables = False
        #: the file's ``file:`` URI, for read-only connections (resolved once: an immutable read opens one per read)
        self._uri = ""
        self._pool = _Pool(self._connect_writable)
        if reading:
            self._open_read_only(LedgerError(f"{path} is read here, never written"))
            return
        try:
            self._init_schema()
        except LedgerCorrupt:
            raise
        except LedgerError as exc:
            cause = exc.__cause__
            if not isinstance(cause, sqlite3.OperationalError) or "locked" in str(cause) or not _holds_a_ledger(path):
                raise  # (a lock held past the timeout is another writer's, not a disk that refuses writes)
            self._open_read_only(exc)

    def _connect_read_only(self) -> sqlite3.Connection:
        uri = f"{self._uri}?{'immutable=1' if self._immutable else 'mode=ro'}"
        return sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None, check_same_thread=False)

    def _connect_writable(self) -> sqlite3.Connection:
        conn = self._connect_fn(self._path, self._timeout)
        conn.isolation_level = None
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def _open_read_only(self, refused: LedgerError) -> None:
        """The ledger could not be opened for writing (a read-only home, a full disk: SQLite cannot make or
        write its ``-wal``/``-shm`` files beside it): open it for reading only, so what it holds can be read.

        First ``mode=ro`` (SQLite reads the WAL through its existing ``-shm``); if SQLite cannot even do that,
        ``immutable=1`` — which reads the database file alone, so only when no ``-wal`` file holds writes not
        yet copied into it (else those rows would be silently missing). Every write then fails (SQLite
        refuses it), and what the ledger does with a refused write is as for any other refusal.

        Raises LedgerError: the ledger cannot be read either (``refused``'s reason, and why not read-only).
        """
        self._pool.close()
        self.read_only = str(refused.__cause__ or refused)
        self._uri = self._path.resolve().as_uri()
        for immutable in (False, True):
            if immutable and _wal_holds_frames(self._path):
                raise LedgerError(
                    f"{refused}; reading it read-only is refused too: {self._path.name}-wal holds writes not yet "
                    "in the database file (open the ledger once where its directory is writable)"
                ) from refused.__cause__
            self._immutable = immutable
            reads = self._connect_read_only
            self._pool = _ImmutableReads(reads, self._path) if immutable else _Pool(reads)
            try:
                with self._pool.connection() as conn:
                    version = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema-version'").fetchone()
            except sqlite3.DatabaseError as exc:
                if _holds_no_tables(self._pool):
                    self.no_tables = True  # a ledger not yet given its tables (the first run's are uncommitted)
                    return
                self._pool.close()
                if isinstance(self.refusal(exc, "", ""), LedgerCorrupt):  # read, and no ledger: not the disk's doing
                    raise LedgerCorrupt(
                        f"{self._path} is not a kuro ledger ({exc}; read read-only, as {self.read_only})"
                    ) from exc
                last: sqlite3.DatabaseError = exc
                continue
            if version is None or version[0] != SCHEMA_VERSION:
                raise LedgerCorrupt(
                    f"{self._path}: ledger schema version {version!r}, this code reads {SCHEMA_VERSION}"
                )
            return
        raise LedgerError(f"{refused}; reading it read-only failed too: {last}") from last

    def _reopen_writable(self) -> sqlite3.Error | None:
        """Open a ledger that was opened read-only for writing again, if SQLite now lets it (what refused it
        may have passed); else leave it read-only. The probe takes and gives back the write lock without
        waiting for it: another writer holding it means the file can be written (the write itself waits its
        turn), not a reason to stay read-only. A probe that fails keeps the ledger's reason unless SQLite now
        refuses the disk itself (the new reason is then the truer one). Once writable, a file with no tables
        gets the schema (until SQLite lets it: tried again at each write), and an older ledger the schema
        additions (:meth:`_add_missing`) an open for writing would have given it.

        Returns what SQLite refused when it made the schema (a full disk), else None: the write that asked
        then fails with "no such table", which says less than this (see :meth:`tx`)."""
        with self._reopening:
            if self.read_only is None and not self.no_tables:
                return None
            if self.read_only is not None and not self._probe_writable():
                return None
            try:
                with self._pool.connection() as conn:
                    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master").fetchall()}
                    if not names:  # a ledger never given its tables (only then: other tables are no ledger)
                        conn.executescript(_CREATE)
                        names = set(_ADDED_NAMES)
                    self.no_tables = False
            except sqlite3.Error as exc:
                return exc  # the write that asked says what SQLite refused
            if not names.issuperset(_ADDED_NAMES):
                self._add_missing()
            return None

    def _probe_writable(self) -> bool:
        """Whether SQLite lets this read-only ledger be written now; if so, its connections are writable ones."""
        try:
            probe = self._connect_fn(self._path, 0)
            try:
                probe.isolation_level = None
                probe.execute("PRAGMA journal_mode=WAL")
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            finally:
                probe.close()
        except sqlite3.Error as exc:
            if not _busy(exc):
                if _refuses_the_disk(exc):
                    self.read_only = str(exc)
                return False
        old, self._pool = self._pool, _Pool(self._connect_writable)
        self.read_only, self._immutable = None, False
        old.close()
        return True

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed if the block ends, rolled back if it raises. A ledger
        opened read-only is first opened for writing again if it can be (:meth:`_reopen_writable`). If it then
        could not make the tables of a file with none, and the block fails for want of them, what SQLite refused
        making them is raised (the "no such table" as its context): a full disk, not a damaged ledger."""
        schema_refused = None
        if (self.read_only is not None or self.no_tables) and not self._reading:
            schema_refused = self._reopen_writable()
        with self._pool.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if schema_refused is not None and self.no_tables and "no such table" in str(exc):
                    raise schema_refused  # noqa: B904 (it is the cause: the "no such table" stays its context)
                raise

    def _init_schema(self) -> None:
        try:
            with self._pool.connection() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                present = conn.execute("SELECT name FROM sqlite_master WHERE name = 'operations'").fetchall()
                if not present:
                    conn.executescript(_CREATE)
                version = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema-version'").fetchone()
                names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master").fetchall()}
            if not names.issuperset(_ADDED_NAMES):
                self._add_missing()
        except sqlite3.DatabaseError as exc:
            raise self.refusal(exc, "cannot open or prepare the ledger", "is not a kuro ledger") from exc
        if version is None or version[0] != SCHEMA_VERSION:
            raise LedgerCorrupt(f"{self._path}: ledger schema version {version!r}, this code reads {SCHEMA_VERSION}")

    def refusal(self, exc: sqlite3.Error, cannot: str, damaged: str) -> LedgerError:
        """What ``exc`` from SQLite means for this ledger: :class:`LedgerCorrupt` (``"<path> <damaged>: …"``) if
        the file is damaged or not a ledger, else :class:`LedgerError` (``"<cannot> <path>: …"``)."""
        if any(word in str(exc) for word in ("not a database", "malformed", "no such table")):
            return LedgerCorrupt(f"{self._path} {damaged}: {exc}")
        return LedgerError(f"{cannot} {self._path}: {exc}")

    def _add_missing(self) -> None:
        """Add the index and the cancel table to an older ledger; a locked or read-only file stays without."""
        if self.read_only is not None:
            return
        try:
            with self.tx() as conn:
                for statement in _ADDITIONS:
                    conn.execute(statement)
        except sqlite3.OperationalError:
            pass

    # -- rows

    def row(self, conn: sqlite3.Connection, op_id: str) -> Row | None:
        """The row of ``op_id`` read on ``conn``, or ``None``."""
        found = conn.execute(f"SELECT {_COLUMNS} FROM operations WHERE op_id = ?", (op_id,)).fetchall()
        return Row(*found[0]) if found else None

    def _still_no_tables(self, conn: sqlite3.Connection) -> bool:
        """Whether the file still holds no tables (:attr:`no_tables`), read again on ``conn`` while it is set:
        another process may have given it its tables and rows since (a reader that never looked again said
        not-found for them for its whole life). One read of ``sqlite_master``; the flag is cleared once any
        table is there."""
        if self.no_tables and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall():
            self.no_tables = False
        return self.no_tables

    def read_row(self, op_id: str) -> Row | None:
        """The row of ``op_id`` (a plain read: no write lock), or ``None``."""
        with self._pool.connection() as conn:
            return None if self._still_no_tables(conn) else self.row(conn, op_id)

    def started_rows(self) -> list[Row]:
        """Every ``started`` row (through the partial index, when the ledger has it)."""
        with self._pool.connection() as conn:
            if self._still_no_tables(conn):
                return []
            found = conn.execute(f"SELECT {_COLUMNS} FROM operations WHERE status = 'started'").fetchall()
        return [Row(*r) for r in found]

    def insert_started(self, op_id: str, digest: str, pid: int, token: str, started_at: int) -> Row | None:
        """Claim ``op_id``: ``None`` if this call inserted its ``started`` row, else the row already there."""
        return self.insert_started_many([(op_id, digest)], pid, token, started_at)[op_id]

    def insert_started_many(
        self, claims: list[tuple[str, str]], pid: int, token: str, started_at: int, *, by_claimant: bool = False
    ) -> dict[str, Row | None]:
        """Claim every ``(op id, digest)`` in one transaction: op id → ``None`` if inserted, else the row there.

        ``by_claimant``: the runs are the claimant's, not the ledger's (their rows say :data:`BY_CLAIMANT`).
        """
        out: dict[str, Row | None] = {}
        reason = BY_CLAIMANT if by_claimant else None
        with self.tx() as conn:
            for op_id, digest in claims:
                inserted = conn.execute(
                    "INSERT INTO operations (rowid, op_id, digest, status, owner_pid, owner_token, started_at, reason) "
                    f"VALUES ({_NEXT_ROWID}, ?, ?, 'started', ?, ?, ?, ?) ON CONFLICT(op_id) DO NOTHING",
                    (op_id, digest, pid, token, started_at, reason),
                ).rowcount
                out[op_id] = None if inserted == 1 else self.row(conn, op_id)
        return out

    def delete_started(self, op_ids: list[str], pid: int, token: str) -> None:
        """Withdraw claims of this owner that never ran: their ``started`` rows go, as if never claimed.

        So does a cancel request made while such a claim stood: it was for a run that never happened,
        and must not cancel the op id's run when it is claimed again.
        """
        with self.tx() as conn:
            conn.execute(  # the rowids of the rows about to go are never given to another row (see _NEXT_ROWID)
                "INSERT INTO ledger_meta (key, value) SELECT 'rowid-high-water', coalesce(max(rowid), 0) "
                "FROM operations WHERE true ON CONFLICT(key) DO UPDATE SET value = "
                "max(CAST(excluded.value AS INTEGER), CAST(ledger_meta.value AS INTEGER))"
            )
            conn.executemany(
                "DELETE FROM operations WHERE op_id = ? AND status = 'started' AND owner_pid = ? AND owner_token = ?",
                [(op_id, pid, token) for op_id in op_ids],
            )
            conn.executemany(
                "DELETE FROM cancel_requests WHERE op_id = ? AND NOT EXISTS (SELECT 1 FROM operations WHERE op_id = ?)",
                [(op_id, op_id) for op_id in op_ids],
            )

    def mark_unknown(self, row: Row, reason: str) -> Row:
        """Turn ``row`` (``started``, same owner) into ``unknown``; return the row as it now stands.

        Never raises for SQLite: if it cannot write, the ``unknown`` found is still
        returned (the truth, unsaved). If another writer finished the row first,
        the fresh ``done`` row is returned.
        """
        return self.mark_unknown_many([(row, reason)])[0]

    def mark_unknown_many(self, rows: list[tuple[Row, str]]) -> list[Row]:
        """:meth:`mark_unknown` for each ``(row, reason)``, in one transaction (one sync, however many rows:
        a killed batch leaves hundreds of claims, and one transaction each made the next open take seconds)."""
        fresh: list[Row | None]
        try:
            with self.tx() as conn:
                conn.executemany(
                    "UPDATE operations SET status = 'unknown', reason = ? "
                    "WHERE op_id = ? AND status = 'started' AND owner_pid = ? AND owner_token = ?",
                    [(reason, row.op_id, row.owner_pid, row.owner_token) for row, reason in rows],
                )
                fresh = [self.row(conn, row.op_id) for row, _ in rows]
        except sqlite3.Error:
            fresh = [None] * len(rows)  # cannot write: still report the truth we found
        return [
            replace(row, status="unknown", reason=reason) if now is None or now.status == "started" else now
            for (row, reason), now in zip(rows, fresh, strict=True)
        ]

    def save_terminal(self, entries: list[dict[str, Any]]) -> None:
        """Write terminal receipts (journal-entry shaped maps) in one transaction: all or none."""
        with self.tx() as conn:
            _apply_terminal(conn, entries)

    # -- cancel requests from other processes

    def cancel_requested(self, op_id: str) -> bool:
        """Whether a cancel of ``op_id`` was requested; ``False`` if SQLite cannot be read now (ask again later)."""
        try:
            with self._pool.connection() as conn:
                if self._still_no_tables(conn):
                    return False
                return bool(conn.execute("SELECT 1 FROM cancel_requests WHERE op_id = ?", (op_id,)).fetchall())
        except sqlite3.Error:
            return False  # cannot read the request now: the next poll tries again

    def request_cancel(self, op_id: str, now: int) -> str:
        """Record a cancel request: ``"requested"``; ``"not-cancellable"`` (nothing recorded) if the op id's run
        is its claimant's (:data:`BY_CLAIMANT`: no owner polls for it); or ``"not-recorded"`` if SQLite refused
        it or the op id's run is no longer claimed (it ended, or its claim was withdrawn: a request left then
        would cancel the op id's next claim)."""
        try:
            with self.tx() as conn:
                by_claimant = conn.execute(
                    "SELECT 1 FROM operations WHERE op_id = ? AND status = 'started' AND reason IS ?",
                    (op_id, BY_CLAIMANT),
                ).fetchall()
                if by_claimant:
                    return "not-cancellable"
                inserted = conn.execute(
                    "INSERT OR IGNORE INTO cancel_requests (op_id, requested_at) SELECT ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM operations WHERE op_id = ? AND status = 'started')",
                    (op_id, now, op_id),
                ).rowcount
                standing = inserted == 1 or bool(
                    conn.execute("SELECT 1 FROM cancel_requests WHERE op_id = ?", (op_id,)).fetchall()
                )
        except sqlite3.Error:
            return "not-recorded"
        return "requested" if standing else "not-recorded"

    def operations(
        self, *, limit: int | None = None, after: tuple[int, str] | None = None
    ) -> list[tuple[int, dict[str, Any]]]:
        """``(rowid, row)`` pairs, the row as ``kuro/…`` keys (op id, status, digest, times, exit code, outcome,
        reason), in the order they were recorded (rowid: never the clock, which may go back).

        ``after``: only rows after this ``(rowid, op_id)`` position — past that rowid, or at it if another
        row holds it now (one written by older code, which may reuse the rowid of a withdrawn last claim);
        ``limit``: at most that many (a keyset page over the table's own rowid order: the cost is the page).
        """
        sql = "SELECT rowid, op_id, status, digest, started_at, finished_at, exit_code, outcome, reason FROM operations"
        params: list[Any] = []
        if after is not None:
            # one rowid range (an OR of two made SQLite scan every row from the first: a page cost its position)
            sql += " WHERE rowid >= ? AND NOT (rowid = ? AND op_id = ?)"
            params += [after[0], after[0], after[1]]
        sql += " ORDER BY rowid"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._pool.connection() as conn:
            if self._still_no_tables(conn):
                return []
            rows = conn.execute(sql, params).fetchall()
        keys = ("op-id", "status", "argument-digest", "started-at", "finished-at", "exit-code", "outcome", "reason")
        return [(r[0], {f"kuro/{k}": v for k, v in zip(keys, r[1:], strict=True) if v is not None}) for r in rows]

    def close(self) -> None:
        """Close the idle connections; connections in use are closed when given back."""
        self._pool.close()


def _holds_a_ledger(path: Path) -> bool:
    """Whether ``path`` is a file (what a read-only open could read: an empty one holds no tables yet)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds a lock (``SQLITE_BUSY``/``SQLITE_LOCKED``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)) or "locked" in str(exc)


#: What SQLite says when the disk or the file refuses writes (I/O error, read-only, cannot open, full).
_DISK_REFUSALS: Final = ("disk I/O error", "readonly database", "unable to open database file", "disk is full")


def _refuses_the_disk(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite refusing the disk or file itself (why a ledger is opened read-only)."""
    code = getattr(exc, "sqlite_errorcode", None)
    disk = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL)
    return (code is not None and code & 0xFF in disk) or any(words in str(exc) for words in _DISK_REFUSALS)


def _holds_no_tables(pool: _Pool) -> bool:
    """Whether the database ``pool`` reads is SQLite with no tables at all (False if it cannot be read)."""
    try:
        with pool.connection() as conn:
            return not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error:
        return False


def _wal_holds_frames(path: Path) -> bool:
    """Whether the ``-wal`` file beside ``path`` holds anything (a missing or empty one holds no writes)."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: it may hold writes


def _apply_terminal(conn: sqlite3.Connection, entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        text, sha = stored_text(entry["receipt"])
        receipt = entry["receipt"]
        code = receipt.get("kuro/exit-code")
        conn.execute(
            "INSERT INTO operations (rowid, op_id, digest, status, owner_pid, owner_token, started_at, "
            "finished_at, exit_code, outcome, receipt, receipt_sha256) "
            f"VALUES ({_NEXT_ROWID}, ?, ?, 'done', ?, ?, ?, ?, ?, ?, ?, ?) "
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
                sha,
            ),
        )
