"""Reading a UnixFS file, or a range of it, into one buffer filled in place.

## The one decision
A read takes its size from the file's root block, allocates the output once at
that size, then walks the file's dag-pb File nodes lazily — checking that every
node's sizes add up — and reads each raw leaf straight into its slot of that one
buffer, :data:`FETCH_RUN` leaves per store call. (Planning every leaf before
reading any held a tuple and a view per leaf: 2.6 GB to read a 5.3 MB file of
one-byte leaves, which a diamond DAG of four blocks is.) The buffer is allocated
once at its final size (:func:`kuro_fs.fillbytes.fill_bytes` for ``bytes``; the caller's own
for :func:`read_into`), so a whole-file read holds the file once: joining the
pieces, as :func:`~kuro_fs.unixfs.iter_file` callers did, held it twice (a 1 GiB
file peaked at 2.1 GB). A store with ``get_many_into``
(:meth:`kuro_fs.filestore.FileBlockStore.get_many_into`) reads and verifies each
leaf in its slot, on several threads; any other store is asked with ``get`` and
the leaf copied.

The walk and its checks are :mod:`kuro_fs.unixfs`'s (:func:`~kuro_fs.unixfs.walk_file`,
which :func:`~kuro_fs.unixfs.iter_file` uses too: sizes that add up, the depth cap,
a raw leaf's length against its parent's ``blocksizes``), so a tree that
``iter_file`` refuses is refused here with the same error.

## Pure
Blocks come in through the injected store; no I/O of its own.

## Not done here
No budget on the size a tree claims: a File node that claims more bytes than it
holds is refused when a leaf disagrees, after the output was allocated.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from kuro_fs.cid import codec_is, parse
from kuro_fs.errors import DagPbError
from kuro_fs.fillbytes import fill_bytes
from kuro_fs.unixfs import Get, _get, _is_count, file_root_info, leaf_size_error, walk_file

__all__ = ["FETCH_RUN", "read_bytes", "read_file", "read_into", "read_range"]


class _HasGet(Protocol):
    def get(self, cid: str) -> bytes | None: ...


class _Leaf(NamedTuple):
    cid: str  # a raw leaf
    size: int  # its size, as its parent says
    lo: int  # first wanted byte, within the leaf
    at: int  # where that byte lands in the output
    n: int  # bytes wanted


#: Leaves handed to the store per call: a read of many small leaves holds this many requests at a time.
FETCH_RUN: Final = 1024


def _root_once(get: Get, cid: str) -> Get:
    # ``get``, with the root block of ``cid`` fetched now and served from here (the size and the walk read it).
    block = _get(get, cid)
    return lambda wanted: block if wanted == cid else get(wanted)


def _size(get: Get, cid: str, expect: int | None, lo: int, hi: int | None) -> int:
    # How many bytes [lo, hi) of the File-node tree ``cid`` holds, from its root block alone (the walk
    # then checks every node below against it); ``expect`` is the size the caller was told.
    total = file_root_info(get, cid).size
    if expect is not None and total != expect:
        raise DagPbError(f"file node {cid} covers {total} bytes, its parent says {expect}")
    end = total if hi is None else min(hi, total)
    return max(end - lo, 0)


def _fill(store: _HasGet, get: Get, cid: str, expect: int | None, lo: int, out: memoryview) -> int:
    # Walk the runs of bytes [lo, lo+len(out)) of the tree ``cid`` lazily, each into its slot of ``out``:
    # data carried in File nodes at once, raw leaves in runs of FETCH_RUN (one store call each).
    at = 0
    leaves: list[_Leaf] = []
    for run in walk_file(get, cid, expect, lo, lo + len(out)):
        size = len(run.data) if run.size is None else run.size  # a leaf below a File node: its parent's word
        n = len(run.data) if run.cid is None else max((size if run.hi is None else min(run.hi, size)) - run.lo, 0)
        if at + n > len(out):
            raise DagPbError(f"file {cid} holds more bytes than its root block says")
        if run.cid is None:
            out[at : at + n] = run.data
        elif n:
            leaves.append(_Leaf(run.cid, size, run.lo, at, n))
            if len(leaves) == FETCH_RUN:
                _fetch(store, leaves, out)
                leaves = []
        at += n
    _fetch(store, leaves, out)
    if at != len(out):
        raise DagPbError(f"file {cid} holds fewer bytes than its root block says")
    return at


def _fetch(store: _HasGet, leaves: list[_Leaf], out: memoryview) -> None:
    requests = [(leaf.cid, out[leaf.at : leaf.at + leaf.n], leaf.lo) for leaf in leaves]
    many = getattr(store, "get_many_into", None)
    if callable(many):
        sizes: list[int] = many(requests)
    else:
        sizes = []
        for cid, view, lo in requests:
            block = _get(store.get, cid)
            piece = memoryview(block)[lo : lo + len(view)]
            view[: len(piece)] = piece
            sizes.append(len(block))
    for leaf, size in zip(leaves, sizes, strict=True):
        if size != leaf.size:
            raise leaf_size_error(leaf.cid, size, leaf.size)


def _check_range(offset: object, length: object) -> None:
    if not _is_count(offset) or not (length is None or _is_count(length)):
        raise ValueError(f"offset and length must be non-negative ints, got {offset!r} and {length!r}")


def read_bytes(
    store: _HasGet, cid: str, offset: int = 0, length: int | None = None, *, size: int | None = None
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
        block = _get(store.get, cid)
        if size is not None and len(block) != size:
            raise leaf_size_error(cid, len(block), size)
        return block if offset == 0 and (hi is None or hi >= len(block)) else bytes(block[offset:hi])
    get = _root_once(store.get, cid)
    return fill_bytes(_size(get, cid, size, offset, hi), lambda out: _fill(store, get, cid, size, offset, out))


def read_into(
    store: _HasGet, cid: str, out: memoryview | bytearray, offset: int = 0, *, size: int | None = None
) -> int:
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
        block = _get(store.get, cid)
        if size is not None and len(block) != size:
            raise leaf_size_error(cid, len(block), size)
        piece = memoryview(block)[offset : offset + len(view)]
        view[: len(piece)] = piece
        return len(piece)
    get = _root_once(store.get, cid)
    total = _size(get, cid, size, offset, offset + len(view))
    return _fill(store, get, cid, size, offset, view[:total])


def read_file(store: _HasGet, cid: str) -> bytes:
    """The whole content of the UnixFS file ``cid`` in ``store`` (see :func:`read_bytes`).

    Raises MissingBlock, DagPbError (malformed tree), CorruptBlock (from the store), InvalidCID.
    """
    return read_bytes(store, cid)


def read_range(store: _HasGet, cid: str, offset: int, length: int) -> bytes:
    """Bytes ``[offset, offset+length)`` of the file ``cid``, fetching only the blocks that overlap.

    Raises ValueError: an offset or length that is not a non-negative int; otherwise as :func:`read_file`.
    """
    parse(cid)
    if not _is_count(length):  # read_bytes reads None as "to the end"; a range has a length
        raise ValueError(f"length must be a non-negative int, got {length!r}")
    return read_bytes(store, cid, offset, length)
