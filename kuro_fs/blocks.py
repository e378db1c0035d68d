"""Block stores: bytes by CID, with a closed vocabulary of operations.

## The one decision
Every store speaks the same seven operations with the same result shapes, the
vocabulary of the original design's browser block-store worker:

============== ========================================= =====================================
operation      result                                    failure
============== ========================================= =====================================
put(data, c)   CID string (minted here from the bytes)   ``BlockStoreError``; ``TypeError``
get(cid)       bytes, or ``None`` on a miss              ``CorruptBlock`` on a hash mismatch
has(cid)       bool                                      —
delete(cid)    ``{"removed": bool}`` — idempotent        ``BlockStoreError`` (never a bare False)
stats()        ``{"blocks": n, "bytes": n}``             —
publish(cids)  ``{"published": n, "rejected": [cid…],    a store failure raises ``BlockStoreError``;
               "reasons": {cid: reason}}``               it is not counted as a rejection
drop_cache()   ``{"removed": n}``                        ``BlockStoreError``
============== ========================================= =====================================

A malformed CID raises ``InvalidCID`` in every operation but ``publish``
(where it is a rejection). A durable store may also raise ``BlockStoreError``
from ``get``/``has``/``stats`` when the OS fails, and from anything after ``close``.

A store may also offer ``batch()``: a context in which its puts are staged and
become visible together when the context ends without an error, or not at all
when it ends with one (:class:`StoreBatch`; use :func:`open_batch`, which also
accepts stores and wrappers without it). The batch belongs to the *context*
(a :class:`contextvars.ContextVar`), not to the store object: a put on the same
store from an unrelated thread is never silently batched, and a worker thread
joins a batch only when it runs in a copy of the batch's context.

A store mints the CID itself from the bytes it is given, so no caller can
file bytes under a name they do not hash to. A miss is ``None``, not an error:
the caller decides whether absence is a denial (``block-missing``) or normal.
``publish`` re-hashes each named block and counts only those whose bytes still
match their CID — it is the check a block passes before it leaves this store;
``reasons`` says why each rejected CID was refused (``missing``, ``corrupt`` or
``invalid-cid``).

Stores read every CID :mod:`kuro_fs.cid` reads (issue 17): a CIDv0 and its CIDv1 are one block
(filed under :attr:`~kuro_fs.cid.ParsedCID.key`), an identity CID is always present (its bytes are
inline, nothing is stored), and a concrete store's ``put(data, cid=c)`` files bytes of any accepted
hash under ``c`` only if they hash to it (:func:`put_block` is the one way callers do that).

## Effects
None beyond memory: :class:`MemoryBlockStore` is a dict behind a ``threading`` lock; the durable store is in
:mod:`kuro_fs.filestore`.

## Not done here
No network: nothing is fetched from or sent to a gateway. ``delete``, ``stats``,
``drop_cache`` and listings see committed blocks only, never a batch's staged ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Protocol, TypedDict, runtime_checkable

from kuro_fs.cid import ParsedCID, cid_for, matches, parse
from kuro_fs.errors import BlockStoreError, CorruptBlock, InvalidCID

__all__ = [
    "BlockStore",
    "DeleteResult",
    "DropResult",
    "MemoryBlockStore",
    "PublishResult",
    "StatsResult",
    "StoreBatch",
    "active_batch",
    "block_bytes",
    "open_batch",
    "publish_blocks",
    "put_block",
    "put_matched",
]


class DeleteResult(TypedDict):
    removed: bool


class StatsResult(TypedDict):
    blocks: int
    bytes: int


class PublishResult(TypedDict):
    published: int
    rejected: list[str]
    reasons: dict[str, str]


class DropResult(TypedDict):
    removed: int


@runtime_checkable
class BlockStore(Protocol):
    """What every block store offers; see the module docstring for the result shapes."""

    def put(self, data: bytes, codec: str = "raw") -> str:
        """Store ``data`` as a block of ``codec``; return its CID."""
        ...

    def get(self, cid: str) -> bytes | None:
        """The bytes stored under ``cid``, or ``None`` if absent. Raises CorruptBlock."""
        ...

    def has(self, cid: str) -> bool:
        """True if a block is stored under ``cid``."""
        ...

    def delete(self, cid: str) -> DeleteResult:
        """Remove a block; ``{"removed": False}`` if it was absent."""
        ...

    def stats(self) -> StatsResult:
        """Number of blocks and total bytes held."""
        ...

    def publish(self, cids: Iterable[str]) -> PublishResult:
        """Re-hash each named block; count those that match their CID."""
        ...

    def drop_cache(self) -> DropResult:
        """Remove every block; report how many were removed."""
        ...


def block_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as an immutable ``bytes`` copy: what every store's ``put`` files.

    Raises TypeError: for anything that is not bytes-like. ``bytes(5)`` is five
    zero bytes and ``bytes([1, 2])`` two bytes, so an int or a list given by
    mistake would otherwise be stored as a silent wrong block.

    >>> block_bytes(bytearray(b"ab"))
    b'ab'
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"a block is bytes, got {type(data).__name__}")
    return bytes(data)


def publish_blocks(store: BlockStore, cids: Iterable[str]) -> PublishResult:
    """The shared body of ``publish``: re-hash each block of ``store`` named in ``cids``.

    A CID is rejected as ``invalid-cid`` if malformed, ``missing`` if absent and
    ``corrupt`` if its bytes no longer hash to it. A block is checked and counted once, however
    often and under whichever of its names (a CIDv0 and its CIDv1) it is given.
    """
    published = 0
    rejected: list[str] = []
    reasons: dict[str, str] = {}
    seen: set[str] = set()  # the names given
    blocks: set[str] = set()  # the blocks they name (a CIDv0 and its CIDv1 share a key)
    for cid in cids:
        key = cid if isinstance(cid, str) else repr(cid)
        if key in seen:
            continue
        seen.add(key)
        try:
            parsed = parse(cid)
            if parsed.key in blocks:
                continue
            blocks.add(parsed.key)
            data = store.get(cid)
        except InvalidCID:
            rejected.append(key)
            reasons[key] = "invalid-cid"
            continue
        except CorruptBlock:
            rejected.append(key)
            reasons[key] = "corrupt"
            continue
        if data is None:
            rejected.append(key)
            reasons[key] = "missing"
        elif not matches(parsed, data):
            rejected.append(key)
            reasons[key] = "corrupt"
        else:
            published += 1
    return {"published": published, "rejected": rejected, "reasons": reasons}


def put_block(store: BlockStore, cid: str, data: bytes) -> str:
    """File ``data`` under ``cid`` in ``store`` only if it is the block ``cid`` names; return ``cid``.

    A name kuro can mint (sha2-256, CIDv0 or CIDv1) goes through the store's own ``put``; another
    hash needs a store whose ``put`` takes ``cid=`` (:class:`MemoryBlockStore`,
    :class:`~kuro_fs.filestore.FileBlockStore`, the gateway store); an identity CID stores nothing.

    Raises InvalidCID: a malformed ``cid``. Raises CorruptBlock: ``data`` does not hash to ``cid``.
    Raises BlockStoreError: ``store`` cannot file a block of that hash. Raises TypeError: ``data`` not bytes-like.
    """
    parsed = parse(cid)
    data = block_bytes(data)
    if not matches(parsed, data):
        raise CorruptBlock(cid, f"{len(data)} given bytes do not hash to this CID; nothing stored")
    stored = put_matched(store, parsed, data)
    if parsed.mintable and stored != parsed.key:  # pragma: no cover - a store that mints another name is broken
        raise BlockStoreError(f"store filed {cid} as {stored}")
    return cid


def put_matched(store: BlockStore, parsed: ParsedCID, data: bytes) -> str:
    """:func:`put_block` for bytes the caller has just checked with ``matches(parsed, data)``; return the name filed.

    The hash is not computed again here (``import_car`` checks each block once, then files it):
    a sha2-256 block goes through ``store.put`` (which mints its CIDv1 — a CIDv0's key), another
    hash through ``store.put(data, cid=…)``, an identity block nowhere (its name is returned).

    Raises BlockStoreError: ``store`` cannot file a block of that hash, or fails.
    """
    if parsed.mintable:
        return store.put(data, parsed.codec)
    if parsed.hash == "identity":
        return str(parsed)
    try:
        return str(store.put(data, parsed.codec, cid=str(parsed)))  # type: ignore[call-arg]
    except TypeError as exc:
        raise BlockStoreError(f"{type(store).__name__} cannot hold {parsed.hash} blocks such as {parsed}") from exc


def _key(parsed: ParsedCID, cid: str) -> str:
    # A CIDv1 string parsed only if canonical, so it is its own key; a CIDv0 maps to its CIDv1.
    return cid if parsed.version == 1 else parsed.key


# ---- batches


_ACTIVE: ContextVar[tuple[StoreBatch, ...]] = ContextVar("kuro_fs_active_batches", default=())


class StoreBatch:
    """A batch of puts on one store, scoped to the current context; each store subclasses it.

    ``with store.batch():`` — every ``put`` on ``store`` made in this context (and
    in contexts copied from it with :func:`contextvars.copy_context`, which is how
    worker threads join) is staged. Leaving the block without an error commits
    the staged blocks (they become visible and, for a durable store, durable);
    leaving it with an error discards them. :meth:`flush` commits early and keeps
    the batch open. Entering while a batch of the same store is already active
    joins that batch: the outermost one commits. A put made after the batch ended,
    from a stale copy of its context, is an ordinary put.

    Raises BlockStoreError: a batch object entered twice; a failed commit (from :meth:`__exit__`).
    """

    def __init__(self, store: object) -> None:
        self.store = store
        self._token: Token[tuple[StoreBatch, ...]] | None = None
        self._state = "new"  # new → open → closing → closed, or new → joined

    @property
    def open(self) -> bool:
        """True between entering and leaving (not for a batch that joined another)."""
        return self._state == "open"

    def __enter__(self) -> StoreBatch:
        if self._state != "new":
            raise BlockStoreError("a batch is entered once; open a new one with store.batch()")
        active = _ACTIVE.get()
        if any(b.store is self.store and b.open for b in active):
            self._state = "joined"
            return self
        self._state = "open"
        self._token = _ACTIVE.set((*active, self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state != "open":
            return
        assert self._token is not None
        _ACTIVE.reset(self._token)
        self._state = "closing"
        try:
            self._close()
            if exc_type is None:
                self.flush()
        finally:
            self._state = "closed"
            self._discard()

    def flush(self) -> int:
        """Commit every block staged so far; return how many were committed. The batch stays open."""
        raise NotImplementedError

    def _close(self) -> None:
        """Refuse new puts into this batch (they become ordinary puts); wait for those in flight."""
        raise NotImplementedError

    def _discard(self) -> None:
        """Drop whatever is still staged (nothing after a successful flush) and release resources."""
        raise NotImplementedError


def active_batch(store: object) -> StoreBatch | None:
    """The open batch of ``store`` in the current context, if any (what a store's ``put`` consults)."""
    for batch in _ACTIVE.get():
        if batch.store is store and batch.open:
            return batch
    return None


@contextmanager
def open_batch(store: object) -> Iterator[bool]:
    """Run the block inside ``store.batch()`` if the store (or the store a wrapper forwards to) has one.

    Yields True when puts through ``store`` are batched — committed together at
    the end, discarded if the block raises — and False for a store without
    ``batch()``, whose puts stay immediate and individually committed.
    """
    make = getattr(store, "batch", None)
    if not callable(make):
        yield False
        return
    with make():
        yield True


class _MemoryBatch(StoreBatch):
    # Staged blocks live in a dict until commit; a discarded batch leaves the store untouched.

    def __init__(self, store: MemoryBlockStore) -> None:
        super().__init__(store)
        self._store = store
        self._staged: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def stage(self, cid: str, data: bytes) -> bool:
        with self._lock:
            if not self.open:
                return False
            self._staged.setdefault(cid, data)
            return True

    def staged(self, cid: str) -> bytes | None:
        with self._lock:
            return self._staged.get(cid)

    def flush(self) -> int:
        with self._lock:
            staged, self._staged = self._staged, {}
        self._store._merge(staged)
        return len(staged)

    def _close(self) -> None:
        with self._lock:  # a stage() that saw the batch open has finished; later ones see it closing
            pass

    def _discard(self) -> None:
        with self._lock:
            self._staged = {}


class MemoryBlockStore:
    """A block store in a dict: for tests, benchmarks and throwaway work.

    Usable from several threads at once. ``get`` does not re-hash (the bytes never left this process);
    ``publish`` does.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        """Store ``data``; with ``cid``, under that name only if the bytes hash to it (any read hash)."""
        data = block_bytes(data)
        if cid is None:
            cid = key = cid_for(data, codec)
        else:
            parsed = parse(cid)
            if not matches(parsed, data):
                raise CorruptBlock(cid, f"{len(data)} given bytes do not hash to this CID; nothing stored")
            if parsed.hash == "identity":
                return cid
            key = _key(parsed, cid)
        batch = active_batch(self)
        if isinstance(batch, _MemoryBatch) and key not in self._blocks and batch.stage(key, data):
            return cid
        with self._lock:
            self._blocks.setdefault(key, data)
        return cid

    def get(self, cid: str) -> bytes | None:
        parsed = parse(cid)
        if parsed.hash == "identity":
            return parsed.digest
        key = _key(parsed, cid)
        found = self._blocks.get(key)
        if found is None:
            batch = active_batch(self)
            if isinstance(batch, _MemoryBatch):
                return batch.staged(key)
        return found

    def has(self, cid: str) -> bool:
        parsed = parse(cid)
        if parsed.hash == "identity":
            return True
        key = _key(parsed, cid)
        if key in self._blocks:
            return True
        batch = active_batch(self)
        return isinstance(batch, _MemoryBatch) and batch.staged(key) is not None

    def batch(self) -> StoreBatch:
        """A batch of this store (see :class:`StoreBatch`): puts in it appear together at its end."""
        return _MemoryBatch(self)

    def _merge(self, staged: dict[str, bytes]) -> None:
        with self._lock:
            for key, data in staged.items():
                self._blocks.setdefault(key, data)

    def delete(self, cid: str) -> DeleteResult:
        parsed = parse(cid)
        with self._lock:
            return {"removed": self._blocks.pop(_key(parsed, cid), None) is not None}

    def stats(self) -> StatsResult:
        with self._lock:
            return {"blocks": len(self._blocks), "bytes": sum(len(b) for b in self._blocks.values())}

    def publish(self, cids: Iterable[str]) -> PublishResult:
        return publish_blocks(self, cids)

    def drop_cache(self) -> DropResult:
        with self._lock:
            n = len(self._blocks)
            self._blocks.clear()
        return {"removed": n}

    def cids(self) -> list[str]:
        """Every CID held, sorted (for tests and audits)."""
        with self._lock:
            return sorted(self._blocks)
