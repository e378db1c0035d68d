"""kuro.fs directories: the dag-cbor block shape, and the working tree an op edits before it stores anything.

## The one decision
A directory is one deterministic dag-cbor block::

    {"entries": {name: {"cid": Link, "size": int}}, "type": "kuro.fs/dir", "version": 1}

``size`` is the file's byte length (0 for a directory), so listing reads no
file block; an entry is a directory iff its CID is dag-cbor. Decoding is
strict: a block of any other shape is malformed (:class:`~kuro_fs.errors.DagCborError`).

An op never edits blocks in place: :class:`WorkingTree` loads the directories
on its path, edits them as dicts, and only :meth:`WorkingTree.commit` encodes
and stores the changed ones (deepest first). So every decision — including a
refusal found halfway down a path (:class:`Refusal`) — is made before the
first ``put``. :func:`to_unixfs_dir` re-encodes a tree as UnixFS directories.

## Pure
Blocks go through the injected store only.

## Not done here
Denial receipts and grants (:mod:`kuro_fs.fs`), HAMT shards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple, Protocol

from kuro_fs import dagcbor
from kuro_fs.blocks import BlockStore
from kuro_fs.cid import cid_for, parse
from kuro_fs.errors import CorruptBlock, DagCborError, InvalidCID
from kuro_fs.paths import clean_path
from kuro_fs.unixfs import MissingBlock, directory_node, file_root_info

__all__ = ["DIR_TYPE", "Entry", "HasStoreRoot", "Refusal", "WorkingTree", "decode_dir", "encode_dir", "to_unixfs_dir"]

DIR_TYPE: Final = "kuro.fs/dir"
_DIR_VERSION: Final = 1


class Entry(NamedTuple):
    """A directory entry: the child's root ``cid`` and ``size`` (file bytes; 0 for a directory)."""

    cid: str
    size: int

    @property
    def kind(self) -> str:
        """``"dir"`` for a dag-cbor child, else ``"file"``."""
        return "dir" if self.cid.startswith("bafyrei") else "file"


# ---- directory blocks


def encode_dir(entries: Mapping[str, Entry]) -> bytes:
    """The dag-cbor block of a kuro.fs directory holding ``entries``."""
    body = {name: {"cid": dagcbor.Link(e.cid), "size": e.size} for name, e in entries.items()}
    return dagcbor.encode({"entries": body, "type": DIR_TYPE, "version": _DIR_VERSION})


def decode_dir(block: bytes) -> dict[str, Entry]:
    """The entries of a kuro.fs directory block.

    Raises DagCborError: if the block is not a well-formed kuro.fs directory
    (wrong type/version, extra keys, a bad name, a non-link cid, a negative size).
    """
    value = dagcbor.decode(block)
    if not isinstance(value, dict) or set(value) != {"entries", "type", "version"}:
        raise DagCborError("not a kuro.fs directory: expected keys entries, type, version")
    if value["type"] != DIR_TYPE or value["version"] != _DIR_VERSION or not isinstance(value["entries"], dict):
        raise DagCborError(f"not a kuro.fs directory v{_DIR_VERSION}")
    out: dict[str, Entry] = {}
    for name, item in value["entries"].items():
        if clean_path(name) != (name,):
            raise DagCborError(f"bad entry name {name!r} in a kuro.fs directory")
        if not isinstance(item, dict) or set(item) != {"cid", "size"}:
            raise DagCborError(f"entry {name!r}: expected keys cid, size")
        cid, size = item["cid"], item["size"]
        if not isinstance(cid, dagcbor.Link) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise DagCborError(f"entry {name!r}: cid must be a link and size a non-negative int")
        if parse(cid.cid).codec == "dag-cbor" and size != 0:
            raise DagCborError(f"entry {name!r}: a directory has size 0")
        out[name] = Entry(cid.cid, size)
    return out


# ---- the per-op working tree (no puts until commit)


class Refusal(Exception):
    """A denial decided inside a lookup (``reason`` from ``kuro_fs.fs.DENIAL_REASONS``); never escapes an op."""

    def __init__(self, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.extra = extra


class WorkingTree:
    """Directories loaded from one root, edited in memory; :meth:`commit` stores the changed ones."""

    def __init__(self, store: BlockStore, root: str) -> None:
        self.store = store
        self.dirs: dict[tuple[str, ...], dict[str, Entry]] = {}
        self.dirty: set[tuple[str, ...]] = set()
        self.root = root

    def load(self, cid: str) -> dict[str, Entry]:
        try:
            block = self.store.get(cid)
            if block is None:
                raise Refusal("block-missing", cid=cid)
            return decode_dir(block)
        except (CorruptBlock, DagCborError, InvalidCID) as exc:
            raise Refusal("block-missing", cid=cid) from exc

    def dir(self, parts: tuple[str, ...], blocked: str) -> dict[str, Entry] | None:
        """The directory at ``parts`` (None if missing); a file on the way denies with ``blocked``.

        Walks down from the deepest directory already loaded, in a loop: a path may have
        thousands of segments (``MAX_PATH_BYTES``), more than Python's recursion limit.
        """
        depth = len(parts)
        while depth > 0 and parts[:depth] not in self.dirs:
            depth -= 1
        if depth == 0 and () not in self.dirs:
            self.dirs[()] = self.load(self.root)
        current = self.dirs[parts[:depth]]
        for i in range(depth, len(parts)):
            entry = current.get(parts[i])
            if entry is None:
                return None
            if entry.kind != "dir":
                raise Refusal(blocked)
            current = self.dirs[parts[: i + 1]] = self.load(entry.cid)
        return current

    def entry(self, parts: tuple[str, ...], blocked: str = "not-a-directory") -> Entry | None:
        if not parts:
            return Entry(self.root, 0)
        parent = self.dir(parts[:-1], blocked)
        return None if parent is None else parent.get(parts[-1])

    def _ensure(self, upto: tuple[str, ...]) -> None:
        # Mark every directory from the root down to ``upto`` changed, creating missing ones.
        for i in range(len(upto) + 1):
            prefix = upto[:i]
            if self.dir(prefix, "path-blocked") is None:
                self.dirs[prefix] = {}
                self.dirs[prefix[:-1]][prefix[-1]] = Entry("", 0)  # placeholder until commit
            self.dirty.add(prefix)

    def set(self, parts: tuple[str, ...], entry: Entry | None) -> None:
        """Put (or remove, for None) the entry at ``parts``, creating missing parents."""
        self._ensure(parts[:-1])
        target = self.dirs[parts[:-1]]
        self.dirs.pop(parts, None)
        if entry is None:
            del target[parts[-1]]
        else:
            target[parts[-1]] = entry

    def make_dir(self, parts: tuple[str, ...]) -> None:
        """Create the (missing) directory ``parts`` and its missing parents."""
        self._ensure(parts)

    def commit(self) -> str:
        """Encode every changed directory (deepest first), then store them; return the new root."""
        blocks: list[bytes] = []
        root = self.root
        for parts in sorted(self.dirty, key=len, reverse=True):
            block = encode_dir(self.dirs[parts])
            blocks.append(block)
            cid = cid_for(block, "dag-cbor")
            if parts:
                self.dirs[parts[:-1]][parts[-1]] = Entry(cid, 0)
            else:
                root = cid
        for block in blocks:
            self.store.put(block, "dag-cbor")
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

    File CIDs are kept (they already are UnixFS); each directory becomes a flat
    UnixFS directory with links sorted by name and cumulative Tsizes, so any
    IPFS gateway can serve the root.

    Raises ShardingNotSupported: a directory too large for one block.
    Raises MissingBlock / CorruptBlock / DagCborError: the tree is incomplete or malformed.
    """

    def listing(cid: str) -> dict[str, Entry]:
        block = fs.store.get(cid)
        if block is None:
            raise MissingBlock(cid)
        return decode_dir(block)

    # Post-order over an explicit stack: a tree may be deeper than Python's recursion limit.
    # A frame is (directory CID, its name in the parent, entries still to convert, UnixFS links made so far).
    done: dict[str, tuple[str, int]] = {}  # kuro.fs dir CID -> (UnixFS dir CID, Tsize): shared subtrees once
    Frame = tuple[str, str, list[tuple[str, Entry]], list[tuple[str, str, int]]]
    stack: list[Frame] = [(fs.root, "", sorted(listing(fs.root).items(), reverse=True), [])]
    while True:
        cid, name, todo, links = stack[-1]
        if todo:
            child, entry = todo.pop()
            if entry.kind != "dir":
                links.append((child, entry.cid, file_root_info(fs.store.get, entry.cid).tsize))
            elif entry.cid in done:
                links.append((child, *done[entry.cid]))
            else:
                stack.append((entry.cid, child, sorted(listing(entry.cid).items(), reverse=True), []))
            continue
        node, tsize = directory_node(links)
        done[cid] = (fs.store.put(node, "dag-pb"), tsize)
        stack.pop()
        if not stack:
            return done[cid][0]
        stack[-1][3].append((name, *done[cid]))
