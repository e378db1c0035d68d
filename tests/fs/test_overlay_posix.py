"""The overlay against POSIX itself: random sessions run on an Overlay and on a real temporary directory.

Every operation (open with create/exclusive/truncate/directory, pread, pwrite, ftruncate, fstat, stat,
readdir, mkdir, rmdir, unlink, rename, close — relative to the root or to an open directory, with
``.``, ``..`` and trailing slashes) must give the same result or the same errno on both, handles
must keep following their file through renames and unlinks, inode numbers must agree on which
entries are the same, and every commit must produce exactly the tree the real directory holds
(compared by CID: the directory imported with the same chunking).

Where the overlay deliberately follows wasmtime's WASI rather than Linux, the step is not run on the
real directory: a path that climbs above its directory (``..`` past ``at``) is ``PERM`` (Linux
would follow it), and ``rmdir`` of ``d/``, ``.`` or ``..`` is ``INVAL`` (Linux removes ``d/`` and
says ``ENOTEMPTY`` for ``..``).
"""

from __future__ import annotations

import errno as errno_module
import os
import shutil
import tempfile
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, multiple, rule

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.importer import import_path
from kuro_fs.overlay import Errno, Handle, Overlay

CHUNK, WIDTH = 8, 3
NAMES = ["a", "b", "c"]
SEGMENT = st.sampled_from([*NAMES * 6, ".", ".."])
PATHS = st.builds(
    lambda parts, slash: "/".join(parts) + ("/" if slash else ""),
    st.one_of(st.lists(SEGMENT, min_size=1, max_size=2), st.lists(SEGMENT, min_size=1, max_size=3)),
    st.sampled_from([False] * 7 + [True]),
)
#: A starting tree: relative path → bytes (a file) or None (a directory); parents are implied.
TREES = st.dictionaries(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple),
    st.none() | st.binary(max_size=40),
    max_size=6,
)
DATA = st.binary(max_size=20)
OFFSETS = st.integers(0, 30)


def errno_of(exc: OSError) -> Errno:
    return Errno(errno_module.errorcode[exc.errno or 0].lower()[1:])


class Session:
    """One open thing on both sides."""

    def __init__(self, handle: Handle, fd: int, is_dir: bool) -> None:
        self.handle = handle
        self.fd = fd
        self.is_dir = is_dir


class OverlayVsPosix(RuleBasedStateMachine):
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kuro-overlay-posix-")
        self.store = MemoryBlockStore()
        self.rootfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        self.open_fds: list[int] = [self.rootfd]
        self.live: list[Session] = []

    @initialize(tree=TREES)
    def start(self, tree: dict[tuple[str, ...], bytes | None]) -> None:
        """The same tree on both sides: files written through ``Fs``, and on disk."""
        fs = Fs(self.store, Fs.empty(self.store).root, chunk_size=CHUNK, width=WIDTH)
        for parts, data in sorted(tree.items(), key=lambda item: len(item[0])):
            result = fs.mkdir("/".join(parts)) if data is None else fs.write("/".join(parts), data)
            if not result.ok:  # a file already sits on the way: not part of this tree
                continue
            fs = result.fs
            where = os.path.join(self.dir, *parts)
            if data is None:
                os.makedirs(where, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(where), exist_ok=True)
                with open(where, "wb") as f:
                    f.write(data)
        assert fs.root == import_path(MemoryBlockStore(), self.dir, chunk_size=CHUNK, width=WIDTH, workers=1)
        self.ov = Overlay(fs)

    def teardown(self) -> None:
        try:
            self.check_commit()
        finally:
            for fd in self.open_fds:
                os.close(fd)
            shutil.rmtree(self.dir)

    # ---- plumbing

    def at(self, session: Session) -> tuple[Handle | None, int]:
        if session is None or not session.is_dir:
            return None, self.rootfd
        return session.handle, session.fd

    @staticmethod
    def climbs(path: str) -> bool:
        depth = 0
        for part in path.split("/"):
            if part == "..":
                depth -= 1
                if depth < 0:
                    return True
            elif part not in ("", "."):
                depth += 1
        return False

    def both(self, ours: Any, real: Any, *paths: str) -> Any:
        """Run ``real`` (unless ours was PERM by design) and compare with ``ours``; return real's value."""
        if ours is Errno.PERM:
            assert any(self.climbs(p) for p in paths), f"PERM for {paths}, which stay inside"
            return None
        try:
            theirs = real()
        except OSError as exc:
            assert ours == errno_of(exc), f"overlay gave {ours!r}, POSIX {exc!r}"
            return None
        assert not isinstance(ours, Errno), f"overlay refused with {ours!r}, POSIX gave {theirs!r}"
        return theirs

    # ---- rules

    @rule(
        target=sessions,
        at=st.none() | sessions,
        path=PATHS,
        create=st.booleans(),
        exclusive=st.booleans(),
        truncate=st.booleans(),
        directory=st.booleans(),
    )
    def open(
        self, at: Session | None, path: str, create: bool, exclusive: bool, truncate: bool, directory: bool
    ) -> Any:
        if directory and create:
            directory = False  # O_CREAT|O_DIRECTORY is EINVAL on Linux ≥ 6.4 and unspecified before
        handle, dirfd = self.at(at)
        ours = self.ov.open(path, handle, create=create, exclusive=exclusive, truncate=truncate, directory=directory)
        flags = (os.O_CREAT if create else 0) | (os.O_EXCL if exclusive and create else 0)
        flags |= os.O_TRUNC if truncate else 0
        flags |= os.O_DIRECTORY | os.O_RDONLY if directory else os.O_RDWR

        def real() -> int:
            try:
                return os.open(path, flags, 0o644, dir_fd=dirfd)
            except IsADirectoryError:
                if create or truncate or directory:
                    raise
                return os.open(path, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dirfd)

        fd = self.both(ours, real, path)
        if fd is None:
            return multiple()
        assert isinstance(ours, Handle)
        self.open_fds.append(fd)
        session = Session(ours, fd, os.path.isdir(f"/proc/self/fd/{fd}"))
        self.live.append(session)
        return session

    @rule(session=consumes(sessions))
    def close(self, session: Session) -> None:
        assert self.ov.close(session.handle) is None
        assert self.ov.close(session.handle) is Errno.BADF
        os.close(session.fd)
        self.open_fds.remove(session.fd)
        self.live.remove(session)

    @rule(session=sessions, offset=OFFSETS, length=st.integers(0, 40))
    def pread(self, session: Session, offset: int, length: int) -> None:
        ours = self.ov.read(session.handle, offset, length)
        if session.is_dir:
            assert ours is Errno.ISDIR
            return
        assert ours == os.pread(session.fd, length, offset)

    @rule(session=sessions, offset=OFFSETS, data=DATA)
    def pwrite(self, session: Session, offset: int, data: bytes) -> None:
        ours = self.ov.write(session.handle, offset, data)
        if session.is_dir:
            assert ours is Errno.ISDIR
            return
        assert ours == os.pwrite(session.fd, data, offset) == len(data)

    @rule(session=sessions, size=st.integers(0, 40))
    def truncate(self, session: Session, size: int) -> None:
        ours = self.ov.set_size(session.handle, size)
        if session.is_dir:
            assert ours is Errno.ISDIR
            return
        assert ours is None
        os.ftruncate(session.fd, size)

    @rule(session=sessions)
    def fstat(self, session: Session) -> None:
        ours = self.ov.stat(session.handle)
        real = os.fstat(session.fd)
        assert not isinstance(ours, Errno)
        assert ours.kind == ("dir" if session.is_dir else "file")
        if not session.is_dir:
            assert ours.size == real.st_size

    @rule(at=st.none() | sessions, path=PATHS)
    def stat(self, at: Session | None, path: str) -> None:
        handle, dirfd = self.at(at)
        ours = self.ov.stat_path(path, handle)
        real = self.both(ours, lambda: os.stat(path, dir_fd=dirfd, follow_symlinks=False), path)
        if real is not None:
            assert not isinstance(ours, Errno)
            assert ours.kind == ("dir" if os.path.stat.S_ISDIR(real.st_mode) else "file")
            if ours.kind == "file":
                assert ours.size == real.st_size

    @rule(session=sessions)
    def readdir(self, session: Session) -> None:
        ours = self.ov.readdir(session.handle)
        if not session.is_dir:
            assert ours is Errno.NOTDIR
            return
        assert not isinstance(ours, Errno)
        try:
            real = sorted(os.listdir(session.fd))
        except FileNotFoundError:  # listing a removed directory: Linux says ENOENT, the overlay "empty"
            real = []
        assert [e.name for e in ours] == real
        for entry in ours:
            found = self.ov.stat_path(entry.name, session.handle)
            assert not isinstance(found, Errno)
            assert (found.ino, found.kind) == (entry.ino, entry.kind)

    @rule()
    def inodes_agree(self) -> None:
        """Among everything alive now (open handles, every entry), equal inodes on one side are equal on the other."""
        pairs = []
        for session in self.live:
            ours = self.ov.stat(session.handle)
            assert not isinstance(ours, Errno)
            pairs.append((os.fstat(session.fd).st_ino, ours.ino))
        for here, dirs, files in os.walk(self.dir):
            for name in dirs + files:
                path = os.path.relpath(os.path.join(here, name), self.dir)
                ours = self.ov.stat_path(path)
                assert not isinstance(ours, Errno), (path, ours)
                pairs.append((os.stat(os.path.join(here, name)).st_ino, ours.ino))
        pairs.append((os.fstat(self.rootfd).st_ino, self.ov.stat(self.ov.root).ino))  # type: ignore[union-attr]
        for real_a, ours_a in pairs:
            for real_b, ours_b in pairs:
                assert (real_a == real_b) == (ours_a == ours_b)

    @rule(at=st.none() | sessions, path=PATHS)
    def mkdir(self, at: Session | None, path: str) -> None:
        handle, dirfd = self.at(at)
        ours = self.ov.mkdir(path, handle)
        self.both(ours, lambda: os.mkdir(path, dir_fd=dirfd), path)

    @rule(at=st.none() | sessions, path=PATHS)
    def rmdir(self, at: Session | None, path: str) -> None:
        handle, dirfd = self.at(at)
        ours = self.ov.rmdir(path, handle)
        if ours is Errno.INVAL and (path.endswith("/") or path.rsplit("/", 1)[-1] in (".", "..")):
            return  # wasmtime's WASI, where Linux would remove "d/" or say ENOTEMPTY for ".."
        self.both(ours, lambda: os.rmdir(path, dir_fd=dirfd), path)

    @rule(at=st.none() | sessions, path=PATHS)
    def unlink(self, at: Session | None, path: str) -> None:
        handle, dirfd = self.at(at)
        ours = self.ov.unlink(path, handle)
        self.both(ours, lambda: os.unlink(path, dir_fd=dirfd), path)

    @rule(src_at=st.none() | sessions, src=PATHS, dst_at=st.none() | sessions, dst=PATHS)
    def rename(self, src_at: Session | None, src: str, dst_at: Session | None, dst: str) -> None:
        sh, sfd = self.at(src_at)
        dh, dfd = self.at(dst_at)
        ours = self.ov.rename(src, dst, src_at=sh, dst_at=dh)
        self.both(ours, lambda: os.rename(src, dst, src_dir_fd=sfd, dst_dir_fd=dfd), src, dst)

    @rule()
    def commit(self) -> None:
        self.check_commit()

    def check_commit(self) -> None:
        before = self.ov.fs
        result = self.ov.commit()
        assert result.ok, result.denial
        expected = import_path(MemoryBlockStore(), self.dir, chunk_size=CHUNK, width=WIDTH, workers=1)
        assert result.fs.root == expected
        assert not self.ov.pending
        if result.fs.root != before.root:  # one new root per commit, whatever the number of operations
            assert result.fs.history == (*before.history, before.root)
        else:
            assert result.fs is before


OverlayVsPosix.TestCase.settings = settings(max_examples=200, stateful_step_count=25, deadline=None)
test_overlay_agrees_with_a_real_directory = OverlayVsPosix.TestCase
