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
private journal ``ledger.journal`` beside it; the next ``result``/``run``/open moves it
into SQLite without running anything) or ``failed`` (both refused: replay
protection cannot be promised, and ``kuro/persistence-error`` says so). A
journal entry is moved before every ``run``/``result`` answers.

What a row keeps is the receipt's *stored form* (:func:`kuro_wasm.ledger.record.stored_form`:
never the raw output — its CIDs, byte counts and redacted previews, in which the
run's stdin lines and the values of secret-named environment variables are
concealed too; no stdin, no environment; raw output blocks and the full receipt
only with ``keep_output=True``, and then in the private output store
``<ledger dir>/output``, never the shared block store).
Every receipt the ledger hands out — fresh or replayed — has that one shape,
plus ``kuro/status`` (``done``), ``kuro/op-id``, ``kuro/argument-digest``,
``kuro/receipt-cid``, ``kuro/redactions``, ``kuro/replayed`` and
``kuro/persistence``. Other answers are values too: ``running``, ``unknown``
(with ``kuro/unknown-reason`` and a hint) and ``not-found``. A historical
result does not complete new work: ``result(op_id, for_new_task=True)`` marks
its answer ``kuro/current: False``.

This module is the story of those decisions; the parts live beside it:
:mod:`~kuro_wasm.ledger.db` (schema, connection pool, one transaction per row
write), :mod:`~kuro_wasm.ledger.liveness` (is an owner process alive?),
:mod:`~kuro_wasm.ledger.live` (this process's runs),
:mod:`~kuro_wasm.ledger.persistence` (saved / pending / failed),
:mod:`~kuro_wasm.ledger.journal` (the fallback file) and
:mod:`~kuro_wasm.ledger.answer` (the answer values, pure).

## Effects
SQLite at ``path`` (default :func:`kuro_fs.home.ledger_path`), a journal file
beside it, the block store, ``/proc`` for owner liveness, ``os.environ``
(secret-named values, to conceal), all but the last through the modules above;
a starter's run. Injected: ``starter`` (default :func:`kuro_wasm.host.api.start`,
imported on first use), ``store``, ``now`` (ms) and ``connect`` (how a SQLite
connection is opened; it must be usable from any thread, ``check_same_thread=False``).

## Not done here
Cancel across processes is a request: ``cancel=True`` on another process's
run records it (``kuro/cancel: "requested"``) and returns at once; the owner
polls for requests every :data:`CANCEL_POLL_S` seconds while it waits and then
kills its run, whose receipt a later ``result`` returns. A claim whose run is its claimant's
(:meth:`Ledger.claim`: a batch's invocations on workers) has no owner that polls: a cancel of it, from
any process, answers ``kuro/cancel: "not-cancellable"`` at once and records nothing (in this process it
kills a handle the claimant attached, if any). A batch is stopped as a whole (``Batch.cancel``). No
waiting for another process's run, no retention policy, no signing of rows.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_fs.home import ledger_path
from kuro_wasm.errors import (
    HostError,
    KuroError,
    LedgerError,
    ModelError,
    NotStarted,
    OperationConflict,
    StillRunning,
)
from kuro_wasm.ledger.answer import Row, answer, answer_for, check_op_id, not_found, running_value, status_value
from kuro_wasm.ledger.db import Connect, LedgerDB, default_connect
from kuro_wasm.ledger.journal import Journal
from kuro_wasm.ledger.live import LIVE as _LIVE
from kuro_wasm.ledger.live import LIVE_LOCK as _LIVE_LOCK
from kuro_wasm.ledger.live import Claim, Live, RunHandle
from kuro_wasm.ledger.liveness import own_token, owner_gone
from kuro_wasm.ledger.persistence import Persistence
from kuro_wasm.ledger.record import stored_form
from kuro_wasm.model.operation import argument_digest, run_limits, stdin_text
from kuro_wasm.model.sessions import Session

__all__ = ["CANCEL_POLL_S", "MAX_PAGE", "Claim", "Ledger", "RunHandle", "Starter", "page_cursor"]

#: The largest page :meth:`Ledger.operations` takes (SQLite's largest integer; no ledger holds more rows).
MAX_PAGE: Final = 2**63 - 1
#: How often (seconds) a running ledgered run looks for a cancel request from another process.
CANCEL_POLL_S: Final = 0.25
#: Environment variables whose values are concealed in previews (a guest has no env, but stdin or fs may carry one).
_SECRET_ENV_NAME: Final = re.compile(r"token|secret|passw|api_?key|private_?key|credential", re.IGNORECASE)
_SECRET_ENV_MIN: Final = 8
#: Why a cancel of a claim whose run is its claimant's (a batch's) is ``not-cancellable``.
HINT_CLAIMANT: Final = (
    "its run is the claimant's (a batch's), not the ledger's: stop it through its claimant (cancel the batch)"
)
#: A page cursor (:func:`page_cursor`): ``r``, the row's rowid as ``str`` of a positive SQLite integer, ``:``.
_CURSOR_AT: Final = re.compile(r"r[0-9]{1,19}")
#: A lone surrogate: in no op id (:func:`check_op_id`), and SQLite cannot take it (not UTF-8).
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

#: ``starter(session, command, *, store, **options) -> RunHandle | denial mapping``.
Starter = Callable[..., "RunHandle | Mapping[str, Any]"]


def _default_starter() -> Starter:
    from kuro_wasm.host.api import start  # lazily: the ledger is usable (and testable) without wasmtime

    return start


def _stop_and_wait(handle: RunHandle) -> Mapping[str, Any]:
    from kuro_wasm.host.api import stop_and_wait  # lazily, as the default starter (a real run has loaded it)

    return stop_and_wait(handle)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _secret_env_values() -> list[str]:
    """Values of this process's secret-named environment variables (long enough to conceal)."""
    return [v for k, v in os.environ.items() if _SECRET_ENV_NAME.search(k) and len(v) >= _SECRET_ENV_MIN]


def _check_backend(isolation: object) -> None:
    """The backend a run would go to, had now: a pool that cannot exist is the caller's error, raised before
    an operation is claimed (claimed and then failing, it would be recorded ``unknown`` though nothing ran)."""
    from kuro_wasm.host.isolation import resolve_isolation

    if resolve_isolation(isolation) == "process" and not hasattr(isolation, "submit"):
        from kuro_wasm.host.worker.pool import default_pool

        default_pool()


def _check_start_options(store: object, options: Mapping[str, Any]) -> None:
    """What the host's ``start`` refuses in the options, refused before an op id is claimed (refused after
    it, the op id would be used up as ``unknown`` though nothing ran): stdin that is not bytes (the digest
    reads a str too), a bad ``home``, ``on_chunk``/``on_exit`` that cannot be called, a store that is none.
    """
    from kuro_wasm.host.api import _check_options  # lazily, as the starter: the host's own rule, not a copy

    stdin = options.get("stdin")
    if stdin is not None and not isinstance(stdin, (bytes, bytearray, memoryview)):
        raise ModelError(f"stdin must be bytes, got {type(stdin).__name__}", reason="invalid-stdin")
    _check_options(options.get("home"), options.get("on_chunk"), options.get("on_exit"))
    if not all(hasattr(store, name) for name in ("get", "has", "put")):
        raise HostError(f"store must be a BlockStore, got {type(store).__name__}")


def page_cursor(position: int, op_id: str) -> str:
    """The position just after the row of ``op_id`` at rowid ``position``, for the next page's ``after``.

    Rows are listed in the order they were recorded (their rowid), never by a clock, which may go back.

    >>> page_cursor(17, "op/1")
    'r17:op/1'
    """
    return f"r{position}:{op_id}"


def _from_cursor(cursor: object) -> tuple[int, str]:
    if isinstance(cursor, str):
        at, sep, op_id = cursor.partition(":")
        # ASCII digits only (``int`` takes other scripts' digits, ``isdigit`` even ones ``int`` refuses), a
        # rowid SQLite can hold (a forged one past it would fail the query, not the cursor), an op id SQLite can
        # take (a lone surrogate, as a non-UTF-8 argv byte decodes, is in no op id and no UTF-8 text)
        if sep and op_id and _CURSOR_AT.fullmatch(at) and int(at[1:]) < 2**63 and not _SURROGATE.search(op_id):
            return int(at[1:]), op_id
    raise ModelError(
        f"not a ledger page cursor: {cursor!r:.80} (it is kuro/cursor of a listed row)", reason="invalid-page"
    )


#: The runs (their :class:`Live`) the current thread must come back to for them to end: the thread waiting
#: in :meth:`Ledger.run` (a signal handler runs on it) and a thread inside the run's ``on_chunk``/``on_exit``.
_NEEDED = threading.local()


@contextlib.contextmanager
def _needed_by(live: Live) -> Iterator[None]:
    """While the block runs, ``live``'s run cannot end until this thread goes on: a cancel of it asked from
    this thread (a signal handler, a callback) must not wait for the run's end."""
    held: tuple[Live, ...] = getattr(_NEEDED, "runs", ())
    _NEEDED.runs = (*held, live)
    try:
        yield
    finally:
        _NEEDED.runs = held


def _marked(callback: Callable[..., Any], live: Live) -> Callable[..., Any]:
    """``callback``, run as a thread ``live``'s run needs (see :func:`_needed_by`)."""

    def call(*args: Any) -> Any:
        with _needed_by(live):
            return callback(*args)

    return call


def _live_value(op_id: str, live: Live) -> dict[str, Any]:
    """The answer for a run of this process still going."""
    return running_value(op_id, live.digest, live.started_at, os.getpid(), live.handle)


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
        output_store: BlockStore | None = None,
        now: Callable[[], int] | None = None,
        connect: Connect | None = None,
        timeout: float = 2.0,
        starting: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else ledger_path(home)
        #: Wraps a run's start up to the moment its handle is attached: a caller whose interrupts can be
        #: noted rather than raised (the CLI) passes one that raises KeyboardInterrupt at its end when
        #: one came meanwhile, so an interrupt never lands where the started run's handle is not yet
        #: held (the run is then cancelled with its receipt, not abandoned as unknown).
        self._starting = starting or contextlib.nullcontext
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # the home is a file, unwritable …: the caller's input, named
            raise LedgerError(
                f"cannot create the ledger's directory {self._path.parent}: {exc.strerror or exc}"
            ) from exc
        self._key = str(self._path.resolve())
        self._journal = Journal(self._path.with_suffix(".journal"))
        self._store = store
        self._output_store = output_store
        self._starter = starter
        self._now = now or _now_ms
        self._closed = False
        self._db = LedgerDB(self._path, connect or default_connect, timeout)
        self._persistence = Persistence(self._db, self._journal)
        self.recover()

    # -- plumbing

    @property
    def path(self) -> Path:
        return self._path

    @property
    def journal_path(self) -> Path:
        return self._journal.path

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

    def _private_output(self) -> BlockStore:
        """Where kept raw output goes: the private output store (never the shared block store)."""
        if self._output_store is None:
            from kuro_fs.filestore import FileBlockStore

            self._output_store = FileBlockStore(self._path.parent / "output")
        return self._output_store

    def _start(self, session: Session, command: object, store: BlockStore, options: dict[str, Any]) -> Any:
        if self._starter is None:
            self._starter = _default_starter()
        return self._starter(session, command, store=store, **options)

    # -- owners

    def _owner_gone(self, row: Row) -> str | None:
        """Why the owner of a started row is gone, or ``None`` if it may still be running."""
        pid, token = own_token()
        if row.owner_pid == pid and row.owner_token == token:
            with _LIVE_LOCK:
                live = self._live_key(row.op_id) in _LIVE
            return None if live else "run-ended-without-saved-receipt"
        return owner_gone(row.owner_pid, row.owner_token)

    # -- public

    def recover(self) -> int:
        """Move journal entries into SQLite, then turn ``started`` rows of gone owners into ``unknown``.

        Runs on open (and from :meth:`operations`); runs nothing. ``run`` and
        ``result`` move journal entries before they answer and judge the one row
        they read, so they need no sweep. Returns the number of journal entries
        moved (0 if SQLite still refuses them: they stay).
        """
        moved = self._persistence.drain()
        try:
            started = self._db.started_rows()
        except sqlite3.Error:
            return moved
        gone: dict[tuple[int, str], str | None] = {}  # an owner's fate, asked of /proc once per owner
        orphaned: list[tuple[Row, str]] = []
        for row in started:
            owner = (row.owner_pid, row.owner_token)
            if owner not in gone or row.owner_pid == os.getpid():  # (this process: judged per op id)
                gone[owner] = self._owner_gone(row)
            reason = gone[owner]
            if reason is not None:
                orphaned.append((row, reason))
        if orphaned:  # one transaction (one sync) for all of them: a killed batch leaves hundreds
            self._db.mark_unknown_many(orphaned)
        return moved

    def run(self, op_id: str, session: Session, command: object, **run_options: Any) -> dict[str, Any]:
        """Run ``command`` under operation ``op_id`` at most once; return its receipt (see the module table).

        ``run_options``: ``store`` (this run's block store, else the ledger's),
        ``keep_output`` (default False: no raw output is persisted anywhere; True:
        the raw output blocks and the full receipt go to the private output store,
        see :mod:`kuro_wasm.ledger.record` — not part of the operation's identity), and
        what the starter takes — ``fs``, ``stdin`` (bytes), ``timeout_ms``,
        ``max_output_bytes``, ``max_memory_bytes``, ``fuel``, the structural bounds,
        ``home``, ``on_chunk``, ``on_exit``. A denial from the starter is stored and
        replayed like a receipt.

        Raises OperationConflict: ``op_id`` is known with a different argument digest.
        ModelError: a bad op id, option or argument (before anything is recorded).
        LedgerError: the start could not be recorded (nothing ran), or the ledger is closed.
        Whatever the starter raises propagates, after the row is marked ``unknown`` — but for
        :class:`~kuro_wasm.errors.NotStarted` (a closed or broken worker pool refused the run before
        anything of it started): then the claim is released, the op id stays free (``not-found``).
        HostError: ``isolation="process"`` (or ``$KURO_ISOLATION``) and no worker pool can be had
        (``$KURO_WORKERS`` out of range …), or ``store`` is not a block store — before anything is recorded.
        """
        _check_backend(run_options.get("isolation"))
        claimed = self._claim_many([(op_id, session, command, run_options)], held=None, runs_here=True)[0]
        if not isinstance(claimed, Claim):
            return claimed
        return self._run_claimed(claimed, session, command)

    # -- claims: the run is the caller's (a batch on a cluster), the record is the ledger's

    def claim(self, op_id: str, session: Session, command: object, **run_options: Any) -> Claim | dict[str, Any]:
        """Claim ``op_id`` for a run the caller performs itself; or the answer if it is already recorded.

        What :meth:`run` does before it starts anything, on its own: the ``started`` row is
        written (this process owns it, and answers ``running`` for it) and a :class:`Claim`
        returned, which the caller must end with :meth:`settle` (the run's receipt or denial),
        :meth:`release` (it never started) or :meth:`abandon` (its fate is not known). An op id
        already recorded is answered as :meth:`run` answers it — the stored receipt
        (``kuro/replayed`` True), ``running`` or ``unknown`` — and nothing is claimed.
        Options and errors as :meth:`run`.
        """
        got = self.claim_many([(op_id, session, command, run_options)])[0]
        return got

    def claim_many(
        self,
        requests: Sequence[tuple[str, Session, object, Mapping[str, Any]]],
        *,
        held: dict[str, Claim] | None = None,
    ) -> list[Claim | dict[str, Any]]:
        """:meth:`claim` for each ``(op_id, session, command, run_options)``, in one SQLite transaction.

        Every request is checked before anything is recorded; so is every recorded row read
        (an op id recorded with other arguments raises before any claim is made). An exception
        (a Ctrl-C included) before the claims are all made withdraws every one of them.
        ``held``: filled (op id → claim) as each claim is made, so a caller whose assignment of
        the answer an interrupt prevents still holds every claim made, to end it.

        Raises ModelError: a bad op id, option or argument, or one op id twice (``duplicate-op-id``).
        OperationConflict, LedgerError: as :meth:`run`.

        A claim's run is the caller's: the ledger can stop it only through a handle given to
        :meth:`Claim.attach`, and a cancel of it without one answers ``kuro/cancel``
        ``not-cancellable`` (:meth:`result`).
        """
        return self._claim_many(requests, held=held, runs_here=False)

    def _claim_many(
        self,
        requests: Sequence[tuple[str, Session, object, Mapping[str, Any]]],
        *,
        held: dict[str, Claim] | None,
        runs_here: bool,
    ) -> list[Claim | dict[str, Any]]:
        wanted = self._prepare_many(requests, runs_here=runs_here)
        out: list[Claim | dict[str, Any] | None] = [None] * len(wanted)
        mine: list[int] = []
        answers: dict[str, dict[str, Any]] | None = None
        try:
            for i, claim in enumerate(wanted):
                other = self._register(claim)
                if other is None:
                    mine.append(i)
                else:
                    out[i] = other
            answers = self._claim_rows([wanted[i] for i in mine])
            for i in mine:
                claim = wanted[i]
                existing = answers.get(claim.op_id)
                if existing is None:
                    claim.live.decide(True)
                    out[i] = claim
                    if held is not None:
                        held[claim.op_id] = claim
                else:
                    self._unregister(claim.op_id, claim.live)
                    claim.live.decide(False)
                    out[i] = existing
        except BaseException:  # (a Ctrl-C included) no claim is left half made: rows withdrawn, waiters woken
            self._withdraw([wanted[i] for i in mine], answers)
            for i in mine if held is not None else ():
                held.pop(wanted[i].op_id, None)  # type: ignore[union-attr]
            raise
        return [value for value in out if value is not None]

    def _withdraw(self, claims: list[Claim], answers: dict[str, dict[str, Any]] | None) -> None:
        """Undo a :meth:`claim_many` that stopped: the rows it may have inserted go, every entry it registered leaves.

        Only this owner's ``started`` rows of op ids registered here are deleted: none of them is anyone else's.
        """
        ours = [c for c in claims if answers is None or c.op_id not in answers]
        pid, token = own_token()
        try:
            if ours:
                self._db.delete_started([c.op_id for c in ours], pid, token)
        except sqlite3.Error:
            pass  # left started: this process gone, they read as unknown, never as done
        for claim in claims:
            self._unregister(claim.op_id, claim.live)
            claim.live.decide(False)
        for claim in ours:
            claim.live.finish(not_found(claim.op_id))

    def recorded_many(
        self, requests: Sequence[tuple[str, Session, object, Mapping[str, Any]]]
    ) -> list[dict[str, Any] | None]:
        """What :meth:`claim_many` would answer for each request whose op id is recorded; None for the others.

        Claims and records nothing: a caller that claims late (a batch claims each chunk's op ids as it
        sends the chunk, so a crash leaves only what it had sent ``unknown``) learns first what is answered
        from the ledger. Raises as :meth:`claim_many` (an op id recorded with other arguments included).
        """
        out: list[dict[str, Any] | None] = []
        for claim in self._prepare_many(requests):
            try:
                row = self._db.read_row(claim.op_id)
            except sqlite3.Error:
                row = None  # claiming it meets the same trouble and says what it is
            out.append(None if row is None else self._existing(row, claim.digest))
        return out

    def _prepare_many(
        self, requests: Sequence[tuple[str, Session, object, Mapping[str, Any]]], *, runs_here: bool = False
    ) -> list[Claim]:
        """Every request checked, no op id twice, the journal moved; nothing recorded."""
        self._check_open()
        wanted = [
            self._prepare(op_id, session, command, dict(options), runs_here)
            for op_id, session, command, options in requests
        ]
        seen: set[str] = set()
        for claim in wanted:
            if claim.op_id in seen:
                raise ModelError(f"operation {claim.op_id!r} is asked for twice", reason="duplicate-op-id")
            seen.add(claim.op_id)
        self._persistence.drain()
        return wanted

    def settle(self, claim: Claim, result: Mapping[str, Any]) -> dict[str, Any]:
        """Record the receipt (or denial) of a claimed run; return it as the ledger hands it out."""
        return self.settle_many([(claim, result)])[0]

    def settle_many(self, results: Sequence[tuple[Claim, Mapping[str, Any]]]) -> list[dict[str, Any]]:
        """:meth:`settle` for several claims, saved in one SQLite transaction (else each to the journal)."""
        pid, token = own_token()
        conceal_env = _secret_env_values()
        entries = []
        for claim, result in results:
            conceal = [stdin_text(claim.options.get("stdin")), *conceal_env]
            stored = stored_form(
                claim.op_id, claim.digest, result, claim.store, conceal=conceal, output_store=claim.output_store
            )
            entries.append(
                {
                    "op-id": claim.op_id,
                    "digest": claim.digest,
                    "owner-pid": pid,
                    "owner-token": token,
                    "started-at": claim.live.started_at,
                    "finished-at": self._now(),
                    "receipt": stored,
                }
            )
        values = self._persistence.save_many(entries)
        for (claim, _result), value in zip(results, values, strict=True):
            self._unregister(claim.op_id, claim.live)
            claim.live.finish({**value, "kuro/replayed": True})
        return values

    def release(self, claims: Sequence[Claim]) -> None:
        """Withdraw claims whose runs never started: their rows go, so the op ids may run later.

        Only for runs known not to have started (never sent, or refused before they began);
        a run that may have started is :meth:`settle`-d with what is known, or :meth:`abandon`-ed.
        If SQLite refuses, the rows stay ``started`` and become ``unknown`` once this process is gone.
        """
        pid, token = own_token()
        try:
            self._db.delete_started([claim.op_id for claim in claims], pid, token)
        except sqlite3.Error:
            pass  # left started: the owner (this process) gone, they read as unknown, never as done
        for claim in claims:
            self._unregister(claim.op_id, claim.live)
            claim.live.finish(not_found(claim.op_id))

    def abandon(self, claim: Claim, reason: str) -> dict[str, Any]:
        """Record that the claimed run's fate is not known (``unknown``, with ``reason``); return that answer."""
        pid, token = own_token()
        row = Row(claim.op_id, claim.digest, "started", pid, token, claim.live.started_at, None, None, None, None)
        unknown = status_value(self._db.mark_unknown(row, reason))
        self._unregister(claim.op_id, claim.live)
        claim.live.finish(unknown)
        return unknown

    def _prepare(
        self, op_id: str, session: Session, command: object, run_options: dict[str, Any], runs_here: bool
    ) -> Claim:
        check_op_id(op_id)
        store = self._store_for(run_options.pop("store", None))
        keep_output = run_options.pop("keep_output", False)
        if not isinstance(keep_output, bool):
            raise ModelError(f"keep_output must be a bool, got {keep_output!r}", reason="invalid-run-option")
        _check_start_options(store, run_options)
        digest = argument_digest(session, command, **run_options)
        options = {**run_options, **run_limits(run_options)}
        output_store = self._private_output() if keep_output else None
        return Claim(op_id, digest, options, store, output_store, Live(digest, self._now(), runs_here=runs_here))

    def _register(self, claim: Claim) -> dict[str, Any] | None:
        """Enter ``claim`` in this process's registry (``None``), or answer from another thread's entry."""
        op_id, live = claim.op_id, claim.live
        while True:
            with _LIVE_LOCK:
                other = _LIVE.setdefault(self._live_key(op_id), live)
            if other is live:
                return None
            other.decided.wait()  # another thread of this process is claiming this op id: wait for its verdict
            if not other.owner:
                continue  # it found the op id already recorded and left: ask SQLite ourselves
            if other.digest != claim.digest:
                raise OperationConflict(f"operation {op_id!r} is running with different arguments")
            return _live_value(op_id, other)

    def _unregister(self, op_id: str, live: Live) -> None:
        with _LIVE_LOCK:
            if _LIVE.get(self._live_key(op_id)) is live:
                del _LIVE[self._live_key(op_id)]

    def _claim_rows(self, claims: list[Claim]) -> dict[str, dict[str, Any]]:
        """Insert the ``started`` rows of ``claims``; op id → the answer for those already recorded.

        A row, once written, keeps its op id and digest, so a row found by a plain
        read is answered without taking the write lock: a replay is answered even
        while another writer holds SQLite. Rows are read first, so an op id recorded
        with other arguments raises before anything is inserted.
        """
        answers: dict[str, dict[str, Any]] = {}
        fresh: list[Claim] = []
        for claim in claims:
            try:
                row = self._db.read_row(claim.op_id)
            except sqlite3.Error:
                row = None  # the claim below meets the same trouble and says what it is
            if row is None:
                fresh.append(claim)
            else:
                answers[claim.op_id] = self._existing(row, claim.digest)
        if not fresh:
            return answers
        pid, token = own_token()
        started_at = min(claim.live.started_at for claim in fresh)
        runs_here = all(claim.live.runs_here for claim in fresh)  # (one kind per call: run's one, or the claimant's)
        try:
            rows = self._db.insert_started_many(
                [(c.op_id, c.digest) for c in fresh], pid, token, started_at, by_claimant=not runs_here
            )
        except sqlite3.Error as exc:
            for claim in fresh:
                answers[claim.op_id] = self._pending_answer(claim, exc)
            return answers
        inserted = [c.op_id for c in fresh if rows[c.op_id] is None]
        try:
            for claim in fresh:
                row = rows[claim.op_id]
                if row is not None:  # another process claimed it between our read and our insert
                    answers[claim.op_id] = self._existing(row, claim.digest)
        except BaseException:
            self._db.delete_started(inserted, pid, token)
            raise
        return answers

    def _pending_answer(self, claim: Claim, exc: sqlite3.Error) -> dict[str, Any]:
        pending = self._persistence.pending(claim.op_id)
        if pending is None:
            raise LedgerError(f"could not record the start of operation {claim.op_id!r} ({exc}); nothing ran") from exc
        if pending["digest"] != claim.digest:
            raise OperationConflict(f"operation {claim.op_id!r} already ran with different arguments") from exc
        return answer(pending["receipt"], replayed=True, persistence="pending")

    def _existing(self, row: Row, digest: str) -> dict[str, Any]:
        """The answer ``run`` gives for an op id already recorded (a receipt still in the journal wins)."""
        if row.digest != digest:
            raise OperationConflict(
                f"operation {row.op_id!r} is recorded with argument digest {row.digest}, not {digest}; "
                "use a new operation id for different work"
            )
        pending = None if row.status == "done" else self._persistence.pending(row.op_id)
        return answer_for(row.op_id, row, pending, self._settled)

    def _settled(self, row: Row) -> Row:
        """A ``started`` row as it stands: recorded ``unknown`` if its owner is gone (or as it now is)."""
        reason = self._owner_gone(row)
        return row if reason is None else self._db.mark_unknown(row, reason)

    def _run_claimed(self, claim: Claim, session: Session, command: object) -> dict[str, Any]:
        with _needed_by(claim.live):  # a signal handler calling result(op_id, cancel=True) runs on this thread
            return self._run_claimed_here(claim, session, command)

    def _run_claimed_here(self, claim: Claim, session: Session, command: object) -> dict[str, Any]:
        phase = "host-raised"
        live = claim.live
        started: Any = None
        try:
            try:  # from the start on the guest may be running: an interrupt is a cancel, with its receipt
                with self._starting():
                    options = {
                        **claim.options,
                        **{k: _marked(v, live) for k in ("on_chunk", "on_exit") if (v := claim.options.get(k))},
                    }
                    started = self._start(session, command, claim.store, options)
                    if not isinstance(started, Mapping):
                        live.attach(started)
                if not isinstance(started, Mapping):
                    close_stdin = getattr(started, "close_stdin", None)
                    if callable(close_stdin):
                        close_stdin()  # the stdin bytes given are all the input there is
            except KeyboardInterrupt:
                if started is None:
                    raise  # nothing is known to have started: abandoned below, never retried
                result: Mapping[str, Any] = started if isinstance(started, Mapping) else _stop_and_wait(started)
            else:
                result = started if isinstance(started, Mapping) else self._wait(claim.op_id, started, live)
            phase = "ledger-raised"
            return self.settle(claim, result)
        except BaseException as exc:
            if isinstance(exc, NotStarted) and started is None and live.handle is None:
                self.release([claim])  # the starter refused before anything started: nothing ran, the op id stays free
                raise
            if live.handle is not None:
                live.handle.kill()
                if phase == "host-raised" and not isinstance(exc, KuroError):  # the program's (a signal handler's):
                    stopped = self._receipt_after_kill(claim)  # the run is stopped and recorded, then it goes on
                    if stopped is not None:
                        from kuro_wasm.host.interrupts import raised_after  # (loaded: a run has started)

                        raise raised_after(exc, stopped) from exc.__cause__
            self.abandon(claim, f"{phase}: {type(exc).__name__}")
            raise

    def _receipt_after_kill(self, claim: Claim) -> Mapping[str, Any] | None:
        """The killed run's receipt, recorded (None: it could not be had or recorded: the claim is then abandoned)."""
        assert claim.live.handle is not None
        try:
            result = _stop_and_wait(claim.live.handle)
            self.settle(claim, result)
        except BaseException:
            return None
        return result

    def _wait(self, op_id: str, handle: RunHandle, live: Live) -> Mapping[str, Any]:
        """The run's result; meanwhile, every :data:`CANCEL_POLL_S` s, honour a cancel request from another process.

        A ``KeyboardInterrupt`` (Ctrl-C; the CLI turns SIGTERM and SIGHUP into one too) while waiting
        is a cancel, not a crash: the guest is killed and its ``cancelled`` receipt is recorded and
        returned, so the operation is not left ``unknown``. Further ones while the killed run ends
        do not stop that wait (:func:`kuro_wasm.host.api.stop_and_wait`: the kill is already asked,
        and the run ends within its stop grace).
        """
        while True:
            try:  # the poll is inside the try: an interrupt while SQLite is asked is a cancel too
                try:
                    return handle.wait(CANCEL_POLL_S)
                except StillRunning:  # the poll's own timeout (a handler's TimeoutError goes on up)
                    pass
                if not live.cancel_requested and self._db.cancel_requested(op_id):
                    live.cancel()
            except KeyboardInterrupt:
                live.cancel_requested = True
                return _stop_and_wait(handle)

    def result(self, op_id: str, *, cancel: bool = False, for_new_task: bool = False) -> dict[str, Any]:
        """What is known about ``op_id``; never starts anything.

        Returns the stored receipt (``kuro/status`` ``done``, ``kuro/replayed``
        True, ``kuro/persistence`` ``saved``, or ``pending`` while it waits in the
        journal); for a run in progress ``{"kuro/status": "running", …}``; for a
        run whose owner is gone ``{"kuro/status": "unknown", …}``; for an id never
        seen ``{"kuro/status": "not-found", "kuro/op-id": op_id}``.

        ``cancel=True`` kills a run of this process and returns its terminal
        receipt once saved (asked from a thread the run needs in order to end — its own ``on_chunk``/``on_exit``,
        a signal handler interrupting its ``run`` — it returns the running status with ``kuro/cancel``
        ``requested`` at once); for a run of
        another process it records a cancel request and returns the running status at once with ``kuro/cancel``
        ``requested`` (``not-recorded`` if SQLite refused it, or the run ended meanwhile): the owner kills
        its run within :data:`CANCEL_POLL_S` s. A claim whose run is its claimant's (:meth:`claim`, a batch)
        answers at once: ``requested`` if this process's claimant attached a handle (killed now), else
        ``not-cancellable`` with a ``kuro/hint`` (nothing recorded, nothing waits). On anything else it is a no-op.
        ``for_new_task=True`` marks the answer ``kuro/current: False``: a
        historical result does not complete new work.

        Raises LedgerCorrupt: a stored row fails its checksum. LedgerError: closed, or SQLite unreadable.
        """
        self._check_open()
        check_op_id(op_id)
        self._persistence.drain()
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
            if not live.runs_here:  # the claimant's run (a batch's): only a handle it attached reaches it
                if live.kill_attached():
                    return {**_live_value(op_id, live), "kuro/cancel": "requested"}
                return {**_live_value(op_id, live), "kuro/cancel": "not-cancellable", "kuro/hint": HINT_CLAIMANT}
            live.cancel()
            if live in getattr(_NEEDED, "runs", ()):  # asked from a thread the run needs: it ends after this
                return {**_live_value(op_id, live), "kuro/cancel": "requested"}
            live.done.wait()
            assert live.final is not None
            return dict(live.final)
        try:
            row = self._db.read_row(op_id)
        except sqlite3.Error as exc:  # the journal may still answer
            row, pending = None, self._persistence.pending(op_id)
            if pending is None:
                raise LedgerError(f"cannot read the ledger {self._path}: {exc}") from exc
        else:
            pending = None if row is not None and row.status == "done" else self._persistence.pending(op_id)
        value = answer_for(op_id, row, pending, self._settled)
        if cancel and value.get("kuro/status") == "running":  # (a receipt from the journal may have none)
            value["kuro/cancel"] = self._db.request_cancel(op_id, self._now())
            if value["kuro/cancel"] == "not-cancellable":
                value["kuro/hint"] = HINT_CLAIMANT
        return value

    def operations(self, *, limit: int | None = None, after: str | None = None) -> list[dict[str, Any]]:
        """Recorded operations, oldest first (in the order they were recorded, whatever the clock said):
        op id, status, digest, times, exit code, outcome.

        Sweeps first (:meth:`recover`), so a run whose owner is gone is listed ``unknown``, not ``started``.
        ``limit`` and ``after`` page through a large ledger: ``after`` is the ``kuro/cursor`` of the last
        row of the previous page (:func:`page_cursor`); a page costs its own rows, not the whole table.

        Raises ModelError: ``limit`` is not an int from 1 to :data:`MAX_PAGE`, or ``after`` is not a
        cursor this ledger made. LedgerCorrupt: the file is damaged. LedgerError: SQLite cannot read it.
        """
        self._check_open()
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE):
            raise ModelError(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r:.40}", reason="invalid-page")
        position = None if after is None else _from_cursor(after)
        self.recover()
        try:
            rows = self._db.operations(limit=limit, after=position)
        except sqlite3.Error as exc:  # a damaged page, an unreadable file: said, never raised raw
            raise self._db.refusal(exc, "cannot list the ledger", "is damaged") from exc
        for rowid, row in rows:
            row["kuro/cursor"] = page_cursor(rowid, row["kuro/op-id"])
        return [row for _, row in rows]

    def close(self) -> None:
        """Stop accepting calls (idempotent). Runs already in progress still save their receipts."""
        self._closed = True
        self._db.close()

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
