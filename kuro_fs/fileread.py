"""Reading a UnixFS file, or a range of it, into one buffer filled in place — or as a stream of windows.

## The one decision
A read takes its size from the file's root block, allocates the output once at
that size, then fills it with :class:`kuro_fs.filefill.Filler`: the tree walked
lazily — every node's sizes checked —, each raw leaf read straight into its slot
of that one buffer, :data:`FETCH_RUN` leaves per store call, and every subtree
met again (a hole's zero leaf, a "diamond" DAG's one child linked 174 times per
level) copied from where this read already wrote it, so the cost is the distinct
blocks plus the bytes, not the links. (Planning every leaf before reading any held
a tuple and a view per leaf: 2.6 GB to read a 5.3 MB file of one-byte leaves.)
The buffer is allocated once at its final size (:func:`kuro_fs.fillbytes.fill_bytes`
for ``bytes``; the caller's own for :func:`read_into`), so a whole-file read
holds the file once: joining the pieces held it twice (a 1 GiB file peaked at
2.1 GB). A store with ``get_many_into``
(:meth:`kuro_fs.filestore.FileBlockStore.get_many_into`) reads and verifies each
leaf in its slot, on several threads; any other store is asked with ``get``.

:func:`stream_file` (``kuro fs cat``, a guest's read, :func:`~kuro_fs.unixfs.iter_file`)
is the same fill, window by window (:data:`STREAM_WINDOW` bytes, aligned to the
file): one :class:`~kuro_fs.filefill.Filler` serves every window, and what it wrote
into the last :data:`STREAM_KEEP` bytes of windows stays copyable, so a subtree
repeated within that reach is walked once. A repeated subtree larger than a window
is walked again at each occurrence, but its own repeated parts are copies: the
cost of a stream is then bounded by its bytes over the window times a node's
links, not by the links below.

The checks are the walk's (sizes that add up, the depth cap, a raw leaf's length
against its parent's ``blocksizes``), as :func:`~kuro_fs.unixfs.walk_file` makes them.

## Pure
Blocks come in through the injected store; no I/O of its own.

## Not done here
No budget on the size a tree claims: a File node that claims more bytes than it
holds is refused when a leaf disagrees, after the output was allocated.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Final

from kuro_fs.cid import codec_is, parse
from kuro_fs.errors import DagPbError
from kuro_fs.filefill import FETCH_RUN, Filler, HasGet, load_node
from kuro_fs.fillbytes import fill_bytes
from kuro_fs.unixfs import _get, _is_count, leaf_size_error

__all__ = [
    "FETCH_RUN",
    "STREAM_KEEP",
    "STREAM_WINDOW",
    "read_bytes",
    "read_file",
    "read_into",
    "read_range",
    "stream_file",
]

#: A stream fills windows of this many bytes (aligned to multiples of it in the file).
STREAM_WINDOW: Final = 4 << 20
#: A stream keeps what it wrote into its last windows up to this many bytes, to copy repeats from.
STREAM_KEEP: Final = 16 << 20


def _size(store: HasGet, cid: str, expect: int | None, lo: int, hi: int | None) -> int:
    # How many bytes [lo, hi) of the File-node tree ``cid`` holds, from its root block alone (the walk
    # then checks every node below against it); ``expect`` is the size the caller was told.
    total = load_node(store, cid).total
    if expect is not None and total != expect:
        raise DagPbError(f"file node {cid} covers {total} bytes, its parent says {expect}")
    end = total if hi is None else min(hi, total)
    return max(end - lo, 0)


def _check_range(offset: object, length: object) -> None:
    if not _is_count(offset) or not (length is None or _is_count(length)):
        raise ValueError(f"offset and length must be non-negative ints, got {offset!r} and {length!r}")


def _raw(store: HasGet, cid: str, size: int | None) -> bytes:
    block = _get(store.get, cid)
    if size is not None and len(block) != size:
        raise leaf_size_error(cid, len(block), size)
    return block


def _fill(store: HasGet, cid: str, size: int | None, offset: int, out: memoryview) -> int:
    Filler(store).fill(cid, size, offset, out)
    return len(out)


def read_bytes(
    store: HasGet, cid: str, offset: int = 0, length: int | None = None, *, size: int | None = None
) -> bytes:
    """Bytes ``[offset, offset+length)`` of file ``cid`` (to the end if ``length`` is None) as one new ``bytes``.

    The output is allocated once, at its final size, and filled in place
    (:func:`kuro_fs.fillbytes.fill_bytes`): the peak is the output plus one block,
    never the output twice. ``size`` is as for :func:`iter_file`.
    Raises MissingBlock, DagPbError, CorruptBlock, InvalidCID, ValueError: as :func:`iter_file`.
    """
    parse(cid)
    _check_range(offset, length)
    hi = None if length is None else offset + length
    if length == 0:
        return b""  # an empty range reads no block (so it checks nothing, as iter_file)
    if codec_is(cid, "raw"):  # a one-block file: the block is the answer
        block = _raw(store, cid, size)
        return block if offset == 0 and (hi is None or hi >= len(block)) else bytes(block[offset:hi])
    n = _size(store, cid, size, offset, hi)
    return fill_bytes(n, lambda out: _fill(store, cid, size, offset, out))


def read_into(store: HasGet, cid: str, out: memoryview | bytearray, offset: int = 0, *, size: int | None = None) -> int:
    """Fill ``out`` with the bytes of file ``cid`` from ``offset`` on; return how many (short at the end).

    ``out`` is any writable buffer; nothing else is allocated for the file's bytes.
    Raises MissingBlock, DagPbError, CorruptBlock, InvalidCID, ValueError: as :func:`iter_file`
    (``out`` may then hold part of the range).
    """
    parse(cid)
    _check_range(offset, 0)
    view = memoryview(out).cast("B")
    if view.readonly:
        raise ValueError("read_into needs a writable buffer")
    if not len(view):
        return 0
    if codec_is(cid, "raw"):
        piece = memoryview(_raw(store, cid, size))[offset : offset + len(view)]
        view[: len(piece)] = piece
        return len(piece)
    total = _size(store, cid, size, offset, offset + len(view))
    return _fill(store, cid, size, offset, view[:total])


def stream_file(
    store: HasGet, cid: str, offset: int = 0, length: int | None = None, *, size: int | None = None
) -> Iterator[bytes | memoryview]:
    """Bytes ``[offset, offset+length)`` of file ``cid`` (to the end if ``length`` is None), lazily, in
    windows of at most :data:`STREAM_WINDOW` bytes (read-only views; nothing is read until iterated).

    Raises (while iterated) MissingBlock, DagPbError, CorruptBlock, FileTooDeep; InvalidCID and
    ValueError at once, as :func:`read_bytes`.
    """
    parse(cid)
    _check_range(offset, length)
    return _windows(store, cid, offset, length, size)


def _windows(
    store: HasGet, cid: str, offset: int, length: int | None, size: int | None
) -> Iterator[bytes | memoryview]:
    hi = None if length is None else offset + length
    if length == 0:
        return
    if codec_is(cid, "raw"):
        block = _raw(store, cid, size)
        if offset < len(block):
            yield block if offset == 0 and (hi is None or hi >= len(block)) else memoryview(block)[offset:hi]
        return
    end = offset + _size(store, cid, size, offset, hi)
    filler = Filler(store)
    kept: deque[tuple[int, list[str]]] = deque()  # the windows whose bytes may still be copied, oldest first
    held = 0
    pos = offset
    while pos < end:
        stop = min(end, (pos // STREAM_WINDOW + 1) * STREAM_WINDOW)
        buf = bytearray(stop - pos)
        view = memoryview(buf)
        filler.fill(cid, size, pos, view)
        kept.append((len(buf), filler.added))
        held += len(buf)
        filler.added = []
        while held > STREAM_KEEP:
            gone, keys = kept.popleft()
            held -= gone
            for key in keys:
                filler.memo.pop(key, None)
        yield view.toreadonly()
        pos = stop


def read_file(store: HasGet, cid: str) -> bytes:
    """The whole content of the UnixFS file ``cid`` in ``store`` (see :func:`read_bytes`).

    Raises MissingBlock, DagPbError (malformed tree), CorruptBlock (from the store), InvalidCID.
    """
    return read_bytes(store, cid)


def read_range(store: HasGet, cid: str, offset: int, length: int) -> bytes:
    """Bytes ``[offset, offset+length)`` of the file ``cid``, fetching only the blocks that overlap.

    Raises ValueError: an offset or length that is not a non-negative int; otherwise as :func:`read_file`.
    """
    parse(cid)
    if not _is_count(length):  # read_bytes reads None as "to the end"; a range has a length
        raise ValueError(f"length must be a non-negative int, got {length!r}")
    return read_bytes(store, cid, offset, length)
