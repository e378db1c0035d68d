"""The decoded-block cache: directory blocks and HAMT nodes decoded once, kept by CID, least recently used out.

## The one decision
A block never changes under its CID, so its decoding can be reused by every
later read — but only if the bytes that were decoded really hash to that CID.
A value therefore enters the cache only through :func:`load_verified`, after
the bytes the store returned were re-hashed (sha2-256 against the CID's
digest), or from the writer that encoded the bytes and minted the CID from
them (:meth:`DirCache.put`, called by :mod:`kuro_fs.fsdir` on commit). A store
that hands out bytes under a CID they do not hash to is caught before anything
is cached, so one cache can serve every store in the process without one store
poisoning another's reads. A hit still asks the store ``has(cid)``: a block the
store has lost is reported lost (``block-missing``), exactly as without the
cache; what a hit skips is the fetch, the hash and the decoding.

The bound is on the summed **block bytes** of what is held (default
:data:`DEFAULT_MAX_BYTES`, 16 MiB; the decoded Python objects take about five
to eight times that). Least recently used entries go first — except versions
a write has just superseded for the first time (:meth:`DirCache.demote`,
called by :class:`kuro_fs.fsdir.WorkingTree` on commit): they go before
everything else. Without that, a chain of writes into a large sharded
directory fills the cache with dead copies of the nodes on its paths (a new root and interior
node every write, ~20–60 KB) and evicts the live nodes of the rest of the
directory, which then cost milliseconds each to decode again: writes into a
100k–200k-entry directory settled at 1.7–2.9 ms instead of ~0.3–0.6 ms.
A version that a second write supersedes again is kept in its place: it is
the base of writes that branch from one state (undo is remembering a root;
``Fs.write`` from the same ``Fs`` again and again), and demoting it let the
new nodes of those writes evict it — each write then decoded the base's
nodes again (a write into a 50,000-entry directory from one base: ~0.2 ms →
1.6–2.3 ms once 16 MiB of new nodes had gone in). What was superseded is
remembered by CID apart from the values (the last :data:`SUPERSEDED_KEPT`
CIDs, ~100 bytes each), so a base node evicted and decoded again is still
known as one.
A directory whose live nodes alone exceed the bound (about 200,000 entries
of short names) still misses; its writes then cost more, not fail.

## Effects
Process memory, shared across threads behind one lock. :data:`SHARED` is the
process-wide instance an :class:`~kuro_fs.fs.Fs` uses unless it is given its own.

## Not done here
No caching of file bytes (file blocks are read, not decoded), no persistence.
A directory block whose stored copy rots *after* it was decoded is not noticed
by later directory reads: they are answered from the decoding of the verified
bytes, which is the right answer for that CID; ``publish``, CAR export and a
cold read (another process, :meth:`DirCache.clear`) still find the damage.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final, Protocol, TypedDict, TypeVar

from kuro_fs.cid import matches, parse
from kuro_fs.errors import CorruptBlock, MissingBlock

__all__ = ["DEFAULT_MAX_BYTES", "SHARED", "SUPERSEDED_KEPT", "CacheStats", "DirCache", "load_verified"]

DEFAULT_MAX_BYTES: Final = 16 << 20
#: How many superseded CIDs a cache remembers (without their values) to tell a branching base from a dead version.
SUPERSEDED_KEPT: Final = 8192

T = TypeVar("T")


class CacheStats(TypedDict):
    entries: int
    bytes: int
    hits: int
    misses: int


class _Store(Protocol):
    def get(self, cid: str) -> bytes | None: ...

    def has(self, cid: str) -> bool: ...


class DirCache:
    """A bounded map CID → decoded value, least recently used evicted first. Usable from several threads.

    Raises ValueError: a negative ``max_bytes``.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._superseded: OrderedDict[str, None] = OrderedDict()  # CIDs a write superseded, oldest first
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def get(self, cid: str) -> object | None:
        """The value held for ``cid`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(cid)
            if item is None:
                self._misses += 1
                return None
            self._items.move_to_end(cid)
            self._hits += 1
            return item[0]

    def put(self, cid: str, value: object, weight: int) -> None:
        """Hold ``value`` — the decoding of a block of ``weight`` bytes that hashes to ``cid`` — for later reads.

        The caller vouches for the hash (see the module docstring). A value heavier than the
        whole bound is not held.
        """
        if weight > self.max_bytes:
            return
        with self._lock:
            if cid in self._items:
                self._items.move_to_end(cid)
                return
            self._items[cid] = (value, weight)
            self._bytes += weight
            while self._bytes > self.max_bytes:
                _, (_, gone) = self._items.popitem(last=False)
                self._bytes -= gone

    def demote(self, cids: Iterable[str]) -> None:
        """Put ``cids`` (those held, superseded for the first time) first in line for eviction.

        A chain of writes replaces the nodes on its path by new versions; left as most recently used,
        the dead versions would outrank the live nodes of the rest of the directory and push them out.
        A version a second write supersedes again stays where it is: writes keep branching from it.
        """
        with self._lock:
            items, superseded = self._items, self._superseded
            for cid in cids:
                if cid in superseded:  # superseded before: writes branch from it
                    superseded.move_to_end(cid)
                    continue
                superseded[cid] = None
                if len(superseded) > SUPERSEDED_KEPT:
                    superseded.popitem(last=False)
                if cid in items:
                    items.move_to_end(cid, last=False)

    def clear(self) -> None:
        """Drop everything held (the counters too)."""
        with self._lock:
            self._items.clear()
            self._superseded.clear()
            self._bytes = self._hits = self._misses = 0

    def stats(self) -> CacheStats:
        """How many values and block bytes are held, and the hits and misses so far."""
        with self._lock:
            return {"entries": len(self._items), "bytes": self._bytes, "hits": self._hits, "misses": self._misses}


#: The process-wide cache (16 MiB of blocks).
SHARED: Final = DirCache()


def load_verified(
    store: _Store, cid: str, cache: DirCache, decode: Callable[[bytes], T], kind: type[T] | tuple[type[T], ...]
) -> T:
    """The decoding of block ``cid`` of ``store``: from ``cache`` if held there (and the store still has it),
    else fetched, hash-checked, decoded by ``decode`` and cached.

    A cached value that is not a ``kind`` is decoded again from the store's bytes (so a
    block used in the wrong place fails the way its bytes fail).
    Raises MissingBlock: the store lacks the block. Raises CorruptBlock: its bytes do not hash
    to ``cid`` (nothing is cached). Raises whatever ``decode`` raises; InvalidCID for a bad ``cid``.
    """
    held = cache.get(cid)
    if isinstance(held, kind) and store.has(cid):
        return held
    block = store.get(cid)
    if block is None:
        raise MissingBlock(cid)
    if not matches(parse(cid), block):  # under the CID's own hash: a directory may be named by any hash read
        raise CorruptBlock(cid)
    value = decode(block)
    cache.put(cid, value, len(block))
    return value
