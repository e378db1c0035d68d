"""One read of a UnixFS file tree into a buffer: each distinct subtree walked once, every repeat copied.

## The one decision
A file DAG may link one block many times — a hole is one all-zero leaf repeated, and a hostile
"diamond" of four dag-pb blocks whose every node links one child 174 times claims 174⁴ one-byte
leaves (~900 MB). Walking every link costs per *link*: ~37 µs each, hours for that diamond. So a
read remembers, for each subtree (raw leaf or File node) it has written **whole** into the buffer,
where its bytes are (:attr:`Filler.memo`: CID → view); any later link to that CID, whole or in part,
is a copy from there (memcpy speed), not a walk. A read then costs the distinct blocks it reaches
plus the bytes it outputs. The checks a walk makes are kept on a copy: the size the parent names
against the subtree's own, and the depth cap against the subtree's height.

Raw leaves are fetched :data:`FETCH_RUN` at a time (``get_many_into`` reads and verifies each one in
its slot, on several threads); a copy whose source is still waiting for its fetch waits too, in
order, so copies see their bytes. A leaf the read takes only part of is fetched whole once (with
``get``) and kept for the rest of the read.

Decoded File nodes are held by CID in :data:`FILE_NODES` (a :class:`~kuro_fs.dircache.DirCache`
bounded by block bytes, :data:`FILE_NODES_MAX_BYTES`), entered only through
:func:`~kuro_fs.dircache.load_verified` (hash-checked, the store still asked ``has``): a second read
of a file whose root holds a million links does not decode that 46 MB block again. Each node is kept
compact (its link CIDs joined into one ``bytes``, its sizes in arrays) rather than as a million
:class:`~kuro_fs.dagpb.PBLink` objects, and is found by bisection, so a small read of a wide node
costs its depth, not its width. A store with only ``get`` is read without the cache.

## Pure
Blocks come in through the injected store; the node cache is process memory.

## Not done here
Which bytes a read wants and the output's allocation (:mod:`kuro_fs.fileread`); the streaming
windows (:func:`kuro_fs.fileread.stream_file`). A node block larger than :data:`FILE_NODES_MAX_BYTES`
is not kept: it is decoded again by each read that reaches it. The held decodings take about 1.3×
their block bytes (a 46 MB root of a million links: ~60 MB).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol, cast

from kuro_fs.cid import codec_is
from kuro_fs.dircache import DirCache, load_verified
from kuro_fs.errors import DagPbError, FileTooDeep
from kuro_fs.unixfs import MAX_FILE_DEPTH, _file_node, _get, _link_cid, leaf_size_error

__all__ = ["FETCH_RUN", "FILE_NODES", "FILE_NODES_MAX_BYTES", "FileNode", "Filler", "HasGet", "load_node"]

#: Leaves handed to the store per call: a read of many small leaves holds this many requests at a time.
FETCH_RUN: Final = 1024
#: The block bytes of decoded File nodes held process-wide (a 1,000,000-link root is one 46 MB block).
FILE_NODES_MAX_BYTES: Final = 64 << 20


class HasGet(Protocol):
    """A block source with ``get`` alone: what a file read needs (a store with ``has`` too may cache)."""

    def get(self, cid: str) -> bytes | None: ...


class _Store(HasGet, Protocol):
    def has(self, cid: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class FileNode:
    """A decoded, checked File node: its own ``data``, its children's binary CIDs joined in ``hashes``
    (child ``i`` is ``hashes[at[i]:at[i+1]]``), their ``sizes`` (file bytes) and ``stops`` (where each
    ends, counted from the node's first byte), and the ``total`` it covers."""

    data: bytes
    hashes: bytes
    at: array[int]
    sizes: array[int]
    stops: array[int]
    total: int

    def child(self, i: int) -> str:
        """The CID string of child ``i``."""
        return _link_cid(self.hashes[self.at[i] : self.at[i + 1]])


def _decode(cid: str) -> Callable[[bytes], FileNode]:
    def decode(block: bytes) -> FileNode:
        node, meta = _file_node(block, cid)
        own = meta.data or b""
        at = array("Q", [0])
        for link in node.links:
            at.append(at[-1] + len(link.hash))
        stops = array("Q")
        pos = len(own)
        for size in meta.blocksizes:
            pos += size
            stops.append(pos)
        hashes = b"".join(link.hash for link in node.links)
        return FileNode(own, hashes, at, array("Q", meta.blocksizes), stops, pos)

    return decode


#: The process-wide cache of decoded File nodes.
FILE_NODES: Final = DirCache(FILE_NODES_MAX_BYTES)


def load_node(store: HasGet, cid: str, cache: DirCache | None = FILE_NODES) -> FileNode:
    """The File node ``cid``, decoded and checked (from ``cache`` when the store also has ``has``).

    Raises MissingBlock, CorruptBlock, DagPbError (not a File node, or its sizes do not add up).
    """
    if not codec_is(cid, "dag-pb"):
        _file_node(b"", cid)  # words the error: not a raw leaf, not dag-pb
    has = getattr(store, "has", None)
    if cache is None or not callable(has):
        return _decode(cid)(_get(store.get, cid))
    return load_verified(cast("_Store", store), cid, cache, _decode(cid), FileNode)


class _Leaf(NamedTuple):
    cid: str
    size: int  # its length, as its parent says
    out: memoryview  # where the whole leaf goes


class Filler:
    """One read of file trees of ``store`` into buffers; see the module docstring. Use once, then drop."""

    __slots__ = ("_copies", "_leaves", "added", "cache", "fetched", "memo", "store")

    def __init__(self, store: HasGet, cache: DirCache | None = FILE_NODES) -> None:
        self.store = store
        self.cache = cache
        #: subtree CID → (a view of its whole bytes, its height, its size)
        self.memo: dict[str, tuple[memoryview, int, int]] = {}
        self._leaves: list[_Leaf] = []
        self._copies: list[tuple[memoryview, memoryview]] = []
        self.added: list[str] = []  # memo keys in the order they were added (a stream forgets old windows by it)
        self.fetched = 0  # leaf blocks asked of the store (for tests and benchmarks)

    def fill(self, cid: str, expect: int | None, lo: int, out: memoryview) -> None:
        """Fill ``out`` with bytes ``[lo, lo+len(out))`` of the tree ``cid``, which must cover them
        (the caller sized ``out`` from the root). ``expect`` is the size the caller was told.
        Raises MissingBlock, CorruptBlock, DagPbError, FileTooDeep."""
        if len(out):
            self._walk(cid, expect, lo, out, 0)
        self.flush()

    def flush(self) -> None:
        """Fetch the leaves waiting, then make the copies waiting on them, in order."""
        leaves, copies = self._leaves, self._copies
        self._leaves, self._copies = [], []
        if leaves:
            self._fetch(leaves)
        for src, dst in copies:
            dst[:] = src

    def _walk(self, cid: str, expect: int | None, lo: int, out: memoryview, depth: int) -> int:
        # Bytes [lo, lo+len(out)) of subtree ``cid`` (reached at ``depth``) into ``out``; returns its height.
        if depth > MAX_FILE_DEPTH:
            raise FileTooDeep(cid, MAX_FILE_DEPTH)
        hit = self.memo.get(cid)
        if hit is not None:
            view, height, size = hit
            if expect is not None and expect != size:
                if codec_is(cid, "raw"):
                    self.flush()  # the first fetch checks the length it was claimed at
                    raise leaf_size_error(cid, size, expect)
                raise DagPbError(f"file node {cid} covers {size} bytes, its parent says {expect}")
            if depth + height > MAX_FILE_DEPTH:
                raise FileTooDeep(cid, MAX_FILE_DEPTH)
            self._copy(view[lo : lo + len(out)], out)
            return height
        if codec_is(cid, "raw"):
            self._leaf(cid, expect, lo, out)
            return 0
        node = load_node(self.store, cid, self.cache)
        total = node.total
        if expect is not None and total != expect:
            raise DagPbError(f"file node {cid} covers {total} bytes, its parent says {expect}")
        n = len(out)
        hi = lo + n
        own = node.data
        if lo < len(own):
            piece = own[lo:hi]
            out[: len(piece)] = piece
        height = 0
        stops, sizes = node.stops, node.sizes
        i = bisect_right(stops, lo)  # the first child that ends past lo
        while i < len(sizes):
            stop = stops[i]
            size = sizes[i]
            start = stop - size
            if start >= hi:
                break
            a = max(lo, start)
            b = min(hi, stop)
            height = max(height, 1 + self._walk(node.child(i), size, a - start, out[a - lo : b - lo], depth + 1))
            i += 1
        if lo == 0 and n == total:
            self.memo[cid] = (out, height, total)
            self.added.append(cid)
        return height

    def _leaf(self, cid: str, expect: int | None, lo: int, out: memoryview) -> None:
        n = len(out)
        if expect is not None and lo == 0 and n == expect:
            if n:  # (an empty leaf is not read, as the walk never did)
                self._leaves.append(_Leaf(cid, n, out))
                self.memo[cid] = (out, 0, n)
                self.added.append(cid)
                if len(self._leaves) >= FETCH_RUN:
                    self.flush()
            return
        block = _get(self.store.get, cid)  # a part of it: fetched whole once, kept for the rest of the read
        self.fetched += 1
        if expect is not None and len(block) != expect:
            raise leaf_size_error(cid, len(block), expect)
        view = memoryview(block)
        self.memo[cid] = (view, 0, len(block))
        self.added.append(cid)
        self._copy(view[lo : lo + n], out)

    def _copy(self, src: memoryview, dst: memoryview) -> None:
        if len(src) != len(dst):
            raise DagPbError(f"a file tree holds {len(src)} bytes where {len(dst)} were expected")
        if not self._leaves:  # nothing waits to be fetched: every byte of the source is in place
            dst[:] = src
            return
        self._copies.append((src, dst))
        if len(self._copies) >= FETCH_RUN:
            self.flush()

    def _fetch(self, leaves: list[_Leaf]) -> None:
        self.fetched += len(leaves)
        many = getattr(self.store, "get_many_into", None)
        if callable(many):
            sizes: list[int] = many([(leaf.cid, leaf.out, 0) for leaf in leaves])
        else:
            sizes = []
            for leaf in leaves:
                block = _get(self.store.get, leaf.cid)
                piece = memoryview(block)[: len(leaf.out)]
                leaf.out[: len(piece)] = piece
                sizes.append(len(block))
        for leaf, size in zip(leaves, sizes, strict=True):
            if size != leaf.size:
                raise leaf_size_error(leaf.cid, size, leaf.size)
