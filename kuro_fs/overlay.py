"""A copy-on-write overlay over an ``Fs`` with POSIX file semantics: what a WASI guest's files are.

## The one decision
A guest changes files the POSIX way — open, write at offsets, truncate, rename over, unlink while
open — but kuro.fs changes only by whole operations that each make a new root. The overlay keeps
every change in memory as *inodes* (:mod:`kuro_fs.overlay_tree`) over the unchanged base, reads only
the blocks a range needs (:mod:`kuro_fs.extents`), and :meth:`Overlay.commit` folds everything
pending into **one new root** with one kuro.fs operation per changed entry — never one per write.
Every refusal is an :class:`Errno` value (named as WASI preview 1 names them), never an exception,
because a guest's bad path must not crash its host; misuse by the caller (a non-bytes payload, a
handle of another overlay) raises ``TypeError``/``ValueError``.

Semantics, chosen to match wasmtime's built-in WASI (cap-std on Linux) where POSIX leaves room:
paths are relative to a directory handle (``at``, default the root); ``.``/``..`` resolve lexically
and ``..`` above ``at`` or a leading ``/`` is ``PERM``; a trailing ``/`` requires a directory;
``unlink`` of a directory is ``ISDIR``; ``rmdir`` of a path ending in ``.`` or ``..``, or of a
directory named with a trailing ``/``, is ``INVAL`` (wasmtime's choice; Linux would remove ``d/``
and say ``NOTEMPTY`` for ``..``); ``rename`` of ``.`` is
``BUSY``, into its own subtree ``INVAL``, a file over a directory ``ISDIR``, a directory over a file
``NOTDIR``, over a non-empty directory ``NOTEMPTY``. Offsets and cursors belong to the caller's
file descriptors (``O_APPEND`` = write at :attr:`Stat.size`): the overlay is positional only.

Inode numbers are stable and unique among live entries: a 64-bit hash of the path an entry had in
the first base (for entries found there) or of a creation counter (for entries made here); a rename
keeps it. Paths are not CIDs because two equal files have one CID but must have two inodes.

``reads`` lists, in first-read order, the file CIDs of the Fs whose bytes reached a reader
(``kuro/reads``): bytes still pending are the writer's own and name no stored file.

## Pure
Only the injected ``Fs`` (and its store) is touched. No clock; the only "randomness" is a counter.

## Not done here
No symlinks or hard links, no permissions, times or rights (the WASI binding owns fd rights and
capability checks — give the overlay an ``Fs`` whose grant allows everything the guest may do).
Limits: a name of more than 255 UTF-8 bytes or a path that would pass 4096 is ``NAMETOOLONG``; a
name kuro.fs cannot hold (whitespace only) is ``INVAL``; a file past ``max_file_size`` is ``FBIG``.
Pending writes that hold more than ``max_pending_bytes`` are folded into leaf blocks early, the
held memory counted as their bytes plus ~105 bytes per run (:attr:`Overlay.held_bytes`: scattered
one-byte writes cost 106 bytes each, not 1): whole chunks first, then, if that is not enough, the
partial last chunk of every file, so the budget bounds what is held (plus the write being made)
however many files hold it (see :mod:`kuro_fs.extents`).
Entries looked up stay cached for the overlay's life.
Renaming a directory deep enough that a path below it would pass 4096 bytes is refused at commit
(a ``bad-path`` denial in :attr:`Commit.denial`), not at the rename.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Final, TypeVar

from kuro_fs.errors import CorruptBlock, DagPbError, MissingBlock
from kuro_fs.extents import SparseFile
from kuro_fs.fs import Fs, FsLog
from kuro_fs.overlay_tree import STAGING, DirNode, FileNode, Node, origin_path, path_of, plan_commit, touch
from kuro_fs.paths import MAX_NAME_BYTES, MAX_PATH_BYTES, clean_path, join_path
from kuro_fs.unixfs import FileRoot

__all__ = ["FS_REASON_ERRNO", "Commit", "DirEntry", "Errno", "Handle", "Overlay", "Stat"]

T = TypeVar("T")


class Errno(Enum):
    """Why an overlay operation was refused; each value is the WASI preview 1 errno name."""

    BADF = "badf"  # a handle that is closed or never was
    BUSY = "busy"  # rename of "." (the directory a handle is)
    EXIST = "exist"  # create-exclusive or mkdir of an existing entry
    FBIG = "fbig"  # a write or size past max_file_size
    INVAL = "inval"  # a negative offset or size, rmdir of ".", a directory moved into itself, an unholdable name
    IO = "io"  # a block of the base is missing, corrupt or malformed
    ISDIR = "isdir"  # file operation on a directory
    NAMETOOLONG = "nametoolong"  # a name over 255 bytes, or a path over 4096
    NOENT = "noent"  # nothing there (or the parent directory was removed)
    NOTCAPABLE = "notcapable"  # the Fs grant refused (see the module docstring)
    NOTDIR = "notdir"  # a file where a directory is needed
    NOTEMPTY = "notempty"  # rmdir or rename over a directory with entries
    PERM = "perm"  # a path that leaves the directory it is relative to


#: How a kuro.fs denial reason reads as an errno (a commit or a lookup refused by the Fs).
FS_REASON_ERRNO: Final[Mapping[str, Errno]] = {
    "bad-path": Errno.INVAL,
    "bytes-required": Errno.INVAL,
    "bad-range": Errno.INVAL,
    "missing-capability": Errno.NOTCAPABLE,
    "not-found": Errno.NOENT,
    "not-a-directory": Errno.NOTDIR,
    "not-a-file": Errno.ISDIR,
    "is-a-directory": Errno.ISDIR,
    "path-blocked": Errno.NOTDIR,
    "directory-not-empty": Errno.NOTEMPTY,
    "block-missing": Errno.IO,
    "over-budget": Errno.FBIG,  # a whole read or walk past the Fs budget (a diamond DAG claiming more than exists)
}


@dataclass(frozen=True, slots=True)
class Handle:
    """An open file or directory of one overlay (the caller's fd table maps fds to these)."""

    number: int


@dataclass(frozen=True, slots=True)
class Stat:
    """``kind`` is "file" or "dir"; ``size`` is 0 for a directory; ``ino`` as the module docstring says."""

    kind: str
    size: int
    ino: int


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One entry of :meth:`Overlay.readdir`."""

    name: str
    kind: str
    ino: int


@dataclass(frozen=True)
class Commit:
    """What :meth:`Overlay.commit` did: the new ``fs`` and how many kuro.fs ``ops`` made it.

    On a refusal, ``denial`` is the kuro.fs receipt that refused, ``fs`` is the base unchanged and
    everything stays pending (nothing is lost; blocks already stored are unreferenced).
    """

    fs: Fs
    ops: int
    denial: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.denial is None


class _Refused(Exception):
    def __init__(self, errno: Errno) -> None:
        super().__init__(errno.value)
        self.errno = errno


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Overlay:
    """A writable view of ``fs``; see the module docstring. Not thread-safe (one guest, one thread)."""

    def __init__(self, fs: Fs, *, max_pending_bytes: int = 64 << 20, max_file_size: int = 1 << 40) -> None:
        if not (_is_count(max_pending_bytes) and _is_count(max_file_size)):
            raise ValueError("max_pending_bytes and max_file_size are non-negative ints")
        self._fs = fs
        self.max_pending_bytes = max_pending_bytes
        self.max_file_size = max_file_size
        self._root = DirNode("", None, "", False, False)
        self._handles: dict[int, Node] = {}
        self._next_handle = 0
        self._created = 0
        self._reads: dict[str, None] = {}
        self._holding: dict[FileNode, None] = {}  # files with pending extent bytes
        self._held = 0  # what they hold: their held_bytes (bytes and runs' bookkeeping), the budget's measure
        self._root_handle = self._open_node(self._root)

    # ---- plain values

    @property
    def fs(self) -> Fs:
        """The base: the ``Fs`` given, or what the last successful :meth:`commit` made."""
        return self._fs

    @property
    def root(self) -> Handle:
        """A handle on the root directory, open from the start."""
        return self._root_handle

    @property
    def reads(self) -> tuple[str, ...]:
        """File CIDs (of the Fs) whose bytes reached a reader, in first-read order."""
        return tuple(self._reads)

    @property
    def pending(self) -> bool:
        """True if a commit would change the tree."""
        return bool(self._root.changed)

    @property
    def pending_bytes(self) -> int:
        """Written bytes held in memory, not yet in any block (all files, linked or not)."""
        return sum(node.content.pending_bytes for node in self._holding)

    @property
    def held_bytes(self) -> int:
        """What the pending writes cost the host: their bytes plus each run's bookkeeping
        (:attr:`kuro_fs.extents.SparseFile.held_bytes`); past ``max_pending_bytes`` the files are folded."""
        return self._held

    # ---- handles

    def open(
        self,
        path: str,
        at: Handle | None = None,
        *,
        create: bool = False,
        exclusive: bool = False,
        truncate: bool = False,
        directory: bool = False,
    ) -> Handle | Errno:
        """Open the file or directory at ``path``: ``create`` makes a missing file (``exclusive``:
        ``EXIST`` if there is one), ``truncate`` empties a file, ``directory`` requires a directory.

        Errnos: BADF, PERM, NOENT, NOTDIR, ISDIR (create/truncate on a directory, create with a
        trailing ``/``), EXIST, INVAL, NAMETOOLONG, IO, NOTCAPABLE.
        """

        def body() -> Handle:
            parent, name, slash = self._walk(at, path)
            if name in (".", "..") and create and exclusive:
                raise _Refused(Errno.EXIST)
            if create and slash:
                raise _Refused(Errno.ISDIR)
            node = parent if name in (".", "..") else self._child(parent, name)
            if node is None:
                if not create:
                    raise _Refused(Errno.NOENT)
                if directory:
                    raise _Refused(Errno.ISDIR)
                self._check_new(parent, name)
                self._created += 1
                content = SparseFile(self._fs.store, None, 0, self._fs.chunk_size, self._fs.width)
                node = FileNode(f"+{self._created}", parent, name, False, content)
                self._place(parent, name, node)
                return self._open_node(node)
            if create and exclusive:
                raise _Refused(Errno.EXIST)
            if isinstance(node, DirNode):
                if create or truncate:
                    raise _Refused(Errno.ISDIR)
                return self._open_node(node)
            if slash or directory:
                raise _Refused(Errno.NOTDIR)
            assert isinstance(node, FileNode)
            if truncate and node.content.size:
                self._resize(node, 0)
            return self._open_node(node)

        return self._attempt(body)

    def close(self, handle: Handle) -> Errno | None:
        """Close ``handle``; an unlinked file goes when its last handle does. Errno: BADF."""
        if not isinstance(handle, Handle):
            raise TypeError(f"expected a Handle, got {type(handle).__name__}")
        node = self._handles.pop(handle.number, None)
        if node is None:
            return Errno.BADF
        node.opens -= 1
        if isinstance(node, FileNode) and node.opens == 0 and node.parent is None:
            self._held -= node.content.held_bytes
            self._holding.pop(node, None)
        return None

    def read(self, handle: Handle, offset: int, length: int) -> bytes | Errno:
        """Up to ``length`` bytes at ``offset`` (short at the end, empty past it). Errnos: BADF, ISDIR, INVAL, IO."""
        return self._reading(handle, offset, _is_count(length), lambda content: content.read(offset, length))

    def read_into(self, handle: Handle, offset: int, out: memoryview | bytearray) -> int | Errno:
        """Fill ``out`` with up to ``len(out)`` bytes at ``offset``, in place; how many (short at the end, 0
        past it). Errnos: BADF, ISDIR, INVAL, IO (``out`` may then hold part of the range).
        Raises TypeError: ``out`` is not a writable buffer."""
        view = memoryview(out).cast("B")
        if view.readonly:
            raise TypeError("read_into needs a writable buffer")
        return self._reading(handle, offset, True, lambda content: content.read_into(offset, view))

    def _reading(
        self, handle: Handle, offset: int, length_ok: bool, read: Callable[[SparseFile], tuple[T, bool]]
    ) -> T | Errno:
        # A read of the file ``handle`` names: its bytes' first reach of the stored file is in ``reads``.
        def body() -> T:
            node = self._file(handle)
            if not (_is_count(offset) and length_ok):
                raise _Refused(Errno.INVAL)
            value, from_base = read(node.content)
            if from_base and node.content.base_cid is not None:
                self._reads.setdefault(node.content.base_cid)
            return value

        return self._attempt(body)

    def write(self, handle: Handle, offset: int, data: bytes | bytearray | memoryview) -> int | Errno:
        """Write ``data`` at ``offset`` (a gap past the end reads as zeros); return ``len(data)``.

        Errnos: BADF, ISDIR, INVAL (negative offset), FBIG. Raises TypeError: ``data`` is not bytes-like.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"write takes bytes, got {type(data).__name__}")
        view = memoryview(data).cast("B")

        def body() -> int:
            node = self._file(handle)
            if not _is_count(offset):
                raise _Refused(Errno.INVAL)
            if offset + len(view) > self.max_file_size:
                raise _Refused(Errno.FBIG)
            if len(view):
                self._changing(node)
                before = node.content.held_bytes
                node.content.write(offset, view)
                self._account(node, before)
            return len(view)

        return self._attempt(body)

    def set_size(self, handle: Handle, size: int) -> Errno | None:
        """Cut the file to ``size`` bytes or grow it with zeros. Errnos: BADF, ISDIR, INVAL, FBIG, IO."""

        def body() -> None:
            node = self._file(handle)
            if not _is_count(size):
                raise _Refused(Errno.INVAL)
            if size > self.max_file_size:
                raise _Refused(Errno.FBIG)
            if size != node.content.size:
                self._resize(node, size)

        return self._attempt(body)

    def stat(self, handle: Handle) -> Stat | Errno:
        """The kind, size and inode number of what ``handle`` holds. Errno: BADF."""
        return self._attempt(lambda: self._stat(self._node(handle)))

    def stat_path(self, path: str, at: Handle | None = None) -> Stat | Errno:
        """As :meth:`stat`, for the entry at ``path``. Errnos: BADF, PERM, NOENT, NOTDIR, NAMETOOLONG, IO."""

        def body() -> Stat:
            parent, name, slash = self._walk(at, path)
            node = parent if name in (".", "..") else self._child(parent, name)
            if node is None:
                raise _Refused(Errno.NOENT)
            if slash and isinstance(node, FileNode):
                raise _Refused(Errno.NOTDIR)
            return self._stat(node)

        return self._attempt(body)

    def readdir(self, handle: Handle) -> list[DirEntry] | Errno:
        """The directory's entries sorted by name (no ``.``/``..``). Errnos: BADF, NOTDIR, IO."""

        def body() -> list[DirEntry]:
            node = self._node(handle)
            if not isinstance(node, DirNode):
                raise _Refused(Errno.NOTDIR)
            return [DirEntry(n, _kind(c), c.ino) for n, c in self._list(node)]

        return self._attempt(body)

    # ---- namespace changes

    def mkdir(self, path: str, at: Handle | None = None) -> Errno | None:
        """Create the directory ``path`` (its parent must exist).

        Errnos: EXIST, NOENT, NOTDIR, PERM, INVAL, NAMETOOLONG, IO.
        """

        def body() -> None:
            parent, name, _ = self._walk(at, path)
            if name in (".", "..") or self._child(parent, name) is not None:
                raise _Refused(Errno.EXIST)
            self._check_new(parent, name)
            self._created += 1
            self._place(parent, name, DirNode(f"+{self._created}", parent, name, False, True))

        return self._attempt(body)

    def rmdir(self, path: str, at: Handle | None = None) -> Errno | None:
        """Remove the empty directory ``path``. Errnos: NOENT, NOTDIR, NOTEMPTY, INVAL, PERM, IO.

        As wasmtime's WASI (not Linux): a path ending in ``.`` or ``..``, or a directory named with a
        trailing ``/``, is INVAL.
        """

        def body() -> None:
            parent, name, slash = self._walk(at, path)
            if name in (".", ".."):
                raise _Refused(Errno.INVAL)
            node = self._child(parent, name)
            if node is None:
                raise _Refused(Errno.NOENT)
            if not isinstance(node, DirNode):
                raise _Refused(Errno.NOTDIR)
            if slash:
                raise _Refused(Errno.INVAL)
            if self._list(node):
                raise _Refused(Errno.NOTEMPTY)
            self._unplace(node)

        return self._attempt(body)

    def unlink(self, path: str, at: Handle | None = None) -> Errno | None:
        """Remove the file ``path`` (open handles keep it readable and writable).

        Errnos: NOENT, ISDIR, NOTDIR, PERM, IO.
        """

        def body() -> None:
            parent, name, slash = self._walk(at, path)
            node = parent if name in (".", "..") else self._child(parent, name)
            if node is None:
                raise _Refused(Errno.NOENT)
            if isinstance(node, DirNode):
                raise _Refused(Errno.ISDIR)
            if slash:
                raise _Refused(Errno.NOTDIR)
            self._unplace(node)

        return self._attempt(body)

    def rename(self, src: str, dst: str, *, src_at: Handle | None = None, dst_at: Handle | None = None) -> Errno | None:
        """Move ``src`` to ``dst``, replacing a file, or an empty directory with a directory (POSIX ``rename``).

        Errnos: NOENT, BUSY, INVAL, ISDIR, NOTDIR, NOTEMPTY, EXIST never, PERM, NAMETOOLONG, IO.
        """

        def body() -> None:
            sparent, sname, sslash = self._walk(src_at, src)
            dparent, dname, dslash = self._walk(dst_at, dst)
            if sname in (".", "..") or dname in (".", ".."):
                raise _Refused(Errno.BUSY)
            node = self._child(sparent, sname)
            if node is None:
                raise _Refused(Errno.NOENT)
            if (sslash or dslash) and isinstance(node, FileNode):
                raise _Refused(Errno.NOTDIR)
            target = self._child(dparent, dname)
            if isinstance(node, DirNode) and _within(dparent, node):
                raise _Refused(Errno.INVAL)  # into its own subtree
            if isinstance(target, DirNode) and node.parent is not None and _within(node.parent, target):
                raise _Refused(Errno.NOTEMPTY)  # onto a directory that holds it (Linux checks this first)
            if target is node:
                return
            if isinstance(target, DirNode):
                if isinstance(node, FileNode):
                    raise _Refused(Errno.ISDIR)
                if self._list(target):
                    raise _Refused(Errno.NOTEMPTY)
            elif target is not None and isinstance(node, DirNode):
                raise _Refused(Errno.NOTDIR)
            self._check_new(dparent, dname)
            if target is not None:
                self._unplace(target)
            self._unplace(node, gone=False)
            self._place(dparent, dname, node)

        return self._attempt(body)

    # ---- commit

    def commit(self) -> Commit:
        """Fold every pending change into a new root, one kuro.fs operation per changed entry.

        The new ``Fs`` keeps the base's history plus the base root (no intermediate roots). Handles
        stay valid; pending bytes of files no longer linked (unlinked but open) stay pending. A
        refusal (see :class:`Commit`) keeps everything as it was.
        Raises BlockStoreError: a broken store (as every ``Fs`` op).
        """
        if not self._root.changed:
            return Commit(self._fs, 0)
        staging = self._staging_name()
        if not isinstance(staging, str):  # the root itself cannot be read
            return Commit(self._fs, 0, staging)
        ops, visited, left = plan_commit(self._root, (staging,))
        too_long = self._moved_too_deep(left)
        if too_long is not None:
            return Commit(self._fs, 0, too_long)
        fs = self._fs
        built: list[tuple[FileNode, FileRoot]] = []
        for count, op in enumerate(ops):
            if op.kind == "link":
                assert op.node is not None
                content = op.node.content
                cid = content.base_cid
                if content.dirty or cid is None:
                    try:
                        froot = content.build()
                    except (MissingBlock, CorruptBlock, DagPbError) as exc:
                        missing = getattr(exc, "cid", None) or content.base_cid
                        denial = {
                            "kuro.fs/type": "kuro.fs/denied",
                            "kuro.fs/reason": "block-missing",
                            "kuro.fs/cid": missing,
                        }
                        return Commit(self._fs, count, denial)
                    built.append((op.node, froot))
                    cid = froot.cid
                result = fs.link(join_path(op.path), cid)
            elif op.kind == "mv":
                result = fs._move(join_path(op.path), join_path(op.to), check_below=False)  # final tree checked above
            elif op.kind == "mkdir":
                result = fs.mkdir(join_path(op.path))
            else:
                result = fs.rm(join_path(op.path))
            if not result.ok:
                return Commit(self._fs, count, result.receipt)
            fs = result.fs
        for node, froot in built:
            before = node.content.held_bytes
            node.content.rebase(froot)
            self._account(node, before)
        for d in visited:
            for name, child in d.known.items():
                if child is not None:
                    child.origin_parent, child.origin_name = d, name
            d.base = dict(d.known)
            d.changed.clear()
        for gone in left:
            if gone.parent is None:
                gone.origin_parent, gone.origin_name = None, ""
                if isinstance(gone, DirNode):
                    gone.changed.clear()
                    gone.base = {}
        new = self._fs if fs.root == self._fs.root else replace(fs, log=FsLog(self._fs.root, self._fs.log))
        self._fs = new
        return Commit(new, len(ops))

    def _moved_too_deep(self, left: list[Node]) -> dict[str, Any] | None:
        # The kuro.fs denial for a stored directory moved where a path below it would pass MAX_PATH_BYTES, or None.
        # kuro.fs's mv checks only the two paths it is given, and every other op of a plan names its own full path;
        # a moved directory's stored subtree is what no op names. Only a move to a longer path can do it (every
        # stored path was legal), so a tree that moves nothing deeper costs no walk.
        for node in left:
            if not isinstance(node, DirNode) or node.parent is None:
                continue
            path = join_path(path_of(node))
            room = MAX_PATH_BYTES - len(path.encode("utf-8"))
            if room >= MAX_PATH_BYTES - len(join_path(origin_path(node)).encode("utf-8")):
                continue
            try:
                below = self._deepest(node, room)
            except (_Refused, MissingBlock, CorruptBlock, DagPbError):  # a stored directory that cannot be listed
                return {"kuro.fs/type": "kuro.fs/denied", "kuro.fs/reason": "block-missing", "kuro.fs/path": path}
            if below is not None:
                return {"kuro.fs/type": "kuro.fs/denied", "kuro.fs/reason": "bad-path", "kuro.fs/path": path + below}
        return None

    def _deepest(self, top: DirNode, room: int) -> str | None:
        # The first path below ``top`` (as "/name/…") longer than ``room`` bytes, or None; a stack, not recursion.
        stack: list[tuple[DirNode, str]] = [(top, "")]
        while stack:
            d, rel = stack.pop()
            for name, child in self._list(d):
                below = f"{rel}/{name}"
                if len(below.encode("utf-8")) > room:
                    return below
                if isinstance(child, DirNode):
                    stack.append((child, below))
        return None

    # ---- helpers: handles and nodes

    def _attempt(self, body: Callable[[], T]) -> T | Errno:
        try:
            return body()
        except _Refused as refused:
            return refused.errno
        except (MissingBlock, CorruptBlock, DagPbError):
            return Errno.IO

    def _open_node(self, node: Node) -> Handle:
        self._next_handle += 1
        self._handles[self._next_handle] = node
        node.opens += 1
        return Handle(self._next_handle)

    def _node(self, handle: Handle) -> Node:
        if not isinstance(handle, Handle):
            raise TypeError(f"expected a Handle, got {type(handle).__name__}")
        node = self._handles.get(handle.number)
        if node is None:
            raise _Refused(Errno.BADF)
        return node

    def _file(self, handle: Handle) -> FileNode:
        node = self._node(handle)
        if not isinstance(node, FileNode):
            raise _Refused(Errno.ISDIR)
        return node

    def _stat(self, node: Node) -> Stat:
        size = node.content.size if isinstance(node, FileNode) else 0
        return Stat(_kind(node), size, node.ino)

    def _changing(self, node: FileNode) -> None:
        if node.parent is not None:
            touch(node.parent, node.name)

    def _account(self, node: FileNode, before: int) -> None:
        after = node.content.held_bytes
        self._held += after - before
        if after:
            self._holding[node] = None
        else:
            self._holding.pop(node, None)
        # Past the budget: whole chunks (and scattered partial ones) first, then, if that is not enough,
        # every file's partial last chunk too, so the budget bounds what the host holds, however many files.
        for last in (False, True):
            if self._held <= self.max_pending_bytes:
                break
            for holder in [node, *self._holding]:
                was = holder.content.held_bytes
                holder.content.fold(0, last=last)
                self._held += holder.content.held_bytes - was
                if not holder.content.held_bytes:
                    self._holding.pop(holder, None)
                if self._held <= self.max_pending_bytes:
                    break

    def _resize(self, node: FileNode, size: int) -> None:
        self._changing(node)
        before = node.content.held_bytes
        node.content.set_size(size)
        self._account(node, before)

    # ---- helpers: the tree

    def _walk(self, at: Handle | None, path: str) -> tuple[DirNode, str, bool]:
        # (the directory holding the last name, the last name, trailing slash?); when the last name is
        # "." or "..", the directory returned is the one that name denotes, itself.
        start = self._root if at is None else self._node(at)
        if not isinstance(start, DirNode):
            raise _Refused(Errno.NOTDIR)
        if not isinstance(path, str):
            raise TypeError(f"a path is a str, got {type(path).__name__}")
        if path == "":
            raise _Refused(Errno.NOENT)
        if "\x00" in path:
            raise _Refused(Errno.INVAL)
        if path.startswith("/"):
            raise _Refused(Errno.PERM)
        if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise _Refused(Errno.NAMETOOLONG)
        names = [n for n in path.split("/") if n]
        slash = path.endswith("/")
        stack = [start]
        for i, name in enumerate(names):
            last = i == len(names) - 1
            if name == ".":
                if last:
                    return stack[-1], ".", slash
                continue
            if name == "..":
                if len(stack) == 1:
                    raise _Refused(Errno.PERM)
                stack.pop()
                if last:
                    return stack[-1], "..", slash
                continue
            if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise _Refused(Errno.NAMETOOLONG)
            if last:
                return stack[-1], name, slash
            child = self._child(stack[-1], name)
            if child is None:
                raise _Refused(Errno.NOENT)
            if not isinstance(child, DirNode):
                raise _Refused(Errno.NOTDIR)
            stack.append(child)
        return stack[-1], ".", slash

    def _child(self, d: DirNode, name: str) -> Node | None:
        if name in d.known:
            return d.known[name]
        if d.complete or clean_path(name) != (name,):
            return None
        found = self._fs.stat(join_path((*origin_path(d), name)))
        if not found.ok:
            reason = found.receipt["kuro.fs/reason"]
            if reason in ("not-found", "bad-path"):
                d.base[name] = d.known[name] = None
                return None
            raise _Refused(FS_REASON_ERRNO.get(reason, Errno.IO))
        node = self._found(d, name, found.value["kind"], found.value["size"], found.value["cid"])
        return node

    def _found(self, d: DirNode, name: str, kind: str, size: int, cid: str) -> Node:
        key = f"{d.key}/{name}"
        node: Node
        if kind == "dir":
            node = DirNode(key, d, name, True, False)
        else:
            content = SparseFile(self._fs.store, cid, size, self._fs.chunk_size, self._fs.width)
            node = FileNode(key, d, name, True, content)
        d.base[name] = d.known[name] = node
        return node

    def _list(self, d: DirNode) -> list[tuple[str, Node]]:
        if not d.complete:
            listing = self._fs.ls(join_path(origin_path(d)))
            if not listing.ok:
                raise _Refused(FS_REASON_ERRNO.get(listing.receipt["kuro.fs/reason"], Errno.IO))
            for entry in listing.value:
                if entry["name"] not in d.base:
                    self._found(d, entry["name"], entry["kind"], entry["size"], entry["cid"])
            d.complete = True
        return d.children()

    def _check_new(self, parent: DirNode, name: str) -> None:
        # May an entry be made at (parent, name)? The parent must be linked; kuro.fs must hold the name.
        if parent is not self._root and parent.parent is None:
            raise _Refused(Errno.NOENT)
        if clean_path(name) != (name,):
            raise _Refused(Errno.INVAL)
        total = sum(len(n.encode("utf-8")) + 1 for n in (*path_of(parent), name))
        if total > MAX_PATH_BYTES:
            raise _Refused(Errno.NAMETOOLONG)

    def _place(self, parent: DirNode, name: str, node: Node) -> None:
        parent.known[name] = node
        node.parent, node.name = parent, name
        touch(parent, name)

    def _unplace(self, node: Node, *, gone: bool = True) -> None:
        # Take ``node`` out of its directory; ``gone``: it is not placed elsewhere (rm, not mv).
        parent = node.parent
        assert parent is not None
        parent.known[node.name] = None
        touch(parent, node.name)
        node.parent = None
        if gone and isinstance(node, FileNode) and node.opens == 0:
            self._held -= node.content.held_bytes
            self._holding.pop(node, None)

    def _staging_name(self) -> str | dict[str, Any]:
        # A root-level name free in the base and now; or the Fs denial that kept us from knowing.
        name, n = STAGING, 0
        while True:
            if self._root.known.get(name) is None and self._root.base.get(name) is None:
                found = self._fs.stat(name)
                if not found.ok and found.receipt["kuro.fs/reason"] != "not-found":
                    return found.receipt
                if not found.ok:
                    return name
            n += 1
            name = f"{STAGING}-{n}"


def _within(here: Node | None, ancestor: DirNode) -> bool:
    """True if ``ancestor`` is ``here`` or above it."""
    while here is not None:
        if here is ancestor:
            return True
        here = here.parent
    return False


def _kind(node: Node) -> str:
    return "dir" if isinstance(node, DirNode) else "file"
