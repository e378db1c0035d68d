"""A batch worker's side: run a chunk of invocations in this process, hand back receipts and new blocks.

## The one decision
A worker process keeps what is costly and cannot travel — its wasmtime engine, its compiled and
pre-linked guests (the host's process-wide caches) and its open block store — in one
:class:`WorkerState` for its whole life, and is sent only plain data: each invocation as
:func:`to_wire` makes it (session data, guest spec, stdin bytes, limits), never a
``wasmtime.Module`` or ``Engine``, never a block. Each run reads through a :class:`CaptureStore`:
reads go to the worker's store (verified by CID there and again by the loader), writes stay in
the run's own overlay, and only the blocks reachable from the run's new fs root travel back with
its receipt, for the driver to re-hash.

A chunk runs its invocations one after another and stops at the first sign of a cancel: the
run going on is killed (its receipt says ``cancelled``) and every invocation after it is
reported **not started** (``skipped``) — the worker's own word, and the only one there is, that
they did not run.

## Effects
Runs guests (:func:`kuro_wasm.host.api.run`), reads the worker's block store, the clock.

## Not done here
Claims, fences and transport: the backend's (:mod:`kuro_wasm.batch.cluster`, :mod:`kuro_wasm.batch.local`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kuro_fs.blocks import BlockStore, DeleteResult, DropResult, MemoryBlockStore, PublishResult, StatsResult
from kuro_fs.car import links_of
from kuro_fs.errors import BlockStoreError, KuroFsError
from kuro_wasm.batch.stores import WorkerStore
from kuro_wasm.errors import KuroError
from kuro_wasm.model.invocation import Invocation
from kuro_wasm.model.receipt import HOST_KEYS
from kuro_wasm.model.sessions import Session

__all__ = ["CaptureStore", "Kill", "WorkerState", "host_part", "to_wire", "walk_new"]

_HOST: frozenset[str] = frozenset("kuro/" + name for name in HOST_KEYS)


def to_wire(chunk: list[tuple[int, Invocation]]) -> dict[str, Any]:
    """The plain data a worker gets for a chunk of ``(index, invocation)`` (no object with identity, no block).

    ``{"sessions": [session data…], "items": [{"i", "s" (index into sessions), "c", "in", "l"}…]}``:
    a chunk's invocations usually share a few sessions, each sent once.
    """
    sessions: list[dict[str, Any]] = []
    seen: dict[Session, int] = {}
    items = []
    for index, inv in chunk:
        at = seen.get(inv.session)
        if at is None:
            at = seen[inv.session] = len(sessions)
            sessions.append(inv.session.to_data())
        items.append({"i": index, "s": at, "c": dict(inv.command), "in": inv.stdin, "l": inv.limits.as_options()})
    return {"sessions": sessions, "items": items}


def host_part(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a receipt a host may state (the rest the driver rebuilds from its own session and command)."""
    return {k: v for k, v in receipt.items() if k in _HOST}


class CaptureStore:
    """One run's store: reads from the worker's store, writes kept here (see the module docstring).

    ``present`` is a set of CIDs the worker's store is known to hold (shared by the runs of a
    chunk): blocks are immutable and a batch never deletes, so a guest found once is not looked
    up again for every run of the chunk (a file store's ``has`` is a ``stat``).
    """

    def __init__(self, base: BlockStore, present: set[str] | None = None) -> None:
        self._base = base
        self._own: MemoryBlockStore | None = None
        self._present = present if present is not None else set()

    def put(self, data: bytes, codec: str = "raw") -> str:
        if self._own is None:
            self._own = MemoryBlockStore()
        return self._own.put(data, codec)

    def get(self, cid: str) -> bytes | None:
        data = None if self._own is None else self._own.get(cid)
        return data if data is not None else self._base.get(cid)

    def has(self, cid: str) -> bool:
        if cid in self._present or (self._own is not None and self._own.has(cid)):
            return True
        found = self._base.has(cid)
        if found:
            self._present.add(cid)
        return found

    def delete(self, cid: str) -> DeleteResult:
        raise BlockStoreError("a batch run cannot delete blocks")

    def stats(self) -> StatsResult:
        return {"blocks": 0, "bytes": 0} if self._own is None else self._own.stats()

    def publish(self, cids: Iterable[str]) -> PublishResult:
        raise BlockStoreError("a batch run cannot publish blocks")

    def drop_cache(self) -> DropResult:
        raise BlockStoreError("a batch run cannot drop blocks")

    def written(self, root: object) -> list[tuple[str, bytes]]:
        """The blocks this run wrote that ``root`` reaches (what the driver needs to hold the new tree)."""
        own = self._own
        if not isinstance(root, str) or own is None:
            return []
        return [(cid, block) for cid, block in walk_new(root, own.get) if block is not None]


def walk_new(root: str, new: Callable[[str], bytes | None]) -> Iterator[tuple[str, bytes | None]]:
    """The blocks reachable from ``root`` through new blocks: ``(cid, bytes)`` for a new one (its links
    are walked in turn), ``(cid, None)`` for one ``new`` does not know (held before: not walked).

    Raises DagPbError / DagCborError: a new block does not decode as its codec.
    """
    seen: set[str] = set()
    stack = [root]
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        block = new(cid)
        yield cid, block
        if block is not None:
            stack.extend(links_of(cid, block))


class Kill:
    """The kill switch of the run a chunk is executing, pulled from the cancel watcher's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kill: Callable[[], None] | None = None
        self.cancelled = False

    def arm(self, kill: Callable[[], None]) -> None:
        """A run has started: ``kill`` stops it (at once, if a cancel came first)."""
        with self._lock:
            self._kill = kill
            now = self.cancelled
        if now:
            kill()

    def pull(self) -> None:
        """Cancel: kill the run going on, and let no further run start."""
        with self._lock:
            self.cancelled = True
            kill = self._kill
        if kill is not None:
            kill()


class WorkerState:
    """What one worker keeps between chunks: its block store (opened once) and its cache home.

    ``home`` is the runs' ``home`` (:func:`kuro_wasm.host.api.run`: the compiled-module cache;
    None: this process's own kuro home, False: memory only), and the store's cache home too
    (a gateway's verified blocks in its ``blocks/``). ``isolation`` is passed to every run
    (None: in this process; a :class:`~kuro_wasm.host.worker.pool.WorkerPool`: in its worker processes).
    """

    def __init__(self, store: WorkerStore, home: Any = None, isolation: Any = None) -> None:
        from kuro_fs.home import resolve_home

        self.spec = store
        self.home = home
        self.isolation = isolation
        self.error: str | None = None
        self._base: BlockStore | None = None
        try:
            self._base = store.open(None if home is False else resolve_home(home))
        except (KuroFsError, KuroError, OSError) as exc:
            self.error = f"{store.describe()} cannot be opened here: {exc}"

    def close(self) -> None:
        """Close the block store (a gateway store's HTTP client, a file store's handles). Idempotent."""
        base, self._base = self._base, None
        close = getattr(base, "close", None)
        if callable(close):
            close()

    def run_chunk(self, chunk: Mapping[str, Any], kill: Kill) -> dict[str, Any]:
        """Run a chunk (:func:`to_wire`) in order; ``{"ran": [...], "skipped": [indexes], "seconds": s}``."""
        from kuro_wasm.host.api import run

        assert self._base is not None, self.error
        sessions = [Session.from_data(data) for data in chunk["sessions"]]
        present: set[str] = set()
        ran: list[dict[str, Any]] = []
        skipped: list[int] = []
        began = time.monotonic()
        for item in chunk["items"]:
            if kill.cancelled:
                skipped.append(item["i"])
                continue
            sess = sessions[item["s"]]
            capture = CaptureStore(self._base, present)
            try:
                receipt = run(
                    sess,
                    item["c"],
                    store=capture,
                    fs=sess.fs_root_cid,
                    stdin=item["in"],
                    home=self.home,
                    on_start=kill.arm,
                    isolation=self.isolation,
                    **item["l"],
                )
                blocks = capture.written(receipt.get("kuro/fs-root-after"))
                part = host_part(receipt)
            except Exception as exc:  # the host failed this run; never the guest's fault, never a lost run
                isolation = "wasmtime" if self.isolation is None else "process"
                part = {"kuro/exit-code": 70, "kuro/outcome": "host-error", "kuro/isolation": isolation}
                part["kuro/error"] = f"host error in the batch worker: {type(exc).__name__}: {exc}"
                blocks = []
            ran.append({"i": item["i"], "receipt": part, "blocks": blocks})
        return {"ran": ran, "skipped": skipped, "seconds": time.monotonic() - began}
