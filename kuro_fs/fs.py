"""kuro.fs: the immutable filesystem value ``Fs(store, root)`` and its capability-gated operations.

## The one decision
The whole tree is one root CID, and every operation returns the same shape,
``FsResult(fs, value, receipt)``, whether it did the work or refused it. A
refusal is a value (``kuro.fs/type`` = ``kuro.fs/denied`` with a
``kuro.fs/reason`` from :data:`DENIAL_REASONS`), never an exception, because
guests drive these operations and a guest must not be able to crash its host
with a path. Each op *decides everything before its first* ``put``: a denied
write stores no block and keeps the root, so nothing left in the store can be
mistaken for success. Writes return a new ``Fs``; the old value (and its root)
stays valid, and :attr:`Fs.history` lists prior roots for :meth:`Fs.checkout`.

Files are UnixFS file DAGs (:mod:`kuro_fs.unixfs`: raw leaves, balanced).
A directory is a deterministic dag-cbor block, flat while it has at most 256
entries and an IPLD HashMap beyond (:mod:`kuro_fs.fsdir`, whose names this
module re-exports)::

    {"entries": {name: {"cid": Link, "size": int}}, "type": "kuro.fs/dir", "version": 1}

``size`` is the file's byte length (0 for a directory), so ``ls``/``stat`` read
no file block; an entry is a directory iff its CID is dag-cbor. The empty
directory is one block, so an empty ``Fs`` has a root too. An op on one entry
of a directory of n entries reads and writes O(log n) blocks, and a directory
block is decoded once per process (:mod:`kuro_fs.dircache`), not once per op.

Check order: ``bad-path`` → ``bytes-required``/``bad-range`` → grant
(``missing-capability`` + ``kuro.fs/missing``) → op-specific. A block the store
lacks, or one that is corrupt (``CorruptBlock``) or malformed, is
``block-missing`` with ``kuro.fs/cid`` naming that block. A store that itself
fails (any other ``BlockStoreError``, e.g. an I/O error or a closed store)
raises: that is a broken host, not a refusal.

A DAG may share subtrees (``{a: d, b: d}``), so a tree of 20 blocks can hold
2^18 paths, and a file of a few blocks can claim terabytes. Every walk and
whole read (and :meth:`Fs.stream`, which reads a file of any size a block
at a time) therefore has a :class:`Budget` (entries listed, bytes
materialised): past it the op is refused ``over-budget`` with
``kuro.fs/budget`` naming the limit, before anything is materialised past it.
The defaults are above any tree a session builds (a walk of 500,000 entries,
a whole read of 4 GiB). Exports by CID (:func:`to_unixfs_dir`, CAR) visit each
block once and need no budget.

## Pure
Only the injected store is touched, and the decoded-directory cache
(:mod:`kuro_fs.dircache`), which holds only decodings of hash-verified bytes
and so changes no answer. No clock.

## Not done here
No persistence of named roots (the CLI's job), no recursive rm, no symlinks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import parse
from kuro_fs.dircache import DirCache
from kuro_fs.errors import CorruptBlock, DagCborError, DagPbError, FileTooDeep, InvalidCID
from kuro_fs.fileread import read_bytes, stream_file
from kuro_fs.fsdir import (
    DIR_TYPE,
    DirLayout,
    Entry,
    Refusal,
    WorkDir,
    WorkingTree,
    decode_dir,
    encode_dir,
    to_unixfs_dir,
    write_dir,
)
from kuro_fs.paths import MAX_PATH_BYTES, clean_path, join_path, names_a_directory
from kuro_fs.unixfs import DEFAULT_CHUNK_SIZE, DEFAULT_WIDTH, MissingBlock, file_root_info
from kuro_fs.unixfs import write_file as _write_file

__all__ = [
    "CAPABILITIES",
    "DEFAULT_GRANT",
    "DENIAL_REASONS",
    "DIR_TYPE",
    "OP_CAPABILITIES",
    "RECEIPT_KEYS",
    "Budget",
    "DirLayout",
    "Entry",
    "Fs",
    "FsLog",
    "FsResult",
    "decode_dir",
    "encode_dir",
    "to_unixfs_dir",
]

#: Every ``kuro.fs/reason`` a denial can carry, and what it means.
DENIAL_REASONS: Final[Mapping[str, str]] = {
    "bad-path": "the path is not a string, empty, has a control character (NUL, C0, DEL, C1), a '..' or "
    "whitespace-only segment, or is too long; or mv of a dir into itself, or to where a path below it would be "
    "too long",
    "bytes-required": "a write payload that is not bytes, bytearray or memoryview",
    "bad-range": "read_range offset/length not a non-negative int",
    "missing-capability": "the grant lacks the capability in kuro.fs/missing",
    "not-found": "no entry at the path (or rm/mv of the root)",
    "not-a-directory": "a file sits where a directory is read (ls, walk, an ancestor in a lookup), "
    "a path ending in '/' names a file or would put one, or link of a dag-cbor CID that is not a kuro.fs directory",
    "not-a-file": "read of a directory, or link of a raw/dag-pb CID that is not a UnixFS file root",
    "is-a-directory": "write or mv onto a directory",
    "path-blocked": "a file sits where write/mkdir/mv needs a directory, or mkdir onto a file",
    "directory-not-empty": "rm of a directory that has entries",
    "block-missing": "a block the DAG names is absent, corrupt or malformed (kuro.fs/cid names it)",
    "over-budget": "a walk would list more entries, or a read return more bytes, than the Fs budget "
    "allows, or a file's DAG nests deeper than a read follows (kuro.fs/budget names the limit: entries, "
    "bytes or depth); a subtree shared by several paths counts once per path",
}
CAPABILITIES: Final = ("fs/ls", "fs/publish", "fs/read", "fs/rm", "fs/write")
DEFAULT_GRANT: Final = frozenset(CAPABILITIES)
#: Capabilities each op needs (all of them); no op needs ``fs/publish``; ``fs/write`` implies no read.
OP_CAPABILITIES: Final[Mapping[str, tuple[str, ...]]] = {
    "ls": ("fs/ls",),
    "stat": ("fs/ls",),
    "walk": ("fs/ls",),
    "read": ("fs/read",),
    "read-range": ("fs/read",),
    "write": ("fs/write",),
    "link": ("fs/write",),
    "mkdir": ("fs/write",),
    "rm": ("fs/rm",),
    "mv": ("fs/write", "fs/rm"),
}
#: The closed receipt vocabulary; every receipt has type, op, path and root-cid.
RECEIPT_KEYS: Final = (
    "kuro.fs/type",
    "kuro.fs/op",
    "kuro.fs/path",
    "kuro.fs/to",
    "kuro.fs/reason",
    "kuro.fs/missing",
    "kuro.fs/cid",
    "kuro.fs/size",
    "kuro.fs/offset",
    "kuro.fs/entries",
    "kuro.fs/budget",
    "kuro.fs/root-cid",
)


@dataclass(frozen=True, slots=True)
class Budget:
    """How much one walk may list (``entries``) and one whole read may return (``bytes``).

    Raises ValueError: a limit that is not a non-negative int.
    """

    entries: int = 500_000
    bytes: int = 4 << 30

    def __post_init__(self) -> None:
        for name in ("entries", "bytes"):
            if not _is_count(getattr(self, name)):
                raise ValueError(f"budget {name} must be a non-negative int, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True, eq=False)
class FsLog:
    """Prior roots as a shared-tail list, newest first: recording one more root is O(1), whatever the length."""

    root: str
    prev: FsLog | None = None

    def roots(self) -> tuple[str, ...]:
        """Every root in the log, oldest first."""
        out: list[str] = []
        node: FsLog | None = self
        while node is not None:
            out.append(node.root)
            node = node.prev
        return tuple(reversed(out))

    def __contains__(self, root: object) -> bool:
        node: FsLog | None = self
        while node is not None:
            if node.root == root:
                return True
            node = node.prev
        return False


class FsResult(NamedTuple):
    """What every op returns: the (possibly new) ``fs``, the ``value`` (None on denial), the ``receipt``."""

    fs: Fs
    value: Any
    receipt: dict[str, Any]

    @property
    def ok(self) -> bool:
        """True for an accepted op."""
        return bool(self.receipt["kuro.fs/type"] == "kuro.fs/receipt")


# ---- receipts


def _shown(path: object) -> str:
    # The path as the caller passed it, made encodable in JSON/dag-cbor (lone surrogates escaped).
    if isinstance(path, str):
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(path)


#: (bare key, receipt key) in :data:`RECEIPT_KEYS`' order: every op's receipt is built in it.
_RECEIPT_ORDER: Final = tuple((key.removeprefix("kuro.fs/"), key) for key in RECEIPT_KEYS)


def _receipt(kind: str, op: str, path: object, **extra: Any) -> dict[str, Any]:
    data = {"type": kind, "op": op, "path": _shown(path), **extra}
    out = {key: data[bare] for bare, key in _RECEIPT_ORDER if bare in data}
    if len(out) != len(data):
        raise AssertionError(f"receipt keys outside RECEIPT_KEYS: {sorted(set(data) - set(out))}")
    return out


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_NO_DST: Final = object()


# ---- the filesystem value


@dataclass(frozen=True, repr=False)
class Fs:
    """An immutable filesystem: a block ``store`` and the ``root`` CID of a kuro.fs directory.

    ``grant`` (default: every capability) gates the ops; ``log`` (shown as :attr:`history`) holds the
    roots this value was derived from, oldest first. Writes return new values. ``chunk_size`` and
    ``width`` shape the files it writes, ``layout`` the directories (both decide CIDs); ``budget``
    bounds walks and whole reads; ``cache`` holds decoded directory blocks (default: the process's
    shared :data:`kuro_fs.dircache.SHARED`).

    Raises InvalidCID: if ``root`` is not a dag-cbor CID. Raises ValueError: on
    an unknown capability or a bad chunk size / width.
    """

    store: BlockStore
    root: str
    grant: frozenset[str] | None = None
    log: FsLog | None = field(default=None, compare=False)
    chunk_size: int = DEFAULT_CHUNK_SIZE
    width: int = field(default=DEFAULT_WIDTH)
    layout: DirLayout = field(default_factory=DirLayout)
    budget: Budget = field(default_factory=Budget)
    cache: DirCache | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if parse(self.root).codec != "dag-cbor":
            raise InvalidCID(f"a kuro.fs root is a dag-cbor directory CID, got {self.root}")
        grant = DEFAULT_GRANT if self.grant is None else frozenset(self.grant)
        unknown = sorted(grant - DEFAULT_GRANT)
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}; known: {list(CAPABILITIES)}")
        object.__setattr__(self, "grant", grant)
        if self.chunk_size < 1 or self.width < 2:
            raise ValueError("chunk_size must be ≥ 1 and width ≥ 2")
        if not isinstance(self.layout, DirLayout) or not isinstance(self.budget, Budget):
            raise ValueError("layout must be a DirLayout and budget a Budget")

    def __repr__(self) -> str:
        grant = sorted(self._grant)
        return f"Fs(root={self.root!r}, grant={grant}, history={len(self.history)} roots)"

    @property
    def history(self) -> tuple[str, ...]:
        """The roots this value was derived from, oldest first (not including :attr:`root`)."""
        return () if self.log is None else self.log.roots()

    @classmethod
    def empty(cls, store: BlockStore, grant: Iterable[str] | None = None) -> Fs:
        """A filesystem holding one empty directory (its block is stored in ``store``)."""
        root = write_dir(store, {})
        return cls(store, root, None if grant is None else frozenset(grant))

    # ---- values

    def with_grant(self, caps: Iterable[str]) -> Fs:
        """This filesystem with its grant narrowed to ``caps`` (never widened). Raises ValueError."""
        wanted = frozenset(caps)
        unknown = sorted(wanted - DEFAULT_GRANT)
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}; known: {list(CAPABILITIES)}")
        return _replace(self, grant=self._grant & wanted)

    def with_budget(self, entries: int | None = None, bytes: int | None = None) -> Fs:
        """This filesystem with the walk (``entries``) and/or whole-read (``bytes``) budget replaced.

        Raises ValueError: a limit that is not a non-negative int.
        """
        now = self.budget
        return _replace(
            self, budget=Budget(now.entries if entries is None else entries, now.bytes if bytes is None else bytes)
        )

    def with_store(self, store: BlockStore) -> Fs:
        """This filesystem read and written through ``store``: the same root, grant, history, shape, budget and
        cache (``store`` holds the same blocks — a wrapper, as a run's store that checks its deadline before
        each block). No field this value's checks covered changes, so none is checked again (a run makes one:
        ``dataclasses.replace`` re-parsed the root and re-checked the grant, ~3x the cost)."""
        fs = object.__new__(type(self))
        fs.__dict__.update(self.__dict__)
        fs.__dict__["store"] = store
        return fs

    def checkout(self, root: str) -> Fs:
        """The filesystem at ``root``, one of :attr:`history` (or the current root).

        The current root is appended to the history, so a checkout can be undone too.
        Raises ValueError: if ``root`` is not in this value's history.
        """
        if root == self.root:
            return self
        if self.log is None or root not in self.log:
            raise ValueError(f"{root} is not a root in this filesystem's history")
        return _replace(self, root=root, log=FsLog(self.root, self.log))

    @property
    def _grant(self) -> frozenset[str]:
        return self.grant if self.grant is not None else DEFAULT_GRANT

    def _advance(self, root: str) -> Fs:
        return self if root == self.root else _replace(self, root=root, log=FsLog(self.root, self.log))

    # ---- the op frame

    def _run(self, op: str, path: object, body: Callable[[_Op], FsResult], dst: object) -> FsResult:
        extra: dict[str, Any] = {} if dst is _NO_DST else {"to": _shown(dst)}
        try:
            parts = clean_path(path)
            dparts = None if dst is _NO_DST else clean_path(dst)
            if parts is None or (dst is not _NO_DST and dparts is None):
                raise Refusal("bad-path")
            assert isinstance(path, str)
            tree = WorkingTree(self.store, self.root, self.cache, self.layout)
            dst_wants_dir = isinstance(dst, str) and names_a_directory(dst)
            return body(_Op(tree, parts, names_a_directory(path), dparts, dst_wants_dir))
        except Refusal as deny:
            reason = deny.reason
            more = dict(deny.extra)
        except (MissingBlock, CorruptBlock) as exc:
            reason, more = "block-missing", {"cid": exc.cid}
        more["root-cid"] = self.root
        return FsResult(self, None, _receipt("kuro.fs/denied", op, path, **extra, reason=reason, **more))

    def _need(self, op: str) -> None:
        for cap in OP_CAPABILITIES[op]:
            if cap not in self._grant:
                raise Refusal("missing-capability", missing=cap)

    def _ok(self, op: str, path: object, value: Any, fs: Fs | None = None, **extra: Any) -> FsResult:
        fs = fs or self
        return FsResult(fs, value, _receipt("kuro.fs/receipt", op, path, **extra, **{"root-cid": fs.root}))

    def _file_bytes(self, entry: Entry, offset: int = 0, length: int | None = None) -> bytes:
        # The directory entry's size and the file DAG must agree, or the answer could be wrong
        # (e.g. bytes past the size the directory names): a disagreement is block-missing.
        try:
            data = read_bytes(self.store, entry.cid, offset, length, size=entry.size)
            if length == 0 and file_root_info(self.store.get, entry.cid).size != entry.size:
                raise Refusal("block-missing", cid=entry.cid)  # an empty range fetched nothing: check the root
        except FileTooDeep as exc:
            raise Refusal("over-budget", cid=entry.cid, budget={"depth": exc.depth}) from exc
        except DagPbError as exc:
            raise Refusal("block-missing", cid=entry.cid) from exc
        return data

    def _file(self, op: _Op) -> Entry:
        # The file at op's path: a directory there is not-a-file, a trailing '/' on a file not-a-directory.
        entry = _existing(op)
        if entry.kind == "dir":
            raise Refusal("not-a-file")
        return entry

    # ---- reads

    def read(self, path: object) -> FsResult:
        """The whole file at ``path`` as bytes. Receipt: ``cid`` (file root), ``size``.

        Denials: bad-path, missing-capability, not-found, not-a-directory, not-a-file, block-missing,
        over-budget (the file is larger than ``budget.bytes``: receipt ``size`` is its size,
        ``budget`` the limit; nothing is read).
        """

        def body(op: _Op) -> FsResult:
            self._need("read")
            entry = self._file(op)
            if entry.size > self.budget.bytes:
                raise Refusal("over-budget", cid=entry.cid, size=entry.size, budget={"bytes": self.budget.bytes})
            data = self._file_bytes(entry)
            return self._ok("read", path, data, cid=entry.cid, size=len(data))

        return self._run("read", path, body, _NO_DST)

    def stream(self, path: object) -> FsResult:
        """The whole file at ``path`` as an iterator of pieces (bytes or memoryviews), read a window at a time.

        For a file too large to hold in memory (``kuro fs cat``/``get``): nothing is read until the
        iterator is, and then one window (:data:`kuro_fs.fileread.STREAM_WINDOW`) at a time (a subtree
        linked again is copied, not walked: :func:`kuro_fs.fileread.stream_file`). Decided before the
        first piece, as :meth:`read`:
        the denials of :meth:`read` (over-budget for a file larger than ``budget.bytes``, receipt
        ``size`` its size), and block-missing for a root block that is absent, malformed, or covers
        another size than its directory entry names. The pieces are then exactly ``size`` bytes:
        every File node's sizes are checked against its parent's on the way, so a DAG cannot yield
        more than its entry claims. Receipt: ``cid``, ``size``.

        Iterating raises MissingBlock, CorruptBlock (a leaf absent or failing its hash part-way) or
        DagPbError (a node below the root that disagrees with its parent).
        """

        def body(op: _Op) -> FsResult:
            self._need("read")
            entry = self._file(op)
            if entry.size > self.budget.bytes:
                raise Refusal("over-budget", cid=entry.cid, size=entry.size, budget={"bytes": self.budget.bytes})
            try:
                claimed = file_root_info(self.store.get, entry.cid).size
            except DagPbError as exc:
                raise Refusal("block-missing", cid=entry.cid) from exc
            if claimed != entry.size:
                raise Refusal("block-missing", cid=entry.cid)
            pieces: Iterator[bytes | memoryview] = stream_file(self.store, entry.cid, size=entry.size)
            return self._ok("read", path, pieces, cid=entry.cid, size=entry.size)

        return self._run("read", path, body, _NO_DST)

    def read_range(self, path: object, offset: object, length: object) -> FsResult:
        """Bytes ``[offset, offset+length)`` of the file at ``path``, fetching only the blocks needed.

        Past the end is short (or empty), as ``pread``. Receipt: ``cid``, ``size``
        (bytes returned), ``offset``. Denials: as :meth:`read`, plus bad-range, and
        over-budget for a ``length`` above ``budget.bytes``.
        """

        def body(op: _Op) -> FsResult:
            if not (_is_count(offset) and _is_count(length)):
                raise Refusal("bad-range")
            assert isinstance(offset, int) and isinstance(length, int)
            self._need("read-range")
            entry = self._file(op)
            if min(length, max(entry.size - offset, 0)) > self.budget.bytes:
                raise Refusal("over-budget", cid=entry.cid, size=entry.size, budget={"bytes": self.budget.bytes})
            data = self._file_bytes(entry, offset, length)
            return self._ok("read-range", path, data, cid=entry.cid, size=len(data), offset=offset)

        return self._run("read-range", path, body, _NO_DST)

    def stat(self, path: object) -> FsResult:
        """``{"kind", "size", "cid"}`` of the entry at ``path`` (the root is a dir). Reads no file block."""

        def body(op: _Op) -> FsResult:
            self._need("stat")
            entry = _existing(op)
            value = {"kind": entry.kind, "size": entry.size, "cid": entry.cid}
            return self._ok("stat", path, value, cid=entry.cid, size=entry.size)

        return self._run("stat", path, body, _NO_DST)

    def ls(self, path: object) -> FsResult:
        """The directory's entries sorted by name: ``[{"name", "kind", "size", "cid"}]``.

        Names are exact, as stored: a name written before control characters were refused
        may hold one, so print names through :func:`kuro_fs.paths.escape_name`.
        Receipt: ``cid`` (the directory), ``entries`` (count). Denials: bad-path,
        missing-capability, not-found, not-a-directory, block-missing.
        """

        def body(op: _Op) -> FsResult:
            self._need("ls")
            entry, work = _listing(op)
            listing = op.tree.items(work)
            value = [{"name": n, "kind": e.kind, "size": e.size, "cid": e.cid} for n, e in listing]
            return self._ok("ls", path, value, cid=entry.cid, entries=len(value))

        return self._run("ls", path, body, _NO_DST)

    def walk(self, path: object = ".") -> FsResult:
        """Every entry below the directory at ``path``, depth-first, sorted by name at each level.

        Value: ``[{"path", "kind", "size", "cid"}]`` with paths from the root. A directory
        reachable by several paths is listed under each. Denials: as :meth:`ls`, plus
        over-budget when the listing would pass ``budget.entries`` (``budget`` names the limit):
        the entries are counted first, reading each distinct directory once, so a DAG of a
        few blocks that names millions of paths is refused before any is listed.
        """

        def body(op: _Op) -> FsResult:
            self._need("walk")
            entry, work = _listing(op)
            tree, limit = op.tree, self.budget.entries
            if _entries_below(tree, entry.cid, limit) > limit:
                raise Refusal("over-budget", cid=entry.cid, budget={"entries": limit})
            out: list[dict[str, Any]] = []
            stack = [((*op.parts, n), e) for n, e in reversed(tree.items(work))]
            while stack:
                where, item = stack.pop()
                out.append({"path": join_path(where), "kind": item.kind, "size": item.size, "cid": item.cid})
                if item.kind == "dir":
                    below = tree.items(tree.load(item.cid))
                    stack.extend(((*where, n), e) for n, e in reversed(below))
            return self._ok("walk", path, out, cid=entry.cid, entries=len(out))

        return self._run("walk", path, body, _NO_DST)

    # ---- writes

    def write(self, path: object, data: object) -> FsResult:
        """Replace (or create) the file at ``path`` with ``data``; missing parents are created.

        Value: the file CID. Receipt: ``cid``, ``size``, ``root-cid`` (the new root).
        Denials: bad-path, bytes-required, missing-capability, is-a-directory,
        path-blocked, not-a-directory (a path ending in '/'), block-missing.
        Nothing is stored unless the write is accepted.
        """

        def body(op: _Op) -> FsResult:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise Refusal("bytes-required")
            try:
                payload = data if isinstance(data, bytes) else bytes(data)
            except ValueError as exc:  # a released memoryview
                raise Refusal("bytes-required") from exc
            self._need("write")
            _check_file_slot(op.tree, op.parts, op.wants_dir)
            froot = _write_file(self.store.put, payload, chunk_size=self.chunk_size, width=self.width)
            op.tree.set(op.parts, Entry(froot.cid, froot.size))
            fs = self._advance(op.tree.commit())
            return self._ok("write", path, froot.cid, fs, cid=froot.cid, size=froot.size)

        return self._run("write", path, body, _NO_DST)

    def link(self, path: object, cid: str) -> FsResult:
        """Bind the file or directory DAG ``cid`` (already in the store) at ``path``; missing parents are created.

        This is how an imported tree or file (:func:`~kuro_fs.importer.import_path`,
        :func:`~kuro_fs.car.import_car`) joins a filesystem without re-reading its bytes:
        only the root block of ``cid`` is read, to check what it is and learn a file's size.
        A file at ``path`` is replaced; a directory there is refused, as for :meth:`write`.

        Value: ``cid``. Receipt: ``cid``, ``size`` (file bytes; 0 for a directory), ``root-cid``.
        Denials: bad-path, missing-capability (fs/write), is-a-directory (``path`` is the root
        or a directory), path-blocked (a file above ``path``), block-missing (the root block
        of ``cid`` is absent or corrupt, or a directory on the way is), not-a-file (a raw or
        dag-pb ``cid`` that is not a UnixFS file root, e.g. a UnixFS directory), not-a-directory
        (a dag-cbor ``cid`` that is not a kuro.fs directory, or a file linked at a path ending
        in '/'). Nothing is stored unless accepted.

        Raises InvalidCID: ``cid`` is not a CID string of kuro's profile (misuse, not a refusal).
        """
        target = parse(cid)

        def body(op: _Op) -> FsResult:
            self._need("link")
            _check_file_slot(op.tree, op.parts, op.wants_dir and target.codec != "dag-cbor")
            entry = Entry(cid, _linked_size(op.tree, cid, target.codec))
            op.tree.set(op.parts, entry)
            fs = self._advance(op.tree.commit())
            return self._ok("link", path, cid, fs, cid=cid, size=entry.size)

        return self._run("link", path, body, _NO_DST)

    def mkdir(self, path: object) -> FsResult:
        """Create the directory ``path`` and missing parents; an existing directory is kept as is.

        Value: the directory's CID. Denials: bad-path, missing-capability,
        path-blocked (a file at or above ``path``), block-missing.
        """

        def body(op: _Op) -> FsResult:
            self._need("mkdir")
            tree, parts = op.tree, op.parts
            if not parts:
                return self._ok("mkdir", path, self.root, cid=self.root)
            parent = tree.dir(parts[:-1], "path-blocked")
            old = None if parent is None else tree.lookup(parent, parts[-1])
            if old is not None:
                if old.kind != "dir":
                    raise Refusal("path-blocked")
                return self._ok("mkdir", path, old.cid, cid=old.cid)
            tree.make_dir(parts)
            fs = self._advance(tree.commit())
            made = WorkingTree(self.store, fs.root, self.cache, self.layout).entry(parts)
            assert made is not None
            return self._ok("mkdir", path, made.cid, fs, cid=made.cid)

        return self._run("mkdir", path, body, _NO_DST)

    def rm(self, path: object) -> FsResult:
        """Remove the file or empty directory at ``path``. Value: the removed entry's CID.

        Denials: bad-path, missing-capability, not-found (also for the root),
        not-a-directory (also a file named with a trailing '/'), directory-not-empty, block-missing.
        """

        def body(op: _Op) -> FsResult:
            self._need("rm")
            if not op.parts:
                raise Refusal("not-found")
            entry = _existing(op)
            if entry.kind == "dir" and not op.tree.is_empty(op.tree.load(entry.cid)):
                raise Refusal("directory-not-empty")
            op.tree.set(op.parts, None)
            fs = self._advance(op.tree.commit())
            return self._ok("rm", path, entry.cid, fs, cid=entry.cid)

        return self._run("rm", path, body, _NO_DST)

    def mv(self, src: object, dst: object) -> FsResult:
        """Move the entry at ``src`` to ``dst`` (replacing a file there); missing parents are created.

        Value: the moved entry's CID. Receipt: ``to`` = ``dst``. Denials: bad-path
        (either path, a directory moved into itself, or a directory moved where a path below it
        would pass 4096 bytes), missing-capability
        (needs fs/write and fs/rm), not-found, not-a-directory (also a file moved
        from or to a path ending in '/'), is-a-directory (``dst`` is a directory),
        path-blocked (a file above ``dst``), block-missing.
        """
        return self._move(src, dst, check_below=True)

    def _move(self, src: object, dst: object, *, check_below: bool) -> FsResult:
        """:meth:`mv`; ``check_below=False`` (for :mod:`kuro_fs.overlay`'s commit, which checks the paths of its
        final tree itself: a staged swap may pass 4096 bytes on its way) skips the walk of a moved directory."""

        def body(op: _Op) -> FsResult:
            tree, parts, dparts = op.tree, op.parts, op.dparts
            assert dparts is not None
            self._need("mv")
            if not parts:
                raise Refusal("not-found")
            entry = _existing(op)
            file_into_dir = entry.kind != "dir" and op.dst_wants_dir
            if dparts == parts:
                if file_into_dir:
                    raise Refusal("not-a-directory")
                return self._ok("mv", src, entry.cid, to=_shown(dst), cid=entry.cid)
            if entry.kind == "dir" and dparts[: len(parts)] == parts:
                raise Refusal("bad-path")
            if not dparts:
                raise Refusal("is-a-directory")
            parent = tree.dir(dparts[:-1], "path-blocked")
            old = None if parent is None else tree.lookup(parent, dparts[-1])
            if old is not None and old.kind == "dir":
                raise Refusal("is-a-directory")
            if (old is not None and entry.kind == "dir") or file_into_dir:
                raise Refusal("not-a-directory")
            if entry.kind == "dir" and check_below:
                _fits_below(tree, entry, parts, dparts)
            tree.set(parts, None)
            tree.set(dparts, entry)
            fs = self._advance(tree.commit())
            return self._ok("mv", src, entry.cid, fs, to=_shown(dst), cid=entry.cid)

        return self._run("mv", src, body, dst)


def _path_bytes(parts: tuple[str, ...]) -> int:
    return len("/".join(parts).encode("utf-8"))


def _fits_below(tree: WorkingTree, entry: Entry, parts: tuple[str, ...], dparts: tuple[str, ...]) -> None:
    """Refuse (``bad-path``) moving directory ``entry`` from ``parts`` to ``dparts`` if a stored path below it
    would then pass :data:`~kuro_fs.paths.MAX_PATH_BYTES`: no kuro.fs call could name that file again.

    Every stored path was nameable, so only a move to a longer path can do it, and only such a move walks the
    moved subtree (a loop, not recursion).
    """
    if _path_bytes(dparts) <= _path_bytes(parts):
        return
    room = MAX_PATH_BYTES - _path_bytes(dparts)
    stack = [(entry.cid, 0)]
    while stack:
        cid, used = stack.pop()
        for name, child in tree.items(tree.load(cid)):
            below = used + 1 + len(name.encode("utf-8"))
            if below > room:
                raise Refusal("bad-path")
            if child.kind == "dir":
                stack.append((child.cid, below))


class _Op(NamedTuple):
    """What an op's body works on: the working tree, the path's segments and whether it ended in '/'."""

    tree: WorkingTree
    parts: tuple[str, ...]
    wants_dir: bool
    dparts: tuple[str, ...] | None
    dst_wants_dir: bool


def _replace(fs: Fs, **changes: Any) -> Fs:
    return replace(fs, **changes)


def _check_file_slot(tree: WorkingTree, parts: tuple[str, ...], wants_dir: bool) -> None:
    """Refuse a file at ``parts`` where it cannot go: the root, a directory, under a file, or a '/'-ended path."""
    if not parts:
        raise Refusal("is-a-directory")
    parent = tree.dir(parts[:-1], "path-blocked")
    old = None if parent is None else tree.lookup(parent, parts[-1])
    if old is not None and old.kind == "dir":
        raise Refusal("is-a-directory")
    if wants_dir:
        raise Refusal("not-a-directory")


def _existing(op: _Op) -> Entry:
    entry = op.tree.entry(op.parts)
    if entry is None:
        raise Refusal("not-found")
    if op.wants_dir and entry.kind != "dir":
        raise Refusal("not-a-directory")
    return entry


def _linked_size(tree: WorkingTree, cid: str, codec: str) -> int:
    # What Fs.link binds: a kuro.fs directory (size 0) or a UnixFS file root (its byte size).
    if codec == "dag-cbor":
        try:
            tree.reader.dir(cid)
        except (MissingBlock, CorruptBlock) as exc:
            raise Refusal("block-missing", cid=cid) from exc
        except (DagCborError, InvalidCID) as exc:
            raise Refusal("not-a-directory", cid=cid) from exc
        return 0
    try:
        return file_root_info(tree.store.get, cid).size
    except DagPbError as exc:
        raise Refusal("not-a-file", cid=cid) from exc


def _entries_below(tree: WorkingTree, cid: str, limit: int) -> int:
    """How many entries a walk of directory ``cid`` lists (more than ``limit`` is reported as ``limit + 1``).

    Each distinct directory is listed once (post-order over an explicit stack, counts memoised by CID),
    so the cost is the size of the DAG, not of the paths through it.
    """
    counts: dict[str, int] = {}
    listings: dict[str, list[Entry]] = {}
    pending = [cid]
    while pending:
        top = pending[-1]
        if top in counts:
            pending.pop()
            continue
        below = listings.get(top)
        if below is None:
            below = listings[top] = [e for _, e in tree.items(tree.load(top))]
            pending.extend(e.cid for e in below if e.kind == "dir" and e.cid not in counts)
            continue
        counts[top] = min(limit + 1, sum(1 + (counts[e.cid] if e.kind == "dir" else 0) for e in below))
        del listings[top]
        pending.pop()
    return counts[cid]


def _listing(op: _Op) -> tuple[Entry, WorkDir]:
    entry = op.tree.entry(op.parts)
    if entry is None:
        raise Refusal("not-found")
    if entry.kind != "dir":
        raise Refusal("not-a-directory")
    work = op.tree.dir(op.parts, "not-a-directory")
    assert work is not None
    return entry, work
