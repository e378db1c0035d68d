"""kuro.fs directories: the flat and the sharded block, reading them once, and the working tree an op edits.

## The one decision
A directory is one dag-cbor block while it is small, and an IPLD HashMap
(:mod:`kuro_fs.hamt`: sha2-256, 256 slots, buckets of 3) once it is large::

    flat, at most DirLayout.max_flat (256) entries:
        {"entries": {name: {"cid": Link, "size": int}}, "type": "kuro.fs/dir", "version": 1}
    sharded, more entries:
        {"shard": {"bucketSize": 3, "hamt": [map, data], "hashAlg": 18}, "type": "kuro.fs/dir", "version": 1}

``shard`` is a HashMapRoot of the spec held inline; its keys are the names'
UTF-8 bytes and its values the same ``{"cid", "size"}`` maps a flat directory
holds. ``size`` is the file's byte length (0 for a directory), so listing reads
no file block; an entry is a directory iff its CID is dag-cbor. The layout
depends on the entry count alone (flat iff ≤ ``max_flat``), so one set of
entries always has one CID. Why 256: a directory of up to 256 entries is one
block either way (a HashMap that small keeps every entry in its root), so
sharding earlier would only change the CIDs of the small directories already
stored; a 256-entry flat block is at most ~80 KB (names ≤ 255 bytes) and
re-encodes in well under a millisecond, while past it the flat cost grows
linearly (132 ms per write at 10k entries) and the sharded cost stays a couple
of bounded nodes. A directory read from an older root with more than 256
entries in a flat block is read as is and re-laid out on its first edit.

Reading goes through :mod:`kuro_fs.dircache`, keyed by CID and filled only
with hash-verified decodings, so a block is decoded once, not on every op.
Decoding is strict: a block of any other shape is malformed
(:class:`~kuro_fs.errors.DagCborError`).

An op never edits blocks in place: :class:`WorkingTree` loads the directories
on its path, edits them in memory (a flat directory as a copied dict, a
sharded one as a persistent HashMap), and only :meth:`WorkingTree.commit`
encodes and stores the changed ones (deepest first). So every decision —
including a refusal found halfway down a path (:class:`Refusal`) — is made
before the first ``put``. :func:`to_unixfs_dir` re-encodes a tree as UnixFS.

## Pure
Blocks go through the injected store only; decodings go to the injected cache.

## Not done here
Denial receipts and grants (:mod:`kuro_fs.fs`), the UnixFS shard layout
(:mod:`kuro_fs.unixfs_hamt`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from kuro_fs import dagcbor
from kuro_fs.blocks import BlockStore
from kuro_fs.cid import cid_for, codec_is, parse
from kuro_fs.dircache import SHARED, DirCache, load_verified
from kuro_fs.errors import CorruptBlock, DagCborError, InvalidCID, MissingBlock
from kuro_fs.hamt import (
    HASH_ALG,
    Hamt,
    Node,
    Shape,
    Values,
    cbor_head,
    encode_node,
    encode_root,
    link_bytes,
    node_from_data,
)
from kuro_fs.paths import stored_name_ok
from kuro_fs.unixfs import file_root_info
from kuro_fs.unixfs_hamt import unixfs_directory

__all__ = [
    "DIR_TYPE",
    "ENTRY_VALUES",
    "MAX_FLAT_ENTRIES",
    "DirLayout",
    "Entry",
    "FlatDir",
    "HasStoreRoot",
    "Refusal",
    "ShardedDir",
    "WorkingTree",
    "decode_dir",
    "decode_dir_block",
    "encode_dir",
    "lookup",
    "read_dir",
    "to_unixfs_dir",
    "write_dir",
]

DIR_TYPE: Final = "kuro.fs/dir"
_DIR_VERSION: Final = 1
#: The most entries a directory holds in one flat block; with more it is sharded.
MAX_FLAT_ENTRIES: Final = 256


class Entry(NamedTuple):
    """A directory entry: the child's root ``cid`` and ``size`` (file bytes; 0 for a directory)."""

    cid: str
    size: int

    @property
    def kind(self) -> str:
        """``"dir"`` for a dag-cbor child (named by any hash kuro_fs reads), else ``"file"``."""
        return "dir" if codec_is(self.cid, "dag-cbor") else "file"


@dataclass(frozen=True, slots=True)
class DirLayout:
    """When a directory is sharded (more than ``max_flat`` entries) and the HashMap ``shape`` it then takes.

    Part of the format, like a file's chunk size: another layout writes other CIDs for the
    same tree. Tests use small values to cross the threshold with few entries.
    Raises ValueError: ``max_flat`` not an int ≥ 0.
    """

    max_flat: int = MAX_FLAT_ENTRIES
    shape: Shape = field(default_factory=Shape)

    def __post_init__(self) -> None:
        if type(self.max_flat) is not int or self.max_flat < 0:
            raise ValueError(f"max_flat must be an int ≥ 0, got {self.max_flat!r}")


@dataclass(frozen=True, slots=True)
class FlatDir:
    """A decoded flat directory block (its mapping is never changed)."""

    entries: Mapping[str, Entry]


@dataclass(frozen=True, slots=True)
class ShardedDir:
    """A decoded sharded directory block: the HashMap ``root`` node and its ``shape``."""

    root: Node
    shape: Shape


DirBlock = FlatDir | ShardedDir


# ---- canonical bytes (written out: a directory is re-encoded on every write through it)


_TYPE: Final = b"\x64type\x6bkuro.fs/dir"
_VERSION: Final = b"\x67version\x01"


@functools.lru_cache(maxsize=65536)
def _name(name: str) -> tuple[tuple[int, bytes], bytes]:
    # A map key's canonical sort key (UTF-8 length first) and its encoding.
    try:
        data = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DagCborError(f"cannot encode entry name {name!r}: not valid Unicode") from exc
    return (len(data), data), cbor_head(3, len(data)) + data


def _entry_bytes(entry: Entry) -> bytes:
    if type(entry.size) is not int or entry.size < 0 or type(entry.cid) is not str:
        raise DagCborError(f"entry size must be a non-negative int and cid a str, got {entry!r}")
    return _entry_raw(entry.cid, entry.size)


@functools.lru_cache(maxsize=65536)
def _entry_raw(cid: str, size: int) -> bytes:
    # Memoised: a directory re-encoded after a one-entry edit meets its other entries again.
    try:
        return b"\xa2\x63cid" + link_bytes(cid) + b"\x64size" + cbor_head(0, size)
    except InvalidCID as exc:
        raise DagCborError(f"entry cid {cid!r} is not a CID of kuro's profile") from exc


def encode_dir(entries: Mapping[str, Entry]) -> bytes:
    """The flat dag-cbor block of a kuro.fs directory holding ``entries`` (of any number).

    Raises DagCborError: a name that is not valid Unicode, a bad CID or size.
    """
    items = sorted(((*_name(name), entry) for name, entry in entries.items()), key=lambda item: item[0])
    body = [_TYPE, b"\x67entries", cbor_head(5, len(items))]
    for _, raw, entry in items:
        body += (raw, _entry_bytes(entry))
    body.append(_VERSION)
    return b"\xa3" + b"".join(body)


def _encode_sharded(root: Node, shape: Shape) -> bytes:
    return b"\xa3" + _TYPE + b"\x65shard" + encode_root(root, shape) + _VERSION


def _entry_from(item: Any, name: object) -> Entry:
    if not isinstance(item, dict) or set(item) != {"cid", "size"}:
        raise DagCborError(f"entry {name!r}: expected keys cid, size")
    cid, size = item["cid"], item["size"]
    if not isinstance(cid, dagcbor.Link) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise DagCborError(f"entry {name!r}: cid must be a link and size a non-negative int")
    if parse(cid.cid).codec == "dag-cbor" and size != 0:
        raise DagCborError(f"entry {name!r}: a directory has size 0")
    return Entry(cid.cid, size)


def _key_ok(key: bytes) -> bool:
    try:
        return stored_name_ok(key.decode("utf-8"))
    except UnicodeDecodeError:
        return False


#: How a kuro.fs HashMap's keys (UTF-8 names) and values (entry maps) are checked and encoded.
ENTRY_VALUES: Final = Values(encode=_entry_bytes, decode=lambda item: _entry_from(item, "(in a shard)"), key_ok=_key_ok)


def decode_dir_block(block: bytes) -> FlatDir | ShardedDir:
    """The decoded directory ``block``, flat or sharded (a sharded one's root node checked, children not read).

    Raises DagCborError: if the block is not a well-formed kuro.fs directory (wrong type/version,
    extra keys, a bad name, a non-link cid, a negative size, a HashMap of other parameters).
    """
    value = dagcbor.decode(block)
    if not isinstance(value, dict) or value.get("type") != DIR_TYPE or value.get("version") != _DIR_VERSION:
        raise DagCborError(f"not a kuro.fs directory v{_DIR_VERSION}")
    if set(value) == {"entries", "type", "version"} and isinstance(value["entries"], dict):
        out: dict[str, Entry] = {}
        for name, item in value["entries"].items():
            if not stored_name_ok(name):
                raise DagCborError(f"bad entry name {name!r} in a kuro.fs directory")
            out[name] = _entry_from(item, name)
        return FlatDir(out)
    if set(value) != {"shard", "type", "version"}:
        raise DagCborError("not a kuro.fs directory: expected keys entries (or shard), type, version")
    shard = value["shard"]
    if not isinstance(shard, dict) or set(shard) != {"bucketSize", "hamt", "hashAlg"}:
        raise DagCborError("a kuro.fs shard is a HashMapRoot: bucketSize, hamt, hashAlg")
    if shard["hashAlg"] != HASH_ALG:
        raise DagCborError(f"a kuro.fs shard hashes its keys with sha2-256 (0x12), not {shard['hashAlg']!r}")
    root = node_from_data(shard["hamt"], ENTRY_VALUES)
    try:
        shape = Shape(root.width, shard["bucketSize"])
    except ValueError as exc:
        raise DagCborError(f"a kuro.fs shard of unsupported shape: {exc}") from exc
    Hamt(shape, ENTRY_VALUES, _no_children).check(root, 0, 0)
    if _encode_sharded(root, shape) != block:
        raise DagCborError("a kuro.fs shard that does not re-encode to its own bytes")
    return ShardedDir(root, shape)


def _no_children(cid: str, depth: int, prefix: int) -> Node:
    raise AssertionError("checking a node reads no child")


def decode_dir(block: bytes) -> dict[str, Entry]:
    """The entries of a flat kuro.fs directory block.

    Raises DagCborError: if the block is not a well-formed flat kuro.fs directory (a sharded
    one included: its entries are in other blocks — :func:`read_dir` reads those).
    """
    decoded = decode_dir_block(block)
    if not isinstance(decoded, FlatDir):
        raise DagCborError("a sharded kuro.fs directory: its entries are in other blocks (use read_dir)")
    return dict(decoded.entries)


# ---- reading through the cache


class _Malformed(DagCborError):
    """A directory or HashMap node block that does not decode as one (``cid`` names it)."""

    def __init__(self, cid: str, detail: str) -> None:
        super().__init__(f"block {cid}: {detail}")
        self.cid = cid


def _decode_node(block: bytes, shape: Shape) -> Node:
    node = node_from_data(dagcbor.decode(block), ENTRY_VALUES)
    if node.width != shape.bit_width or encode_node(node, shape) != block:
        raise DagCborError("a HashMap node of another width, or not in canonical form")
    return node


class _Reader:
    """Reads directory blocks and HashMap nodes of one store through one cache."""

    def __init__(self, store: BlockStore, cache: DirCache) -> None:
        self.store = store
        self.cache = cache
        #: Every block this reader loaded (a write's commit demotes them: see :meth:`WorkingTree.commit`).
        self.loaded: list[str] = []

    def dir(self, cid: str) -> FlatDir | ShardedDir:
        self.loaded.append(cid)
        try:
            value = load_verified(self.store, cid, self.cache, decode_dir_block, (FlatDir, ShardedDir))
        except (DagCborError, InvalidCID) as exc:
            raise _Malformed(cid, str(exc)) from exc
        assert isinstance(value, (FlatDir, ShardedDir))
        return value

    def hamt(self, shape: Shape) -> Hamt:
        def load(cid: str, depth: int, prefix: int) -> Node:
            self.loaded.append(cid)
            try:
                node = load_verified(self.store, cid, self.cache, lambda b: _decode_node(b, shape), Node)
                hamt.check(node, depth, prefix)
            except (DagCborError, InvalidCID) as exc:
                raise _Malformed(cid, str(exc)) from exc
            return node

        hamt = Hamt(shape, ENTRY_VALUES, load)
        return hamt


def read_dir(store: BlockStore, cid: str, cache: DirCache | None = None) -> dict[str, Entry]:
    """Every entry of the kuro.fs directory ``cid`` (flat or sharded), read through ``cache`` (default: shared).

    Raises MissingBlock / CorruptBlock: a block is absent or does not hash to its CID.
    Raises DagCborError: a block is not a well-formed directory or HashMap node.
    """
    reader = _Reader(store, SHARED if cache is None else cache)
    return dict(WorkDir(reader, DirLayout(), reader.dir(cid)).items())


class _Recording:
    """A store over ``get`` alone that remembers every block it hands out (for :func:`lookup`)."""

    def __init__(self, get: Callable[[str], bytes | None]) -> None:
        self._get = get
        self.read: list[tuple[str, bytes]] = []

    def get(self, cid: str) -> bytes | None:
        block = self._get(cid)
        if block is not None:
            self.read.append((cid, block))
        return block

    def has(self, cid: str) -> bool:
        return self._get(cid) is not None


def lookup(get: Callable[[str], bytes | None], block: bytes, name: str) -> tuple[Entry | None, list[tuple[str, bytes]]]:
    """``name`` in the kuro.fs directory ``block`` (flat or sharded): its entry (None if absent), and the
    HashMap node blocks read on the way, in order — one node a level, never the whole map; none for a
    flat directory. What a trustless gateway sends to prove a path through a sharded directory.

    Each node comes through ``get`` and is checked against its CID and its place in the map before
    it is believed. Raises MissingBlock: a node on the way is absent; CorruptBlock: a node does not
    hash to its CID; DagCborError: ``block`` or a node is not a well-formed kuro.fs directory / node.
    """
    store = _Recording(get)
    reader = _Reader(store, DirCache(0))  # type: ignore[arg-type]
    entry = WorkDir(reader, DirLayout(), decode_dir_block(block)).get(name)
    return entry, store.read


def write_dir(
    store: BlockStore,
    entries: Mapping[str, Entry],
    layout: DirLayout | None = None,
    *,
    put_blocks: Callable[[Sequence[bytes]], object] | None = None,
) -> str:
    """Store a directory holding ``entries`` in its canonical layout; return its CID.

    ``put_blocks``, if given, stores the directory's new dag-cbor blocks (in any order, e.g. on
    several threads) instead of one ``store.put`` each; they are all stored when it returns.

    Raises DagCborError: a bad name, CID or size.
    """
    for name in entries:
        if not stored_name_ok(name):
            raise DagCborError(f"bad entry name {name!r} for a kuro.fs directory")
    tree = WorkingTree(store, "", layout=layout)
    tree._top = _Slot(WorkDir(tree.reader, tree.layout, FlatDir(dict(entries))))
    tree._top.dirty = True
    return tree.commit(put_blocks)


# ---- one directory as an op sees it


class WorkDir:
    """One directory an op reads and maybe edits: the decoded block plus this op's edits (never shared ones)."""

    def __init__(self, reader: _Reader, layout: DirLayout, block: FlatDir | ShardedDir) -> None:
        self.reader = reader
        self.layout = layout
        self.flat: Mapping[str, Entry] | None = None
        self.owned = False  # is self.flat our own copy (free to change)?
        self.root: Node | None = None
        self.shape = layout.shape
        if isinstance(block, FlatDir):
            self.flat = block.entries
        else:
            self.root, self.shape = block.root, block.shape
        self._hamt: Hamt | None = None

    @property
    def hamt(self) -> Hamt:
        if self._hamt is None or self._hamt.shape != self.shape:
            self._hamt = self.reader.hamt(self.shape)
        return self._hamt

    def get(self, name: str) -> Entry | None:
        if self.flat is not None:
            return self.flat.get(name)
        assert self.root is not None
        found: Entry | None = self.hamt.get(self.root, name.encode("utf-8"))
        return found

    def items(self) -> Iterator[tuple[str, Entry]]:
        """Every (name, entry), in no particular order."""
        if self.flat is not None:
            yield from self.flat.items()
            return
        assert self.root is not None
        for key, entry in self.hamt.items(self.root):
            yield key.decode("utf-8"), entry

    def is_empty(self) -> bool:
        if self.flat is not None:
            return not self.flat
        assert self.root is not None
        return self.hamt.count_upto(self.root, 1) == 0

    def set(self, name: str, entry: Entry | None) -> None:
        """Bind (or, for None, remove) ``name``; the layout follows the entry count."""
        if self.flat is None and self.shape != self.layout.shape:  # a map of other parameters: once, again
            self._relayout(list(self.items()))
        if self.flat is not None:
            if not self.owned:
                self.flat, self.owned = dict(self.flat), True
            assert isinstance(self.flat, dict)
            if entry is None:
                self.flat.pop(name, None)
            else:
                self.flat[name] = entry
            if len(self.flat) > self.layout.max_flat:
                self._relayout(list(self.flat.items()))
            return
        assert self.root is not None
        key = name.encode("utf-8")
        if entry is None:
            self.root = self.hamt.delete(self.root, key)
        else:
            self.root = self.hamt.set(self.root, key, entry)
        if self._may_be_small() and self.hamt.count_upto(self.root, self.layout.max_flat + 1) <= self.layout.max_flat:
            self._relayout(list(self.items()))

    def _relayout(self, items: list[tuple[str, Entry]]) -> None:
        # The canonical layout for ``items`` under this tree's layout: flat up to max_flat, else sharded.
        if len(items) <= self.layout.max_flat:
            self.flat, self.owned, self.root = dict(items), True, None
        else:
            self.shape = self.layout.shape
            self.root = self.hamt.build((name.encode("utf-8"), entry) for name, entry in items)
            self.flat, self.owned = None, False

    def _may_be_small(self) -> bool:
        # A lower bound on the count from the root alone: every child holds more than bucketSize entries.
        assert self.root is not None
        bound = 0
        for elem in self.root.elems:
            bound += len(elem) if type(elem) is tuple else self.shape.bucket_size + 1
            if bound > self.layout.max_flat:
                return False
        return True

    def encode(self) -> tuple[bytes, list[tuple[str, bytes, object]], FlatDir | ShardedDir]:
        """(this directory's block, [(cid, block, decoded)] of the HashMap nodes to store first, its decoding)."""
        if self.flat is not None and len(self.flat) > self.layout.max_flat:  # a large flat block of an older root
            self._relayout(list(self.flat.items()))
        elif self.flat is None and self.shape != self.layout.shape:
            self._relayout(list(self.items()))
        if self.flat is not None:
            self.owned = False  # the mapping now belongs to the decoding handed out
            return encode_dir(self.flat), [], FlatDir(self.flat)
        assert self.root is not None
        root, children = self.hamt.flush(self.root)
        self.root = root
        return _encode_sharded(root, self.shape), [(c, b, n) for c, b, n in children], ShardedDir(root, self.shape)


# ---- the per-op working tree (no puts until commit)


class Refusal(Exception):
    """A denial decided inside a lookup (``reason`` from ``kuro_fs.fs.DENIAL_REASONS``); never escapes an op."""

    def __init__(self, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.extra = extra


class _Slot:
    """A directory of the working tree: its :class:`WorkDir`, the subdirectories loaded or made under it."""

    __slots__ = ("children", "dirty", "work")

    def __init__(self, work: WorkDir) -> None:
        self.work = work
        self.children: dict[str, _Slot] = {}
        self.dirty = False


class WorkingTree:
    """Directories loaded from one root, edited in memory; :meth:`commit` stores the changed ones.

    The loaded directories form a tree of their own (a trie by name), so a lookup, an edit
    and the commit each cost time linear in the path's depth. Every block read that fails —
    absent, corrupt, malformed — is a ``block-missing`` Refusal naming that block.
    """

    def __init__(
        self, store: BlockStore, root: str, cache: DirCache | None = None, layout: DirLayout | None = None
    ) -> None:
        self.store = store
        self.reader = _Reader(store, SHARED if cache is None else cache)
        self.layout = DirLayout() if layout is None else layout
        self.root = root
        self._top: _Slot | None = None

    def load(self, cid: str) -> WorkDir:
        """The directory ``cid`` (not attached to any path of this tree)."""
        try:
            return WorkDir(self.reader, self.layout, self.reader.dir(cid))
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc

    def _root(self) -> _Slot:
        if self._top is None:
            self._top = _Slot(self.load(self.root))
        return self._top

    def _walk(self, parts: tuple[str, ...], blocked: str, create: bool) -> _Slot | None:
        # Down from the root, loading what is not loaded yet; a missing directory is None, or made.
        slot = self._root()
        if create:
            slot.dirty = True
        for name in parts:
            child = slot.children.get(name)
            if child is None:
                entry = self.lookup(slot.work, name)
                if entry is None:
                    if not create:
                        return None
                    child = _Slot(WorkDir(self.reader, self.layout, FlatDir({})))
                elif entry.kind != "dir":
                    raise Refusal(blocked)
                else:
                    child = _Slot(self.load(entry.cid))
                slot.children[name] = child
            slot = child
            if create:
                slot.dirty = True
        return slot

    def dir(self, parts: tuple[str, ...], blocked: str) -> WorkDir | None:
        """The directory at ``parts`` (None if missing); a file on the way denies with ``blocked``.

        A loop, not recursion: a path may have thousands of segments (``MAX_PATH_BYTES``),
        more than Python's recursion limit.
        """
        slot = self._walk(parts, blocked, create=False)
        return None if slot is None else slot.work

    def lookup(self, work: WorkDir, name: str) -> Entry | None:
        """The entry ``name`` of ``work`` (a failing HashMap node is a Refusal)."""
        try:
            return work.get(name)
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc

    def entry(self, parts: tuple[str, ...], blocked: str = "not-a-directory") -> Entry | None:
        if not parts:
            return Entry(self.root, 0)
        parent = self.dir(parts[:-1], blocked)
        return None if parent is None else self.lookup(parent, parts[-1])

    def items(self, work: WorkDir) -> list[tuple[str, Entry]]:
        """Every entry of ``work``, sorted by name (a failing HashMap node is a Refusal)."""
        try:
            return sorted(work.items())
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc

    def is_empty(self, work: WorkDir) -> bool:
        try:
            return work.is_empty()
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc

    def set(self, parts: tuple[str, ...], entry: Entry | None) -> None:
        """Put (or remove, for None) the entry at ``parts``, creating missing parents."""
        parent = self._walk(parts[:-1], "path-blocked", create=True)
        assert parent is not None
        parent.children.pop(parts[-1], None)  # what was loaded there is no longer there
        try:
            parent.work.set(parts[-1], entry)
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc

    def make_dir(self, parts: tuple[str, ...]) -> None:
        """Create the (missing) directory ``parts`` and its missing parents."""
        self._walk(parts, "path-blocked", create=True)

    def commit(self, put_blocks: Callable[[Sequence[bytes]], object] | None = None) -> str:
        """Encode every changed directory (deepest first), then store them; return the new root.

        ``put_blocks`` stores the new blocks (dag-cbor) all at once instead of one ``store.put`` each.
        """
        top = self._top
        if top is None or not top.dirty:
            return self.root
        blocks: list[tuple[str, bytes, object]] = []
        # Post-order over an explicit stack: (slot, its name in the parent, the parent, children still to visit).
        stack: list[tuple[_Slot, str, _Slot | None, list[tuple[str, _Slot]]]] = [
            (top, "", None, [(n, c) for n, c in top.children.items() if c.dirty])
        ]
        root = self.root
        try:
            while stack:
                slot, name, parent, todo = stack[-1]
                if todo:
                    child_name, child = todo.pop()
                    stack.append((child, child_name, slot, [(n, c) for n, c in child.children.items() if c.dirty]))
                    continue
                stack.pop()
                block, children, own = slot.work.encode()
                blocks += children
                cid = cid_for(block, "dag-cbor")
                blocks.append((cid, block, own))
                if parent is None:
                    root = cid
                else:
                    parent.work.set(name, Entry(cid, 0))
        except (MissingBlock, CorruptBlock, _Malformed) as exc:
            raise Refusal("block-missing", cid=exc.cid) from exc
        cache = self.reader.cache
        # What this op loaded is (nearly all) the path it just replaced: those versions go first when
        # the cache is full, and the new ones (put below, most recently used) stay.
        cache.demote(self.reader.loaded)
        if put_blocks is not None:
            put_blocks([block for _, block, _ in blocks])
        for cid, block, decoded in blocks:
            if put_blocks is None:
                self.store.put(block, "dag-cbor")
            cache.put(cid, decoded, len(block))
        return root


class HasStoreRoot(Protocol):
    """Anything with a block ``store`` and a kuro.fs ``root`` (a :class:`~kuro_fs.fs.Fs`)."""

    @property
    def store(self) -> BlockStore: ...

    @property
    def root(self) -> str: ...


# ---- UnixFS export


def to_unixfs_dir(fs: HasStoreRoot) -> str:
    """Store the tree of ``fs`` as UnixFS dag-pb directories; return the root directory's CID.

    File CIDs are kept (they already are UnixFS); each directory becomes a UnixFS
    directory exactly as the JavaScript ``ipfs-unixfs-importer`` writes it for the
    same tree — flat, or a HAMT-sharded directory past its size threshold
    (:mod:`kuro_fs.unixfs_hamt`) — so any IPFS gateway can serve the root. A
    directory shared by several paths is converted once.

    Raises MissingBlock / CorruptBlock / DagCborError: the tree is incomplete or malformed.
    """
    reader = _Reader(fs.store, SHARED)

    def listing(cid: str) -> list[tuple[str, Entry]]:
        return sorted(WorkDir(reader, DirLayout(), reader.dir(cid)).items(), reverse=True)

    # Post-order over an explicit stack: a tree may be deeper than Python's recursion limit.
    # A frame is (directory CID, its name in the parent, entries still to convert, UnixFS links made so far).
    done: dict[str, tuple[str, int, bool]] = {}  # kuro.fs dir CID -> (UnixFS dir CID, Tsize, empty?)
    Frame = tuple[str, str, list[tuple[str, Entry]], list[tuple[str, str, int, bool]]]
    stack: list[Frame] = [(fs.root, "", listing(fs.root), [])]
    while True:
        cid, name, todo, links = stack[-1]
        if todo:
            child, entry = todo.pop()
            if entry.kind != "dir":
                links.append((child, entry.cid, file_root_info(fs.store.get, entry.cid).tsize, True))
            elif entry.cid in done:
                links.append((child, *done[entry.cid]))
            else:
                stack.append((entry.cid, child, listing(entry.cid), []))
            continue
        node_cid, tsize = unixfs_directory(links, fs.store.put)
        done[cid] = (node_cid, tsize, not links)
        stack.pop()
        if not stack:
            return node_cid
        stack[-1][3].append((name, *done[cid]))
