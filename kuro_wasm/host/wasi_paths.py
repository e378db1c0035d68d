"""WASI calls on paths: open, stat, mkdir, rmdir, unlink, rename, readlink, times — and no links.

## The one decision
What ``path_open`` needs is decided by what it opens: reading a file needs ``fs/read``, a directory
``fs/ls``, writing, creating or truncating ``fs/write`` (a grant with no ``fs/…`` capability at all is
refused before the path is even resolved); a directory opened for writing is ``EISDIR``. The new
descriptor's rights are what was asked within what its directory passes on. Every namespace change
is the overlay's (:mod:`kuro_fs.overlay`, POSIX semantics as wasmtime's WASI), pending until the next
commit point. kuro.fs has no symlinks or hard links: ``path_symlink``/``path_link`` are ``ENOTSUP``.

## Effects
The overlay, guest memory, the run's denial record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kuro_fs.overlay import Errno as OvErrno
from kuro_fs.overlay import Handle, Overlay, Stat
from kuro_wasm.host.calls import Handler, Memory, guest_memory, pack, span
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_fds import SETTABLE_FLAGS, check_time_flags, set_times
from kuro_wasm.host.wasi_guest import (
    BADF,
    INVAL,
    ISDIR,
    NOTCAPABLE,
    NOTSUP,
    OK,
    deny,
    directory,
    filestat,
    need,
    path_text,
    record_path,
    state,
)  # fmt: skip
from kuro_wasm.host.wasi_state import DIR, FILE, FS_CAPABILITIES, Fd, errno_of
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Errno, Rights

__all__ = ["PATH_HANDLERS"]

_U32: Final = wasi.U32


def _lookup(
    run: RunContext, caller: int, cctx: int, name: str, capabilities: tuple[str, ...], fd: int, ptr: int, length: int
) -> tuple[Memory, Overlay, Handle, str] | int:
    """Capabilities first (a refusal recorded with the path), then the directory fd's overlay and handle and
    the path: or an errno (EACCES, BADF, NOTDIR, IO, ILSEQ, FAULT)."""
    mem = guest_memory(run, caller, cctx)
    if any(c not in run.grant for c in capabilities):
        refused = need(run, name, capabilities, record_path(mem, ptr, length))
        assert refused is not None
        return refused
    path = path_text(mem, ptr, length)
    got = directory(state(run), run, fd)
    if isinstance(got, int):
        return got
    if path is None:
        return int(Errno.ILSEQ)
    return mem, got[0], got[1], path


def _stat_at(
    run: RunContext, caller: int, cctx: int, name: str, capability: str, fd: int, ptr: int, length: int
) -> tuple[Memory, Stat] | int:
    """The stat of the path (a file or directory there), behind ``capability``; or an errno."""
    got = _lookup(run, caller, cctx, name, (capability,), fd, ptr, length)
    if isinstance(got, int):
        return got
    mem, ov, at, path = got
    stat = ov.stat_path(path, at)
    return errno_of(stat) if isinstance(stat, OvErrno) else (mem, stat)


def _path_filestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _flags, ptr, length, buf = p
    got = _stat_at(run, caller, cctx, "path_filestat_get", "fs/ls", fd, ptr, length)
    if isinstance(got, int):
        return got
    mem, stat = got
    pack(mem, buf, wasi.FILESTAT, *filestat(state(run), stat))
    return OK


def _path_filestat_set_times(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _flags, ptr, length, atim, mtim, fst = p
    if "fs/write" in run.grant:  # flags are checked once the call may happen at all
        bad = check_time_flags(fst)
        if bad is not None:
            return bad
    got = _stat_at(run, caller, cctx, "path_filestat_set_times", "fs/write", fd, ptr, length)
    if isinstance(got, int):
        return got
    set_times(run, state(run), got[1].ino, atim, mtim, fst)
    return OK


def _path_readlink(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, ptr, length, _buf, _buf_len, _used = p
    got = _stat_at(run, caller, cctx, "path_readlink", "fs/ls", fd, ptr, length)
    return got if isinstance(got, int) else INVAL  # it exists and is not a symlink: kuro.fs has none


def _namespace(
    name: str, capabilities: tuple[str, ...], op: Callable[[Overlay, str, Handle], OvErrno | None]
) -> Handler:
    """A call that changes one path of the tree (mkdir, rmdir, unlink) behind ``capabilities``."""

    def handler(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
        fd, ptr, length = p
        got = _lookup(run, caller, cctx, name, capabilities, fd, ptr, length)
        if isinstance(got, int):
            return got
        _mem, ov, at, path = got
        done = op(ov, path, at)
        return OK if done is None else errno_of(done)

    return handler


def _path_rename(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, ptr, length, new_fd, new_ptr, new_length = p
    src = _lookup(run, caller, cctx, "path_rename", ("fs/write", "fs/rm"), fd, ptr, length)
    if isinstance(src, int):
        return src
    dst = _lookup(run, caller, cctx, "path_rename", (), new_fd, new_ptr, new_length)
    if isinstance(dst, int):
        return dst
    done = src[1].rename(src[3], dst[3], src_at=src[2], dst_at=dst[2])
    return OK if done is None else errno_of(done)


def _path_open(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _dirflags, ptr, length, oflags, base, inheriting, fdflags, out = p
    st = state(run)
    mem = guest_memory(run, caller, cctx)
    read, write = bool(base & Rights.FD_READ), bool(base & wasi.WRITE_RIGHTS)
    if not FS_CAPABILITIES & run.grant:  # nothing to look up with: refused before the path is even resolved
        wanted = (
            "fs/write" if write or oflags & (wasi.OFLAG_CREAT | wasi.OFLAG_TRUNC) else "fs/read" if read else "fs/ls"
        )
        return deny(run, "path_open", wanted, record_path(mem, ptr, length))
    parent = st.fds.get(fd)
    got = _lookup(run, caller, cctx, "path_open", (), fd, ptr, length)
    if isinstance(got, int):
        return got
    assert parent is not None
    mem, ov, at, path = got
    span(mem, out, 4)
    if not parent.rights & Rights.PATH_OPEN:
        return NOTCAPABLE
    base, inheriting = base % 2**64 & parent.inheriting, inheriting % 2**64 & parent.inheriting
    create, want_dir = bool(oflags & wasi.OFLAG_CREAT), bool(oflags & wasi.OFLAG_DIRECTORY)
    exclusive, truncate = bool(oflags & wasi.OFLAG_EXCL), bool(oflags & wasi.OFLAG_TRUNC)
    found = ov.stat_path(path, at)
    is_dir = not isinstance(found, OvErrno) and found.kind == "dir"
    if isinstance(found, OvErrno) and not create:
        return errno_of(found)  # (with O_CREAT the overlay's open says which errno: ISDIR for "file/")
    needs: list[str] = []
    if is_dir:
        needs.append("fs/ls")
    else:
        if read:
            needs.append("fs/read")
        if write or truncate or (create and isinstance(found, OvErrno)):
            needs.append("fs/write")
        if not needs:
            needs.append("fs/ls")
    refused = need(run, "path_open", tuple(needs), path)
    if refused is not None:
        return refused
    number = st.next_fd()
    if number is None:
        return int(Errno.MFILE)
    handle = ov.open(path, at, create=create, exclusive=exclusive, truncate=truncate, directory=want_dir)
    if isinstance(handle, OvErrno):
        return errno_of(handle)
    stat = ov.stat(handle)
    if isinstance(stat, OvErrno):
        ov.close(handle)
        return errno_of(stat)
    if stat.kind == "dir":
        if write:
            ov.close(handle)
            return ISDIR
        entry = Fd(DIR, base & wasi.DIRECTORY_RIGHTS, inheriting, fdflags & SETTABLE_FLAGS, handle)
    else:
        entry = Fd(FILE, base & wasi.FILE_RIGHTS, 0, fdflags & SETTABLE_FLAGS, handle)
    st.fds[number] = entry
    pack(mem, out, _U32, number)
    return OK


def _path_symlink(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return NOTSUP if p[2] in state(run).fds else BADF


def _path_link(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fds = state(run).fds
    return NOTSUP if p[0] in fds and p[4] in fds else BADF


#: The calls that name a path under a directory descriptor, by name.
PATH_HANDLERS: Final[dict[str, Handler]] = {
    "path_create_directory": _namespace(
        "path_create_directory", ("fs/write",), lambda ov, path, at: ov.mkdir(path, at)
    ),
    "path_filestat_get": _path_filestat_get,
    "path_filestat_set_times": _path_filestat_set_times,
    "path_link": _path_link,
    "path_open": _path_open,
    "path_readlink": _path_readlink,
    "path_remove_directory": _namespace("path_remove_directory", ("fs/rm",), lambda ov, path, at: ov.rmdir(path, at)),
    "path_rename": _path_rename,
    "path_symlink": _path_symlink,
    "path_unlink_file": _namespace("path_unlink_file", ("fs/rm",), lambda ov, path, at: ov.unlink(path, at)),
}
