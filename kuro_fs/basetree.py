"""A changed file's stored base, looked up by position: the whole subtrees a rebuild can keep as they are.

## The one decision
A file changed in a few places keeps the rest of its tree: :meth:`~kuro_fs.extents.SparseFile.build`
asks a :class:`BaseTree` for the base's node over an aligned run of untouched chunks and, if there is
one, hands it to :meth:`~kuro_fs.unixfs.BalancedLayout.add_node` whole. A commit then costs the chunks
written and the tree levels above them (about ``width`` lookups per level on each side of a change),
not a step per chunk of the file: a byte written into a 1 TiB hole reads a few dozen nodes, not the
2**22 leaves below them.

A node is kept only if it is **exactly** what the layout would make there, so the new file's CID is
the one :func:`~kuro_fs.unixfs.write_file` gives the same bytes, whoever wrote the base: a level-``h``
node (``width ** h`` chunks) is kept if its block is byte for byte the File node the layout builds
from its children, its CID is the one ``put`` mints for that block (CIDv1 sha2-256), and each child is
such a node of level ``h - 1`` — at level 1, a raw leaf of ``chunk_size`` bytes (as its parent says;
a raw leaf is reused by name, as every kept chunk always was). That check is recursive, so each
answer is remembered by CID (:attr:`BaseTree.known`, carried from one build to the next): a hole's
subtree is one node repeated, checked once; a base written in this layout by someone else is checked
once per distinct node (a read of each dag-pb node, never of a leaf) the first time a
:class:`~kuro_fs.extents.SparseFile` over it builds — once per overlay —, and a tree it built itself
is checked again only where it changed. Anything else — another chunk size or width, a
trickle DAG, bytes inside nodes — is not kept whole: its chunks are reused leaf by leaf or re-read,
exactly as before, so such a base still costs a step per chunk.

## Pure
Blocks come in through the injected ``get``. Raises MissingBlock (a node the lookup needs is
absent), DagPbError / FileTooDeep (a malformed node on the way down), CorruptBlock (from the store).

## Not done here
Which chunks are untouched, and the layout itself (:mod:`kuro_fs.extents`, :mod:`kuro_fs.unixfs`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Final

from kuro_fs.cid import cid_for, codec_is
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import DagPbError, FileTooDeep
from kuro_fs.unixfs import (
    MAX_FILE_DEPTH,
    FileRoot,
    Get,
    NodeType,
    UnixFSData,
    _file_node,
    _get,
    _link_cid,
    encode_data,
)

__all__ = ["MAX_KNOWN", "BaseTree"]

#: At most this many checked nodes are remembered per file (about 100 bytes each); past it they are forgotten.
MAX_KNOWN: Final = 65536

#: A decoded dag-pb node: own data length, child CIDs, child sizes, child start offsets (relative to the
#: node), and the bytes it covers — summed once when decoded, so a lookup costs the depth, not the width.
_Node = tuple[int, list[str], tuple[int, ...], list[int], int]


class BaseTree:
    """The stored file ``cid`` of ``size`` bytes, asked for its subtrees in the layout of ``chunk``/``width``."""

    __slots__ = ("_path", "chunk", "cid", "get", "known", "size", "width")

    def __init__(
        self, get: Get, cid: str, size: int, chunk: int, width: int, known: dict[tuple[str, int], FileRoot | None]
    ) -> None:
        self.get = get
        self.cid = cid
        self.size = size
        self.chunk = chunk
        self.width = width
        #: (cid, level) → the node as a layout entry if it is exactly the layout's, else None
        self.known = known
        self._path: dict[int, tuple[str, _Node]] = {}  # depth → the node last decoded there on the way down

    def subtree(self, k: int, stop: int) -> tuple[int, FileRoot] | None:
        """The largest whole node of the layout over chunks ``[k, k + width**h)`` within ``[k, stop)``
        (``h`` ≥ 1, aligned: ``k`` a multiple of ``width**h``) that the base holds exactly there, as
        ``(h, node)``; None if there is none (then the chunk at ``k`` is looked at alone)."""
        w = self.width
        h = 0
        while k % w ** (h + 1) == 0 and k + w ** (h + 1) <= stop:
            h += 1
        for level in range(h, 0, -1):
            node = self._find(k * self.chunk, w**level * self.chunk, level)
            if node is not None:
                return level, node
        return None

    def leaf(self, offset: int, size: int) -> str | None:
        """The raw leaf of the base holding exactly bytes ``[offset, offset+size)``, or None."""
        found = self._find(offset, size, 0)
        return found.cid if found is not None else None

    def _find(self, a: int, n: int, level: int) -> FileRoot | None:
        # Walk down to the node over exactly [a, a+n): a raw leaf (level 0) or the layout's level-``level`` node.
        cid, start, expect = self.cid, 0, None
        for _depth in range(MAX_FILE_DEPTH + 1):
            if codec_is(cid, "raw"):
                if level or start != a:
                    return None
                size = expect if expect is not None else len(_get(self.get, cid))
                return FileRoot(cid, size, size) if size == n else None
            _, cids, sizes, starts, total = self._node(cid, expect, _depth)
            if level and start == a and total == n:
                entry = self._layout_node(cid, level)
                if entry is not None:
                    return entry
            i = bisect_right(starts, a - start) - 1
            if i < 0 or start + starts[i] + sizes[i] < a + n:
                return None  # [a, a+n) is not inside one child
            cid, start, expect = cids[i], start + starts[i], sizes[i]
        raise FileTooDeep(cid, MAX_FILE_DEPTH)

    def _node(self, cid: str, expect: int | None, depth: int) -> _Node:
        # Lookups go left to right, so the last path down holds the next one's nodes (a bounded cache).
        last = self._path.get(depth)
        if last is not None and last[0] == cid:
            node = last[1]
        else:
            pb, meta = _file_node(_get(self.get, cid), cid)
            own = len(meta.data or b"")
            starts, pos = [], own
            for size in meta.blocksizes:
                starts.append(pos)
                pos += size
            node = own, [_link_cid(link.hash) for link in pb.links], meta.blocksizes, starts, pos
            self._path[depth] = cid, node
        total = node[4]
        if expect is not None and total != expect:
            raise DagPbError(f"file node {cid} covers {total} bytes, its parent says {expect}")
        return node

    def _layout_node(self, cid: str, level: int) -> FileRoot | None:
        # ``cid`` as a layout entry if its subtree is exactly the layout's level-``level`` node, else None.
        key = (cid, level)
        if key in self.known:
            return self.known[key]
        entry = self._check(cid, level)
        if len(self.known) >= MAX_KNOWN:
            self.known.clear()
        self.known[key] = entry
        return entry

    def _check(self, cid: str, level: int) -> FileRoot | None:
        if not codec_is(cid, "dag-pb"):
            return None
        block = _get(self.get, cid)
        try:
            pb, meta = _file_node(block, cid)
        except DagPbError:
            return None
        part = self.width ** (level - 1) * self.chunk
        if len(meta.blocksizes) != self.width or any(size != part for size in meta.blocksizes):
            return None
        data = encode_data(UnixFSData(NodeType.FILE, filesize=part * self.width, blocksizes=meta.blocksizes))
        children = [_link_cid(link.hash) for link in pb.links]
        links = tuple(PBLink.to(child, "", link.tsize) for child, link in zip(children, pb.links, strict=True))
        if encode_pb(PBNode(links, data)) != block or cid_for(block, "dag-pb") != cid:
            return None  # the block itself is not the layout's (checked before any child is read)
        for child, link in zip(children, links, strict=True):
            if level == 1:
                if not codec_is(child, "raw") or link.tsize != part:
                    return None
            else:
                found = self._layout_node(child, level - 1)
                if found is None or found.tsize != link.tsize:
                    return None
        return FileRoot(cid, part * self.width, len(block) + sum(link.tsize for link in links))
