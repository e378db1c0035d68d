"""Runs of this process: the in-process half of the ledger's claim on an operation id.

## The one decision
SQLite decides between processes which caller owns an operation id; within one
process a registry of live runs, keyed by ``(pid, database path, op id)``, answers
first. A second thread asking about an op id that this process is claiming
waits on :attr:`Live.decided` for the verdict instead of racing SQLite, and a
thread asking about a run this process owns is answered from memory (its status,
its stream's counters, or — after a cancel — its final receipt), never by a
second run. The pid in the key means a forked child sees none of its parent's runs.

## Effects
Module-level state: :data:`LIVE` and its lock :data:`LIVE_LOCK`, and one lock and
two ``threading.Event`` per run. :meth:`Live.attach` and :meth:`Live.cancel` call
the run's ``kill()``.

## Not done here
The claim itself (the ``started`` row) and every decision about what to answer
are :class:`kuro_wasm.ledger.ledger.Ledger`'s; cancel requests from another process
arrive through SQLite (:mod:`kuro_wasm.ledger.db`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kuro_fs.blocks import BlockStore

__all__ = ["LIVE", "LIVE_LOCK", "Claim", "Live", "RunHandle"]


class RunHandle(Protocol):
    """What a starter returns for a run it started (``kuro_wasm.host.api.Handle`` fits).

    A handle that also has ``close_stdin()`` gets it called right after the start:
    a ledgered run's ``stdin`` bytes are all its input (they are in the digest).
    """

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]: ...


@dataclass(eq=False)
class Live:
    """One run in progress in this process: the in-process half of the claim."""

    digest: str
    started_at: int
    handle: RunHandle | None = None
    cancel_requested: bool = False
    final: dict[str, Any] | None = None
    owner: bool = False
    #: The ledger itself runs it (:meth:`~kuro_wasm.ledger.ledger.Ledger.run`): a handle comes, or the run ends.
    #: False for a claim whose run is its claimant's (a batch): only a handle the claimant attaches reaches it.
    runs_here: bool = False
    decided: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, owner: bool) -> None:
        """The claim is settled: this entry owns the run, or (``False``) it has left the registry."""
        self.owner = owner
        self.decided.set()

    def attach(self, handle: RunHandle) -> None:
        """The run has started: keep its handle, and kill it at once if a cancel came first."""
        with self.lock:
            self.handle = handle
            kill = self.cancel_requested
        if kill:
            handle.kill()

    def cancel(self) -> None:
        """Ask for the run to stop: kill it now if it has started, else as soon as it does."""
        with self.lock:
            self.cancel_requested = True
            handle = self.handle
        if handle is not None:
            handle.kill()

    def kill_attached(self) -> bool:
        """Kill the run through its handle if one is attached (True); else change nothing (False).

        For a claim whose run is its claimant's: no cancel is left pending, since nothing may ever attach.
        """
        with self.lock:
            handle = self.handle
            if handle is not None:
                self.cancel_requested = True
        if handle is None:
            return False
        handle.kill()
        return True

    def finish(self, value: dict[str, Any]) -> None:
        """The run's final answer (its saved receipt, or ``unknown``); wakes whoever waits for it."""
        self.final = value
        self.done.set()


#: The live runs of this process by ``(pid, database path, op id)``: a forked child sees none of its parent's.
LIVE: dict[tuple[int, str, str], Live] = {}
LIVE_LOCK = threading.Lock()


@dataclass(eq=False)
class Claim:
    """An operation id this process has claimed (:meth:`kuro_wasm.ledger.ledger.Ledger.claim`) and not yet ended.

    ``options`` are the run options with every limit filled in; ``store`` is where the run's
    blocks and its persisted receipt go, ``output_store`` the private output store when the
    raw output is to be kept. :meth:`attach` gives the ledger the run's handle, so that a
    cancel (``Ledger.result(op_id, cancel=True)`` in this process) reaches it.
    """

    op_id: str
    digest: str
    options: dict[str, Any]
    store: BlockStore
    output_store: BlockStore | None
    live: Live

    def attach(self, handle: RunHandle) -> None:
        """The run has started somewhere: cancels of this op id now kill it through ``handle``."""
        self.live.attach(handle)
