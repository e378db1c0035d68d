"""A file being changed in place: a stored UnixFS file under sparse pending writes (extents).

## The one decision
Writes never copy the file. A :class:`SparseFile` is three layers, read top down:

1. **extents** — the bytes written since the last commit, as sorted, non-overlapping, non-touching
   runs (a write that touches or overlaps runs merges them, so a loop of 1-byte appends is one
   growing ``bytearray``, amortised O(1) per write);
2. **leaves** — chunk-aligned runs already folded into raw leaf blocks (``store.put``): a run that
   covers a whole chunk (``chunk_size`` bytes at a multiple of ``chunk_size``) is folded as soon as
   it does, so a sequential writer holds at most about one chunk in memory whatever the file's size;
3. **the base** — the stored file, read through a :class:`~kuro_fs.leafread.LeafReader` (its leaf
   list decoded once; each leaf fetched and verified once by a run of small reads, fetched ahead when
   they run in order); bytes past ``base_valid`` (the smallest size the file was cut to) and holes
   past the end read as zeros.

A read fills the caller's buffer in place (:meth:`SparseFile.read_into`: a WASI ``fd_read`` fills
guest memory with no bytes object between); :meth:`SparseFile.read` is the same into one new ``bytes``.

:meth:`SparseFile.build` then makes the new file DAG with :class:`~kuro_fs.unixfs.BalancedLayout`,
reusing every block it can — over untouched chunks of the base, the base's largest node that is
exactly the layout's there, whole (:class:`~kuro_fs.basetree.BaseTree`); else the base's raw leaf at
the same aligned offset and length, a folded leaf, the one all-zero leaf of each length for holes —
and storing only the chunks that changed and the nodes above them. The CID is therefore exactly the
one :meth:`~kuro_fs.fs.Fs.write` gives the same bytes (same chunking and width), but building it
costs the changes and the tree's depth, not the file.

## Pure
Blocks go through the injected store only. Raises MissingBlock / CorruptBlock / DagPbError from a
store or a malformed base; callers (:mod:`kuro_fs.overlay`) turn those into ``IO`` values.

## Not done here
No paths, handles or errno (the overlay's job). Memory: pending extent bytes are counted in
:attr:`SparseFile.pending_bytes`, and what they cost the host in :attr:`SparseFile.held_bytes`:
each run also costs :data:`RUN_COST` (~105) bytes of bookkeeping, so scattered one-byte writes cost
106 bytes each. :meth:`SparseFile.fold` folds chunks until a budget of held bytes is met; the
partial last chunk of a file, when it is one run (< ``chunk_size`` bytes), only when asked to.
A hole past the base costs nothing, built or not: its whole chunks are one all-zero leaf repeated
(:meth:`BalancedLayout.add_leaves`, a few blocks per hole whatever its length), so a 1 TiB file
that is all hole builds in milliseconds, and so does a byte written into it once it is stored.
A base in another layout (another chunk size or width, a trickle DAG) has no node to keep whole:
its part of the file is walked chunk by chunk.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Final

from kuro_fs.basetree import BaseTree
from kuro_fs.blocks import BlockStore
from kuro_fs.errors import DagPbError
from kuro_fs.fileread import read_into
from kuro_fs.fillbytes import fill_bytes
from kuro_fs.leafread import MAX_LEAF_TABLE, LeafReader
from kuro_fs.unixfs import BalancedLayout, FileRoot, iter_file

__all__ = ["MAX_LEAF_TABLE", "RUN_COST", "SparseFile"]

#: The bytes a pending run costs besides its own: its start (an int and a list slot) and its ``bytearray``
#: (header and a list slot) — measured with tracemalloc, 106 bytes per one-byte run (tests/fs/test_extents.py).
RUN_COST: Final = 105


def _put(out: memoryview, pieces: Iterator[bytes | memoryview]) -> None:
    # Fill ``out`` with the pieces a tree read yields; a tree that yields another length is malformed.
    data = b"".join(pieces)
    if len(data) != len(out):
        raise DagPbError(f"a file tree gave {len(data)} bytes where {len(out)} were expected")
    out[:] = data


class SparseFile:
    """The bytes of one file: ``base`` (a stored UnixFS file, or None) under pending writes.

    ``size`` is the current length. Offsets and lengths are non-negative ints (the caller checks).
    """

    __slots__ = (
        "_based",
        "_bufs",
        "_known",
        "_leaves",
        "_reader",
        "_starts",
        "base_cid",
        "base_size",
        "base_valid",
        "chunk_size",
        "pending_bytes",
        "size",
        "store",
        "width",
    )

    def __init__(self, store: BlockStore, base_cid: str | None, base_size: int, chunk_size: int, width: int) -> None:
        self.store = store
        self.chunk_size = chunk_size
        self.width = width
        self.base_cid = base_cid
        self.base_size = base_size if base_cid is not None else 0
        self.base_valid = self.base_size
        self.size = self.base_size
        self.pending_bytes = 0
        self._starts: list[int] = []
        self._bufs: list[bytearray] = []
        self._leaves: dict[int, str] = {}
        #: the folded leaves that hold bytes of the base: a read of one reads the base (``kuro/reads`` names it)
        self._based: set[int] = set()
        self._known: dict[tuple[str, int], FileRoot | None] = {}  # BaseTree's checked nodes, build to build
        self._reader: LeafReader | bool | None = None  # False: the base has none (read through its tree)

    @property
    def held_bytes(self) -> int:
        """What the pending runs cost the host: :attr:`pending_bytes` plus :data:`RUN_COST` per run."""
        return self.pending_bytes + RUN_COST * len(self._starts)

    @property
    def dirty(self) -> bool:
        """True if the bytes differ from the base (or there is no base: a new file)."""
        return (
            self.base_cid is None
            or bool(self._starts)
            or bool(self._leaves)
            or self.size != self.base_size
            or self.base_valid != self.base_size
        )

    # ---- reading

    def read(self, offset: int, length: int) -> tuple[bytes, bool]:
        """Bytes ``[offset, offset+length)`` clipped to the size, and whether any came from the base."""
        n = max(0, min(offset + length, self.size) - offset)
        used = False

        def fill(view: memoryview) -> int:
            nonlocal used
            done, used = self.read_into(offset, view)
            return done

        return (fill_bytes(n, fill), used) if n else (b"", False)

    def read_into(self, offset: int, out: memoryview) -> tuple[int, bool]:
        """Fill ``out`` (a writable byte view) with bytes ``[offset, offset+len(out))`` clipped to the size:
        how many it filled, and whether any came from the base."""
        end = min(offset + len(out), self.size)
        if offset >= end:
            return 0, False
        out = out[: end - offset]
        if not self._starts and not self._leaves:
            return end - offset, self._under(offset, out)
        used = False
        pos = offset
        i = max(bisect_right(self._starts, offset) - 1, 0)
        starts, bufs = self._starts, self._bufs
        last: dict[int, bytes] = {}  # the folded leaf the gaps last read, by chunk: fetched once, not per gap
        while pos < end:
            if i < len(starts) and starts[i] + len(bufs[i]) <= pos:
                i += 1
                continue
            if i < len(starts) and starts[i] <= pos:
                stop = min(end, starts[i] + len(bufs[i]))
                out[pos - offset : stop - offset] = memoryview(bufs[i])[pos - starts[i] : stop - starts[i]]
                pos = stop
                i += 1
                continue
            stop = min(end, starts[i]) if i < len(starts) else end
            used = self._under(pos, out[pos - offset : stop - offset], last) or used
            pos = stop
        return end - offset, used

    def _under(self, start: int, out: memoryview, last: dict[int, bytes] | None = None) -> bool:
        # Fill ``out`` with bytes [start, start+len(out)) below the extents: folded leaves, the base, zeros.
        # ``last`` keeps the folded leaf read last, whole, for the next gap of the same read: the gaps between
        # thousands of scattered runs over one leaf fetched (and hashed) that leaf once each, 256 KiB a gap.
        if not self._leaves:
            return self._base(start, out)
        size = self.chunk_size
        end = start + len(out)
        used = False
        pos = start
        while pos < end:
            k = pos // size
            stop = min(end, (k + 1) * size)
            leaf = self._leaves.get(k)
            if leaf is not None:
                if last is None:
                    _put(out[pos - start : stop - start], iter_file(self.store.get, leaf, pos - k * size, stop - pos))
                else:
                    if k not in last:
                        last.clear()
                        last[k] = b"".join(iter_file(self.store.get, leaf, 0, size))
                    _put(out[pos - start : stop - start], iter((last[k][pos - k * size : stop - k * size],)))
                used = used or k in self._based
            else:
                while stop < end and (stop // size) not in self._leaves:  # a run of unfolded chunks: one read
                    stop = min(end, stop + size)
                used = self._base(pos, out[pos - start : stop - start]) or used
            pos = stop
        return used

    def _base(self, start: int, out: memoryview) -> bool:
        # Fill ``out`` with bytes [start, start+len(out)) of the base where it is still valid, zeros after.
        end = start + len(out)
        valid = min(end, self.base_valid)
        if self.base_cid is None or start >= valid:
            out[:] = bytes(len(out))
            return False
        reader = self._leaf_reader()
        if reader is None:  # (a repeated subtree is copied, its nodes decoded once: kuro_fs.filefill)
            if read_into(self.store, self.base_cid, out[: valid - start], start, size=self.base_size) != valid - start:
                raise DagPbError(f"file {self.base_cid} holds fewer bytes than its root block says")
        else:
            reader.read_into(start, out[: valid - start])
        if valid < end:
            out[valid - start :] = bytes(end - valid)
        return True

    def _leaf_reader(self) -> LeafReader | None:
        # The base's reader, made once; None if its bytes are not all in raw leaves (read through the tree).
        if self._reader is None and self.base_cid is not None:
            self._reader = LeafReader.of(self.store, self.base_cid, self.base_size) or False
        return self._reader if isinstance(self._reader, LeafReader) else None

    # ---- writing

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``offset`` (a hole between the old end and ``offset`` reads as zeros)."""
        if not len(data):
            return
        j = self._insert(offset, data)
        self.size = max(self.size, offset + len(data))
        self._fold_whole_chunks(j)

    def set_size(self, size: int) -> None:
        """Cut the file to ``size`` bytes, or grow it with zeros."""
        if size < self.size:
            chunk = self.chunk_size
            self._cut(size, self.size)
            for k in [k for k in self._leaves if (k + 1) * chunk > size]:
                leaf = self._leaves.pop(k)
                based = k in self._based
                self._based.discard(k)
                if k * chunk < size:  # the chunk the new end falls in: keep its prefix
                    keep = b"".join(iter_file(self.store.get, leaf, 0, size - k * chunk, size=chunk))
                    if based:  # bytes of the base: a leaf still (zeros past the end), so reading them names the base
                        self._leaves[k] = self.store.put(keep + bytes(chunk - len(keep)), "raw")
                        self._based.add(k)
                    else:  # as a run
                        self._insert_under(k * chunk, keep)
            self.base_valid = min(self.base_valid, size)
        self.size = size

    def fold(self, budget: int, *, last: bool = False) -> None:
        """Fold chunks holding pending runs into leaf blocks until :attr:`held_bytes` ≤ ``budget``.

        Whole chunks first. The partial last chunk is folded (into a leaf padded with zeros past the
        end, as :meth:`set_size` keeps one) when ``last`` is true or it holds more than one run: one
        run there costs its bytes, less than a chunk, so by default it stays pending and an appender
        is not re-stored at every fold; scattered runs there cost :data:`RUN_COST` each, up to ~53
        times the chunk.
        """
        size = self.chunk_size
        whole = self.size // size
        while self.held_bytes > budget and self._starts:
            k = next((s // size for s in self._starts if s // size < whole), None)
            if k is None:
                if not last and len(self._starts) < 2:
                    return
                k = whole  # every run left is in the partial last chunk
            data, used = self.read(k * size, size)
            self._cut(k * size, (k + 1) * size)
            self._leaves[k] = self.store.put(data if len(data) == size else data + bytes(size - len(data)), "raw")
            if used:  # (a read of a based leaf says it is used too)
                self._based.add(k)
            else:
                self._based.discard(k)

    # ---- building

    def build(self) -> FileRoot:
        """Store the file's DAG (reusing every unchanged leaf and subtree) and return its root. Nothing is reset."""
        chunk = self.chunk_size
        base = self._base_tree()
        zeros: dict[int, str] = {}
        layout = BalancedLayout(self.store.put, self.width)
        starts, bufs = self._starts, self._bufs
        folded = sorted(self._leaves)
        whole = self.size // chunk
        i = 0
        k = 0
        count = max(1, -(-self.size // chunk))
        while k < count:
            a, b = k * chunk, min(self.size, (k + 1) * chunk)
            while i < len(starts) and starts[i] + len(bufs[i]) <= a:
                i += 1
            touched = i < len(starts) and starts[i] < b
            cid = None
            if not touched:
                leaf = self._leaves.get(k)
                if leaf is not None and b - a == chunk:
                    cid = leaf
                elif leaf is None and b <= self.base_valid and base is not None:
                    if b - a == chunk:  # untouched whole chunks of the base: its largest layout node there, whole
                        at = bisect_right(folded, k)
                        end = min(whole, self.base_valid // chunk, starts[i] // chunk if i < len(starts) else whole)
                        found = base.subtree(k, min(end, folded[at]) if at < len(folded) else end)
                        if found is not None:
                            level, node = found
                            layout.add_node(node.cid, node.size, node.tsize, level)
                            k += self.width**level
                            continue
                    cid = base.leaf(a, b - a)
                elif leaf is None and a >= self.base_valid:
                    cid = zeros.get(b - a)
                    if cid is None:
                        cid = zeros[b - a] = self.store.put(bytes(b - a), "raw")
                    if b - a == chunk:  # a hole: every whole chunk up to the next run or folded leaf, at once
                        at = bisect_right(folded, k)
                        end = min(whole, starts[i] // chunk if i < len(starts) else whole)
                        end = min(end, folded[at] if at < len(folded) else whole)
                        layout.add_leaves(cid, chunk, end - k)
                        k = end
                        continue
            if cid is None:
                data, _ = self.read(a, b - a)
                cid = self.store.put(data, "raw")
            layout.add_leaf(cid, b - a)
            k += 1
        return layout.finish()

    def rebase(self, root: FileRoot) -> None:
        """Make ``root`` (what :meth:`build` returned) the base and drop everything pending."""
        self.base_cid, self.base_size = root.cid, root.size
        self.base_valid = self.size = root.size
        self._starts, self._bufs, self._leaves = [], [], {}
        self._based = set()
        self._reader = None
        self.pending_bytes = 0

    def _base_tree(self) -> BaseTree | None:
        # The base, looked up by position (its checked nodes remembered from build to build), or None.
        if self.base_cid is None or self.base_valid == 0:
            return None
        return BaseTree(self.store.get, self.base_cid, self.base_size, self.chunk_size, self.width, self._known)

    # ---- runs

    def runs(self) -> Iterator[tuple[int, int]]:
        """``(start, length)`` of every pending run, in order (for tests and accounting)."""
        for start, buf in zip(self._starts, self._bufs, strict=True):
            yield start, len(buf)

    def _insert(self, s: int, data: bytes | bytearray | memoryview) -> int:
        # Merge [s, s+len) into the runs; return the index of the run now holding it.
        e = s + len(data)
        starts, bufs = self._starts, self._bufs
        j = bisect_right(starts, s) - 1
        if j < 0 or starts[j] + len(bufs[j]) < s:
            j += 1
        k = bisect_right(starts, e) - 1
        if k < j:
            starts.insert(j, s)
            bufs.insert(j, bytearray(data))
            self.pending_bytes += len(data)
            return j
        if j == k and starts[j] <= s:
            buf = bufs[j]
            before = len(buf)
            rel = s - starts[j]
            buf[rel : rel + len(data)] = data
            self.pending_bytes += len(buf) - before
            return j
        merged = bytearray(bufs[j][: max(0, s - starts[j])])
        merged += data
        last_end = starts[k] + len(bufs[k])
        if last_end > e:
            merged += bufs[k][e - starts[k] :]
        self.pending_bytes += len(merged) - sum(len(b) for b in bufs[j : k + 1])
        starts[j : k + 1] = [min(starts[j], s)]
        bufs[j : k + 1] = [merged]
        return j

    def _insert_under(self, s: int, data: bytes) -> None:
        # Put ``data`` at ``s`` only where no run is: it lies *below* the pending writes.
        pos = s
        end = s + len(data)
        gaps: list[tuple[int, int]] = []
        for start, length in list(self.runs()):
            if start + length <= pos or start >= end:
                continue
            if start > pos:
                gaps.append((pos, start))
            pos = max(pos, start + length)
        if pos < end:
            gaps.append((pos, end))
        for a, b in gaps:
            self._insert(a, data[a - s : b - s])

    def _cut(self, a: int, b: int) -> None:
        # Remove the pending bytes in [a, b), splitting runs that straddle either end. Only the runs that may meet
        # [a, b) are visited (the last starting at or before a, up to the first starting at b): a fold cuts chunk
        # after chunk, and visiting every run each time made folding R scattered runs cost R**2.
        starts, bufs = self._starts, self._bufs
        i = max(bisect_right(starts, a) - 1, 0)
        j = bisect_left(starts, b, i)
        new_starts: list[int] = []
        new_bufs: list[bytearray] = []
        removed = 0
        for start, buf in zip(starts[i:j], bufs[i:j], strict=True):
            end = start + len(buf)
            if end <= a:
                new_starts.append(start)
                new_bufs.append(buf)
                continue
            removed += len(buf)
            if start < a:
                new_starts.append(start)
                new_bufs.append(buf[: a - start])
                removed -= a - start
            if end > b:
                new_starts.append(b)
                new_bufs.append(buf[b - start :])
                removed -= end - b
        starts[i:j] = new_starts
        bufs[i:j] = new_bufs
        self.pending_bytes -= removed

    def _fold_whole_chunks(self, j: int) -> None:
        # Fold every whole chunk run j covers into a leaf block, keeping the run's ragged ends.
        size = self.chunk_size
        start, buf = self._starts[j], self._bufs[j]
        first, last = -(-start // size), (start + len(buf)) // size
        if first >= last:
            return
        view = memoryview(buf)
        for k in range(first, last):
            self._leaves[k] = self.store.put(bytes(view[k * size - start : (k + 1) * size - start]), "raw")
            self._based.discard(k)
        head, tail = buf[: first * size - start], buf[last * size - start :]
        view.release()
        pieces = [(start, head), (last * size, tail)]
        kept = [(s, b) for s, b in pieces if b]
        self._starts[j : j + 1] = [s for s, _ in kept]
        self._bufs[j : j + 1] = [b for _, b in kept]
        self.pending_bytes -= (last - first) * size
