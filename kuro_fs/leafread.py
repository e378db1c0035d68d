"""A stored file read in pieces: its raw leaves fetched whole, verified once, kept for the next piece.

## The one decision
A program reads a file in pieces smaller than a leaf (a C ``read()`` of 64 KiB, leaves of 256 KiB),
and a verifying store (:class:`~kuro_fs.filestore.FileBlockStore`) reads and hashes a **whole** block
for any piece of it. So a :class:`LeafReader` fetches each leaf whole and keeps the leaves a read
took only part of (at most its first and last) in a **window** that the next pieces are copied
from: reading a file in order fetches and verifies each leaf once, not once per read. A leaf that a
read covers whole goes straight into the caller's buffer, verified there (``get_many_into``), with
no copy through the window. The hash is then the cost: SHA-256 of every byte once, which bounds a
verified read at roughly one core's hashing speed.

Not fetched ahead: on this project's 2-core machines, fetching the next leaves in parallel threads
(so that two cores hash) measured slower than this, whatever the read size, whenever the machine
had other work (``tools/bench_wasi.py``, docs/wasi.md *Speed*).

The leaf list is decoded once (:func:`~kuro_fs.unixfs.iter_leaves`, up to :data:`MAX_LEAF_TABLE`
leaves), instead of walking the tree's nodes on every read as :func:`~kuro_fs.unixfs.iter_file`
does (a 64 KiB read of a 64 MiB file costs ~6 ms that way, ~30 µs this way); a file whose bytes
are not all in raw leaves, or that has more, has no :class:`LeafReader` (:meth:`LeafReader.of`
says None) and is read through the tree.

## Pure
Blocks come in through the injected store only. Raises MissingBlock, DagPbError (a leaf whose
length is not the one its parent says), CorruptBlock (from the store).

## Not done here
Pending writes, folded leaves and holes (:mod:`kuro_fs.extents`); no limit on a read's size (the
caller's buffer is the read).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Final

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import codec_is
from kuro_fs.errors import DagPbError, MissingBlock
from kuro_fs.filefill import load_node
from kuro_fs.unixfs import iter_leaves

__all__ = ["MAX_LEAF_TABLE", "MAX_WINDOW_BUFFER", "LeafReader"]

#: Files of at most this many leaves (16 GiB at 256 KiB chunks) keep their leaf list once read.
MAX_LEAF_TABLE: Final = 65536
#: A leaf kept in the window is read into a reused buffer of the length its parent claims only up to
#: this length; a longer claim (a File node may say its 3-byte leaf holds a terabyte) is fetched with
#: ``get``, so the memory is the block's real length and the claim is refused before anything else.
MAX_WINDOW_BUFFER: Final = 4 << 20


class _Kept:
    # ``store`` seen through ``get``/``has``, keeping what ``get`` fetched for one more ask (``once``): the
    # root block a cold decode fetched is not fetched (and verified) again by the leaf walk.
    __slots__ = ("blocks", "has", "store")

    def __init__(self, store: BlockStore) -> None:
        self.store = store
        self.has = store.has
        self.blocks: dict[str, bytes] = {}

    def get(self, cid: str) -> bytes | None:
        block = self.store.get(cid)
        if block is not None:
            self.blocks[cid] = block
        return block

    def once(self, cid: str) -> bytes | None:
        block = self.blocks.pop(cid, None)
        return block if block is not None else self.store.get(cid)


class LeafReader:
    """Bytes of one stored file, all of whose bytes are in the raw leaves ``cids`` starting at ``starts``."""

    __slots__ = ("_cids", "_sizes", "_starts", "_window", "size", "store")

    def __init__(self, store: BlockStore, starts: list[int], cids: list[str], size: int) -> None:
        self.store = store
        self.size = size
        self._starts = starts
        self._cids = cids
        self._sizes = [b - a for a, b in zip(starts, [*starts[1:], size], strict=True)]
        self._window: dict[int, bytes | bytearray] = {}  # leaf index → the whole verified leaf

    @property
    def held(self) -> int:
        """Bytes of leaves kept for the next read (at most the first and last leaf of the last read)."""
        return sum(len(block) for block in self._window.values())

    @classmethod
    def of(cls, store: BlockStore, cid: str, size: int) -> LeafReader | None:
        """A reader of file ``cid`` of ``size`` bytes, or None if its bytes are not all in at most
        :data:`MAX_LEAF_TABLE` raw leaves. Reads the file's dag-pb nodes, no leaf (but a one-leaf file's).
        Raises MissingBlock, DagPbError."""
        get = store.get
        if codec_is(cid, "dag-pb"):  # a root of more links than the table holds: known from its cached decoding
            kept = _Kept(store)
            if len(load_node(kept, cid).sizes) > MAX_LEAF_TABLE:
                return None
            get = kept.once
        starts: list[int] = []
        cids: list[str] = []
        end = 0
        for offset, leaf, length in iter_leaves(get, cid):
            if offset != end or len(starts) == MAX_LEAF_TABLE:
                return None  # bytes inside dag-pb nodes, or too many leaves: read through the tree
            starts.append(offset)
            cids.append(leaf)
            end = offset + length
        return cls(store, starts, cids, end) if end == size and starts else None

    def read_into(self, start: int, out: memoryview) -> None:
        """Fill ``out`` (a writable byte view) with bytes ``[start, start+len(out))``; the range must lie
        within :attr:`size`. Raises MissingBlock, DagPbError, CorruptBlock (``out`` may then hold part)."""
        end = start + len(out)
        if start < 0 or end > self.size:
            raise ValueError(f"bytes [{start}, {end}) are not within the file's {self.size}")
        starts = self._starts
        i = bisect_right(starts, start) - 1
        pos = start
        filled: set[int] = set()
        while pos < end:
            leaf_start = starts[i]
            stop = min(end, leaf_start + self._sizes[i])
            if i not in self._window and i not in filled:
                filled = self._fetch(i, start, out)
            if i not in filled:
                out[pos - start : stop - start] = memoryview(self._window[i])[pos - leaf_start : stop - leaf_start]
            pos = stop
            i += 1

    def _fetch(self, first: int, start: int, out: memoryview) -> set[int]:
        # Fetch leaf ``first`` and every later one the read [start, start+len(out)) needs, in one call: a
        # leaf inside it whole into ``out``, a leaf it takes part of into the new window. Returns the
        # leaves that went into ``out``.
        end = start + len(out)
        last = bisect_right(self._starts, max(end - 1, self._starts[first])) - 1
        many = getattr(self.store, "get_many_into", None)
        spare = [buf for buf in self._window.values() if isinstance(buf, bytearray)]
        self._window = {}  # (its buffers are reused: a failed fetch must leave no half-written leaf behind)
        direct: dict[int, memoryview] = {}
        window: dict[int, bytes | bytearray] = {}
        for k in range(first, last + 1):
            a, n = self._starts[k], self._sizes[k]
            if a >= start and a + n <= end:
                direct[k] = out[a - start : a + n - start]
            elif not callable(many) or n > MAX_WINDOW_BUFFER:
                window[k] = b""  # fetched with get: its real length, never a buffer of the length claimed
            else:
                reuse = next((j for j, buf in enumerate(spare) if len(buf) == n), None)
                window[k] = spare.pop(reuse) if reuse is not None else bytearray(n)
        if callable(many):
            buffers = ((k, memoryview(buf)) for k, buf in window.items() if isinstance(buf, bytearray))
            targets = [*direct.items(), *buffers]
            got = many([(self._cids[k], view, 0) for k, view in targets])
            for (k, _), size in zip(targets, got, strict=True):
                self._check(k, size)
        else:
            for k, view in direct.items():
                view[:] = self._get(k)
        for k, buf in window.items():
            if not isinstance(buf, bytearray):
                window[k] = self._get(k)
        self._window = window
        return set(direct)

    def _get(self, k: int) -> bytes:
        block = self.store.get(self._cids[k])
        if block is None:
            raise MissingBlock(self._cids[k])
        self._check(k, len(block))
        return block

    def _check(self, k: int, size: int) -> None:
        if size != self._sizes[k]:
            raise DagPbError(f"raw leaf {self._cids[k]} is {size} bytes, its parent says {self._sizes[k]}")
