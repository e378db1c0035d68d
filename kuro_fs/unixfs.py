"""UnixFS: the Data message, the balanced file layout, range reads, and flat directories.

## The one decision
A file is laid out exactly as kubo / ipfs-unixfs-importer do with CIDv1
defaults, so our file CIDs are the ecosystem's: fixed-size chunks (262144),
**raw leaves**, a balanced tree of at most ``width`` (174) links per dag-pb File
node, and a file of one chunk (0..chunk bytes) is *just its raw leaf*. Every
other rule is a consequence spelled out in ``ipld-rules.md`` §3–4: an empty file
is one empty chunk; a trailing group of one child still gets its own parent;
``blocksizes`` are file bytes (unpacked, one per link), not Tsizes; ``filesize``
is their sum; Tsize is the cumulative block bytes below a link.

Reading walks the same tree through ``blocksizes``: :func:`iter_file` with an
offset and length fetches only the blocks that overlap the range
(:mod:`kuro_fs.fileread` reads a file or a range into one buffer). A tree that
does not add up (blocksizes vs links vs leaf lengths), or claims more than 2^64−1 bytes, is corrupt:
:class:`~kuro_fs.errors.DagPbError`. A block the store lacks is
:class:`MissingBlock`, carrying the CID, so :mod:`kuro_fs.fs` can deny with
``block-missing``.

## Pure
Blocks go in and out through injected callables: ``put(block, codec) -> cid``
and ``get(cid) -> bytes | None`` (a :class:`~kuro_fs.blocks.BlockStore`'s bound
methods fit). Parallel hashing of leaves is :mod:`kuro_fs.importer`'s job; it
feeds :class:`BalancedLayout` the leaf CIDs.

## Not done here
No HAMT-sharded directories (:mod:`kuro_fs.unixfs_hamt` writes those), no
trickle layout, no mode/mtime metadata on write, no symlinks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, NamedTuple

from kuro_fs.cid import cid_from_bytes, codec_is, format_binary, parse
from kuro_fs.dagpb import PBLink, PBNode, decode_uvarint, encode_uvarint
from kuro_fs.dagpb import decode as decode_pb
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import DagPbError, FileTooDeep, MissingBlock

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_WIDTH",
    "MAX_FILE_BYTES",
    "MAX_FILE_DEPTH",
    "SHARD_THRESHOLD_BYTES",
    "BalancedLayout",
    "FileRoot",
    "Get",
    "MissingBlock",
    "NodeType",
    "Put",
    "Run",
    "UnixFSData",
    "chunks",
    "decode_data",
    "directory_node",
    "encode_data",
    "file_root_info",
    "iter_file",
    "iter_leaves",
    "leaf_size_error",
    "walk_file",
    "write_file",
]

DEFAULT_CHUNK_SIZE: Final = 262144
DEFAULT_WIDTH: Final = 174
#: A directory whose estimated size (name + binary CID bytes of its links) exceeds this is a HAMT shard.
SHARD_THRESHOLD_BYTES: Final = 262144
#: The deepest file tree read. A balanced tree of width ≥ 2 over 2^64 one-byte chunks is 64 levels;
#: anything deeper is a hostile DAG (a chain of one-link nodes), refused before it exhausts the stack.
MAX_FILE_DEPTH: Final = 100
#: The most bytes a file holds: UnixFS ``filesize`` is a uint64, so a File node whose own bytes and
#: ``blocksizes`` add up to more is malformed (a directory entry could not even record its size).
MAX_FILE_BYTES: Final = (1 << 64) - 1

Put = Callable[[bytes, str], str]
Get = Callable[[str], "bytes | None"]


class NodeType(IntEnum):
    """UnixFS ``Data.Type``."""

    RAW = 0
    DIRECTORY = 1
    FILE = 2
    METADATA = 3
    SYMLINK = 4
    HAMT_SHARD = 5


# ---- the Data message


@dataclass(frozen=True, slots=True)
class UnixFSData:
    """The UnixFS ``Data`` protobuf (fields 1–8; ``mtime`` kept as its raw sub-message)."""

    type: NodeType
    data: bytes | None = None
    filesize: int | None = None
    blocksizes: tuple[int, ...] = ()
    hash_type: int | None = None
    fanout: int | None = None
    mode: int | None = None
    mtime: bytes | None = None


def _varint_field(tag: int, value: int) -> bytes:
    return bytes((tag,)) + encode_uvarint(value)


def _bytes_field(tag: int, value: bytes) -> bytes:
    return bytes((tag,)) + encode_uvarint(len(value)) + value


def encode_data(msg: UnixFSData) -> bytes:
    """Protobuf-2 bytes of ``msg``: fields in number order, only when present, blocksizes unpacked.

    >>> encode_data(UnixFSData(NodeType.FILE, filesize=262145, blocksizes=(262144, 1))).hex()
    '080218818010208080102001'
    """
    parts = [_varint_field(0x08, int(msg.type))]
    if msg.data:  # absent, not zero-length, when empty
        parts.append(_bytes_field(0x12, msg.data))
    if msg.filesize is not None:
        parts.append(_varint_field(0x18, msg.filesize))
    parts.extend(_varint_field(0x20, size) for size in msg.blocksizes)
    if msg.hash_type is not None:
        parts.append(_varint_field(0x28, msg.hash_type))
    if msg.fanout is not None:
        parts.append(_varint_field(0x30, msg.fanout))
    if msg.mode is not None:
        parts.append(_varint_field(0x38, msg.mode))
    if msg.mtime is not None:
        parts.append(_bytes_field(0x42, msg.mtime))
    return b"".join(parts)


def decode_data(buf: bytes) -> UnixFSData:
    """Parse a UnixFS ``Data`` message.

    Raises DagPbError: if truncated, a field is out of order or unknown, or Type is missing/unknown.
    """
    pos = 0
    values: dict[int, object] = {}
    blocksizes: list[int] = []
    last = 0
    try:
        while pos < len(buf):
            key, pos = decode_uvarint(buf, pos)
            num, wire = key >> 3, key & 7
            if num < last or (num == last and num != 4) or num == 0 or num > 8:
                raise ValueError(f"field {num} out of order or unknown at offset {pos}")
            last = num
            if key == 0x20:  # Blocksizes, one per link: read as a run (a File node of 174 links has 174)
                value, pos = decode_uvarint(buf, pos)
                blocksizes.append(value)
                while pos < len(buf) and buf[pos] == 0x20:
                    value, pos = decode_uvarint(buf, pos + 1)
                    blocksizes.append(value)
            elif wire == 0 and num in (1, 3, 4, 5, 6, 7):
                value, pos = decode_uvarint(buf, pos)
                if num == 4:
                    blocksizes.append(value)
                else:
                    values[num] = value
            elif wire == 2 and num in (2, 8):
                length, pos = decode_uvarint(buf, pos)
                if pos + length > len(buf):
                    raise ValueError(f"field {num} runs past the end")
                values[num] = bytes(buf[pos : pos + length])
                pos += length
            else:
                raise ValueError(f"field {num} has unexpected wire type {wire}")
        if 1 not in values:
            raise ValueError("Type is missing")
        node_type = NodeType(int(str(values[1])))
    except ValueError as exc:
        raise DagPbError(f"malformed UnixFS Data ({bytes(buf[:8]).hex()}…): {exc}") from exc

    def opt(num: int) -> int | None:
        value = values.get(num)
        return value if isinstance(value, int) else None

    raw = values.get(2)
    mtime = values.get(8)
    return UnixFSData(
        node_type,
        raw if isinstance(raw, bytes) else None,
        opt(3),
        tuple(blocksizes),
        opt(5),
        opt(6),
        opt(7),
        mtime if isinstance(mtime, bytes) else None,
    )


# ---- the balanced layout


class FileRoot(NamedTuple):
    """What a finished file DAG is: root ``cid``, file bytes ``size``, cumulative block bytes ``tsize``."""

    cid: str
    size: int
    tsize: int


def _cid_bin(cid: str) -> bytes:
    # The binary form of a CID this process minted (parse is memoised and fast for canonical strings).
    return parse(cid).bytes


@dataclass(slots=True)
class BalancedLayout:
    """Streaming balanced builder: feed leaves in order with :meth:`add_leaf`, then :meth:`finish`.

    Equivalent to "group the list into runs of ``width``, make a File node per
    run, repeat until one node remains", but holds at most ``width`` entries per
    level, so a file of any length needs O(width · depth) memory. Nodes are
    stored through ``put`` as soon as they are complete.
    """

    put: Put
    width: int = DEFAULT_WIDTH
    _levels: list[list[tuple[bytes, int, int]]] = field(default_factory=lambda: [[]])
    _leaves: int = 0
    _first: FileRoot | None = None

    def __post_init__(self) -> None:
        if self.width < 2:
            raise ValueError(f"width must be at least 2, got {self.width}")

    def add_leaf(self, cid: str, size: int) -> None:
        """Append the raw leaf ``cid`` covering ``size`` file bytes."""
        if self._leaves == 0:
            self._first = FileRoot(cid, size, size)
        self._leaves += 1
        self._push(0, (_cid_bin(cid), size, size))

    def add_leaves(self, cid: str, size: int, count: int) -> None:
        """Append the raw leaf ``cid`` covering ``size`` file bytes ``count`` times (nothing for ``count`` < 1).

        The same tree as ``count`` calls of :meth:`add_leaf`, built in O(width · depth) steps whatever
        ``count``: every full node over the repeated leaf is one block, made and stored once per level
        (a file's hole is the one all-zero leaf repeated — a terabyte of it is a handful of blocks).
        """
        if count < 1:
            return
        if self._leaves == 0:
            self._first = FileRoot(cid, size, size)
        self._leaves += count
        self._repeat(0, (_cid_bin(cid), size, size), count)

    def add_node(self, cid: str, size: int, tsize: int, level: int) -> None:
        """Append a whole File node of ``level`` ≥ 1 (``width ** level`` leaves, ``size`` file bytes,
        ``tsize`` cumulative block bytes), made as this layout would make it — the caller checks that.

        The same tree as adding its leaves one by one, in one step: it must start on a multiple of
        ``width ** level`` leaves (ValueError otherwise), where the levels below it are empty.
        """
        span = self.width**level
        if level < 1 or self._leaves % span:
            raise ValueError(f"a level-{level} node cannot follow {self._leaves} leaves")
        if self._leaves == 0:
            self._first = FileRoot(cid, size, tsize)
        self._leaves += span
        while len(self._levels) <= level:
            self._levels.append([])
        self._push(level, (_cid_bin(cid), size, tsize))

    def _repeat(self, level: int, entry: tuple[bytes, int, int], count: int) -> None:
        # Close the open node of this level with copies of ``entry`` first (it is then empty); the copies that
        # make whole nodes are one node repeated one level up; the rest open a new node here.
        while count and self._levels[level]:
            self._push(level, entry)
            count -= 1
        full, rest = divmod(count, self.width)
        if full:
            if level + 1 == len(self._levels):
                self._levels.append([])
            self._repeat(level + 1, self._node([entry] * self.width), full)
        for _ in range(rest):
            self._push(level, entry)

    def _push(self, level: int, entry: tuple[bytes, int, int]) -> None:
        pending = self._levels[level]
        pending.append(entry)
        if len(pending) == self.width:
            self._levels[level] = []
            self._up(level, self._node(pending))

    def _up(self, level: int, entry: tuple[bytes, int, int]) -> None:
        if level + 1 == len(self._levels):
            self._levels.append([])
        self._push(level + 1, entry)

    def _node(self, children: list[tuple[bytes, int, int]]) -> tuple[bytes, int, int]:
        sizes = tuple(size for _, size, _ in children)
        filesize = sum(sizes)
        data = encode_data(UnixFSData(NodeType.FILE, filesize=filesize, blocksizes=sizes))
        block = encode_pb(PBNode(tuple(PBLink(h, "", t) for h, _, t in children), data))
        cid = self.put(block, "dag-pb")
        return _cid_bin(cid), filesize, len(block) + sum(t for _, _, t in children)

    def finish(self) -> FileRoot:
        """Close every open level and return the root. Raises ValueError if no leaf was added."""
        if self._first is None:
            raise ValueError("a file has at least one (possibly empty) chunk")
        if self._leaves == 1:
            return self._first  # a one-chunk file is its raw leaf
        level = 0
        while True:
            pending = self._levels[level]
            top = level + 1 == len(self._levels)
            if top and len(pending) == 1 and level > 0:
                h, size, tsize = pending[0]
                return FileRoot(_cid_str(h), size, tsize)
            if pending:
                self._levels[level] = []
                entry = self._node(pending)
                if level + 1 == len(self._levels):
                    self._levels.append([])
                self._levels[level + 1].append(entry)  # never fills a level: it had < width before
            level += 1


def _link_cid(binary: bytes) -> str:
    # The fast base32 form for a 36-byte CIDv1 sha2-256 link; any other link through kuro_fs.cid.
    return _cid_str(binary) if len(binary) == 36 and binary[0] == 1 else cid_from_bytes(binary)


def _cid_str(binary: bytes) -> str:
    return format_binary(binary)  # a link's bytes, checked when the CID is used


def chunks(data: bytes | memoryview, chunk_size: int) -> Iterator[memoryview]:
    """Fixed-size chunks of ``data`` as zero-copy views; an empty input is one empty chunk."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    view = memoryview(data).cast("B")
    if len(view) == 0:
        yield view
        return
    for start in range(0, len(view), chunk_size):
        yield view[start : start + chunk_size]


def write_file(
    put: Put, data: bytes | memoryview, *, chunk_size: int = DEFAULT_CHUNK_SIZE, width: int = DEFAULT_WIDTH
) -> FileRoot:
    """Store ``data`` as a UnixFS file DAG through ``put`` (serially); return its :class:`FileRoot`."""
    layout = BalancedLayout(put, width)
    for chunk in chunks(data, chunk_size):
        layout.add_leaf(put(bytes(chunk), "raw"), len(chunk))
    return layout.finish()


# ---- reading


def _get(get: Get, cid: str) -> bytes:
    block = get(cid)
    if block is None:
        raise MissingBlock(cid)
    return block


def _file_node(block: bytes, cid: str) -> tuple[PBNode, UnixFSData]:
    if not codec_is(cid, "dag-pb"):  # only raw leaves and dag-pb nodes make a file (not dag-cbor)
        raise DagPbError(f"{cid} is neither a raw leaf nor a dag-pb node, so not part of a UnixFS file")
    node = decode_pb(block)
    if node.data is None:
        raise DagPbError(f"dag-pb node {cid} has no UnixFS Data")
    meta = decode_data(node.data)
    if meta.type not in (NodeType.FILE, NodeType.RAW):
        raise DagPbError(f"{cid} is a UnixFS {meta.type.name.lower()}, not a file")
    if len(meta.blocksizes) != len(node.links):
        raise DagPbError(f"file node {cid} has {len(node.links)} links but {len(meta.blocksizes)} blocksizes")
    own = len(meta.data or b"")
    total = own + sum(meta.blocksizes)
    if total > MAX_FILE_BYTES:
        raise DagPbError(f"file node {cid} claims {total} bytes: a UnixFS file holds no more than 2^64-1 bytes")
    if meta.filesize is not None and meta.filesize != total:
        raise DagPbError(f"file node {cid}: filesize {meta.filesize} != data + blocksizes")
    return node, meta


def iter_file(
    get: Get, cid: str, offset: int = 0, length: int | None = None, *, size: int | None = None
) -> Iterator[bytes | memoryview]:
    """The bytes of file ``cid`` in ``[offset, offset+length)``, fetching only overlapping blocks, as pieces
    of at most a window (:func:`kuro_fs.fileread.stream_file`: a subtree linked again is copied, not walked).

    ``length=None`` reads to the end; a range past the end yields nothing. ``size``, if given, is the
    byte size the caller was told (e.g. by a directory entry): a root block that covers another size
    raises DagPbError (an empty range reads no block, so it checks nothing).
    Raises MissingBlock: a needed block is absent. Raises DagPbError: the tree is
    malformed, its sizes do not add up, or it is deeper than :data:`MAX_FILE_DEPTH`.
    Raises CorruptBlock: from the store. Raises ValueError: ``offset``/``length`` not a non-negative int.
    """
    from kuro_fs.fileread import stream_file  # (it reads through this module's walk checks)

    return stream_file(_GetOnly(get), cid, offset, length, size=size)


class _GetOnly:
    # A store seen through its ``get`` alone (no decoded-node cache: that needs ``has``).
    __slots__ = ("get",)

    def __init__(self, get: Get) -> None:
        self.get = get


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Run(NamedTuple):
    """One run of a file's bytes, in order: ``data`` from a File node, or bytes ``[lo, hi)`` of a raw leaf.

    For a leaf, ``cid`` names it and ``size`` is its length as its parent says
    (None for a file that is one raw leaf: nothing says); ``hi`` None means to its end.
    For data carried by a File node, ``cid`` is None and ``data`` holds the bytes.
    """

    cid: str | None
    data: bytes
    size: int | None
    lo: int
    hi: int | None


def walk_file(get: Get, cid: str, expect: int | None, lo: int, hi: int | None, depth: int = 0) -> Iterator[Run]:
    """The runs that make bytes ``[lo, hi)`` of file ``cid``, lazily; reads File nodes, never a raw leaf.

    Checks every File node on the way (sizes add up, the depth cap) as
    :func:`iter_file` does; a raw leaf's length is for the reader to check
    against ``Run.size``. Raises MissingBlock, DagPbError.
    """
    if hi is not None and hi <= lo:
        return
    if depth > MAX_FILE_DEPTH:
        raise FileTooDeep(cid, MAX_FILE_DEPTH)
    if codec_is(cid, "raw"):  # raw leaf: the block is the bytes
        yield Run(cid, b"", expect, lo, hi)
        return
    node, meta = _file_node(_get(get, cid), cid)
    own = meta.data or b""
    total = len(own) + sum(meta.blocksizes)
    if expect is not None and total != expect:
        raise DagPbError(f"file node {cid} covers {total} bytes, its parent says {expect}")
    if own and lo < len(own):
        yield Run(None, own[lo:hi], None, 0, None)
    start = len(own)
    for link, size in zip(node.links, meta.blocksizes, strict=True):
        stop = start + size
        if hi is not None and start >= hi:
            break
        if stop > lo:
            sub_hi = None if hi is None or hi >= stop else hi - start
            yield from walk_file(get, _link_cid(link.hash), size, max(lo - start, 0), sub_hi, depth + 1)
        start = stop


def leaf_size_error(cid: str, actual: int, expect: int) -> DagPbError:
    """The error for a raw leaf whose length is not the one its parent names."""
    return DagPbError(f"raw leaf {cid} is {actual} bytes, its parent says {expect}")


def iter_leaves(get: Get, cid: str) -> Iterator[tuple[int, str, int]]:
    """``(offset, cid, size)`` of every raw leaf of file ``cid``, in file order; reads no leaf block.

    Bytes a dag-pb node carries itself (a foreign layout) are skipped, so the offsets may have gaps.
    This is how a changed file reuses the leaves it did not change. Raises MissingBlock, DagPbError
    (as :func:`iter_file`).
    """
    # An explicit stack of (cid, offset, expected size, depth), so a deep hostile tree needs no recursion.
    stack: list[tuple[str, int, int | None, int]] = [(cid, 0, None, 0)]
    last: dict[int, tuple[str, int, list[tuple[str, int]]]] = {}  # depth → the last node decoded there
    while stack:
        here, offset, expect, depth = stack.pop()
        if depth > MAX_FILE_DEPTH:
            raise FileTooDeep(here, MAX_FILE_DEPTH)
        if codec_is(here, "raw"):
            if expect is None:
                expect = len(_get(get, here))
            yield offset, here, expect
            continue
        known = last.get(depth)
        if known is None or known[0] != here:  # (a hole is one node repeated at each depth: decoded once)
            node, meta = _file_node(_get(get, here), here)
            links = [(_link_cid(link.hash), size) for link, size in zip(node.links, meta.blocksizes, strict=True)]
            known = last[depth] = here, len(meta.data or b""), links
        _, own, links = known
        total = own + sum(size for _, size in links)
        if expect is not None and total != expect:
            raise DagPbError(f"file node {here} covers {total} bytes, its parent says {expect}")
        children = []
        start = offset + own
        for child, size in links:
            children.append((child, start, size, depth + 1))
            start += size
        stack.extend(reversed(children))


def file_root_info(get: Get, cid: str) -> FileRoot:
    """Size and cumulative Tsize of file ``cid``, reading only its root block.

    Raises MissingBlock, DagPbError (as :func:`iter_file`).
    """
    block = _get(get, cid)
    if codec_is(cid, "raw"):
        return FileRoot(cid, len(block), len(block))
    node, meta = _file_node(block, cid)
    size = len(meta.data or b"") + sum(meta.blocksizes)
    return FileRoot(cid, size, len(block) + sum(link.tsize for link in node.links))


# ---- directories


def directory_node(entries: Iterable[tuple[str, str, int]]) -> tuple[bytes, int]:
    """A flat UnixFS directory block for ``(name, cid, tsize)`` entries; return ``(block, tsize)``.

    Links are sorted bytewise by UTF-8 name; the block's Tsize is its length
    plus the entries' Tsizes.

    >>> directory_node([])[0].hex()
    '0a020801'

    A flat node of any size is built; when a directory should be a HAMT shard instead is
    :mod:`kuro_fs.unixfs_hamt`'s decision. Raises ValueError: on duplicate names.
    """
    items = sorted(((name.encode("utf-8"), name, cid, tsize) for name, cid, tsize in entries), key=lambda e: e[0])
    for a, b in itertools.pairwise(items):
        if a[0] == b[0]:
            raise ValueError(f"duplicate directory entry {a[1]!r}")
    links = tuple(PBLink.to(cid, name, tsize) for _, name, cid, tsize in items)
    block = encode_pb(PBNode(links, encode_data(UnixFSData(NodeType.DIRECTORY))))
    return block, len(block) + sum(link.tsize for link in links)
