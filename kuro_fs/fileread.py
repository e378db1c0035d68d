"""Reading a UnixFS file, or a range of it, into one buffer filled in place.

## The one decision
A read first walks the file's dag-pb File nodes (small: 25 of them for 1 GiB) to
a **plan** — which raw leaf lands where in the output, and which bytes of it —
checking that every node's sizes add up, and only then reads the leaves, each
straight into its slot of one output buffer. The buffer is allocated once at its
final size (:func:`kuro_fs.fillbytes.fill_bytes` for ``bytes``; the caller's own
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

from typing import NamedTuple, Protocol

from kuro_fs.cid import codec_is, parse
from kuro_fs.fillbytes import fill_bytes
from kuro_fs.unixfs import Get, _get, _is_count, leaf_size_error, walk_file

__all__ = ["read_bytes", "read_file", "read_into", "read_range"]


class _HasGet(Protocol):
    def get(self, cid: str) -> bytes | None: ...


class _Leaf(NamedTuple):
    cid: str  # a raw leaf
    size: int  # its size, as its parent says
    lo: int  # first wanted byte, within the leaf
    at: int  # where that byte lands in the output
    n: int  # bytes wanted


class _Plan(NamedTuple):
    leaves: list[_Leaf]
    inline: list[tuple[int, bytes]]  # (output offset, bytes) carried in File nodes' own Data


def _plan(get: Get, cid: str, expect: int | None, lo: int, hi: int | None) -> tuple[_Plan, int]:
    # Where each run of [lo, hi) of the File-node tree ``cid`` lands in the output, and the total.
    plan = _Plan([], [])
    at = 0
    for run in walk_file(get, cid, expect, lo, hi):
        if run.cid is None:
            plan.inline.append((at, run.data))
            at += len(run.data)
            continue
        assert run.size is not None  # a leaf below a File node: its parent names its size
        n = max((run.size if run.hi is None else min(run.hi, run.size)) - run.lo, 0)
        if n:
            plan.leaves.append(_Leaf(run.cid, run.size, run.lo, at, n))
            at += n
    return plan, at


def _fill(store: _HasGet, plan: _Plan, out: memoryview) -> int:
    for at, data in plan.inline:
        out[at : at + len(data)] = data
    requests = [(leaf.cid, out[leaf.at : leaf.at + leaf.n], leaf.lo) for leaf in plan.leaves]
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
    for leaf, size in zip(plan.leaves, sizes, strict=True):
        if size != leaf.size:
            raise leaf_size_error(leaf.cid, size, leaf.size)
    return len(out)


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
    plan, total = _plan(store.get, cid, size, offset, hi)
    return fill_bytes(total, lambda out: _fill(store, plan, out))


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
    plan, total = _plan(store.get, cid, size, offset, offset + len(view))
    return _fill(store, plan, view[:total])


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
