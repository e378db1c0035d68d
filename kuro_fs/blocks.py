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
No network: nothing is fetched from or sent to a gateway.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
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
    "block_bytes",
    "publish_blocks",
    "put_block",
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
    ``corrupt`` if its bytes no longer hash to it. Duplicates are checked once.
    """
    published = 0
    rejected: list[str] = []
    reasons: dict[str, str] = {}
    seen: set[str] = set()
    for cid in cids:
        key = cid if isinstance(cid, str) else repr(cid)
        if key in seen:
            continue
        seen.add(key)
        try:
            parsed = parse(cid)
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
    if parsed.hash == "identity":
        return cid
    if parsed.mintable:
        stored = store.put(data, parsed.codec)
        if stored != parsed.key:  # pragma: no cover - a store that mints another name is broken
            raise BlockStoreError(f"store filed {cid} as {stored}")
        return cid
    try:
        return str(store.put(data, parsed.codec, cid=cid))  # type: ignore[call-arg]
    except TypeError as exc:
        raise BlockStoreError(f"{type(store).__name__} cannot hold {parsed.hash} blocks such as {cid}") from exc


def _key(parsed: ParsedCID, cid: str) -> str:
    # A CIDv1 string parsed only if canonical, so it is its own key; a CIDv0 maps to its CIDv1.
    return cid if parsed.version == 1 else parsed.key


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
        with self._lock:
            self._blocks.setdefault(key, data)
        return cid

    def get(self, cid: str) -> bytes | None:
        parsed = parse(cid)
        if parsed.hash == "identity":
            return parsed.digest
        return self._blocks.get(_key(parsed, cid))

    def has(self, cid: str) -> bool:
        parsed = parse(cid)
        return parsed.hash == "identity" or _key(parsed, cid) in self._blocks

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
