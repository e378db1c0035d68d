"""WASI calls on paths: open, stat, mkdir, rmdir, unlink, rename, readlink, times — and no links.

## The one decision
Each call first checks the rights of the directory descriptor it names
(:data:`~kuro_wasm.model.wasi.PATH_RIGHTS`: ``ENOTCAPABLE``, nothing recorded), then the grant.
What ``path_open`` needs of the grant is decided by what it opens: reading a file needs ``fs/read``,
a directory ``fs/ls``, writing, creating or truncating ``fs/write`` (a grant with no ``fs/…``
capability at all is refused before the path is even resolved); a directory opened with ``fd_write`` is
``EISDIR`` (its other "write" rights, as ``fd_datasync``, it may hold, as under wasmtime). The new
descriptor is the lowest free number (POSIX ``open``); its rights are those asked for that apply to what
it opened, every one passed on by its directory (:func:`~kuro_wasm.model.wasi.open_rights`), or ``ENOTCAPABLE``. Every
namespace change is the overlay's (:mod:`kuro_fs.overlay`, POSIX semantics as wasmtime's WASI), pending
until the next commit point. kuro.fs has no symlinks or hard links: ``path_symlink``/``path_link`` are ``ENOTSUP``.

## Effects
The overlay, guest memory, the run's denial record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kuro_fs.overlay import Errno as OvErrno
from kuro_fs.overlay import Handle, Overlay, Stat
from kuro_fs.paths import MAX_PATH_BYTES
from kuro_wasm.host.calls import Handler, Memory, guest_memory, pack, span
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_fds import SETTABLE_FLAGS, check_time_flags, set_times
from kuro_wasm.host.wasi_guest import (
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
    run: RunContext,
    caller: int,
    cctx: int,
    name: str,
    capabilities: tuple[str, ...],
    fd: int,
    ptr: int,
    length: int,
    rights: int,
) -> tuple[Memory, Overlay, Handle, str] | int:
    """The directory fd (holding ``rights``), then the grant (a refusal recorded with the path), then the
    path: the overlay, the directory's handle and the path, or an errno (BADF, NOTDIR, NOTCAPABLE, EACCES,
    IO, NAMETOOLONG, ILSEQ, FAULT)."""
    mem = guest_memory(run, caller, cctx)
    got = directory(state(run), run, fd, rights)
    if isinstance(got, int):
        return got
    if any(c not in run.grant for c in capabilities):
        refused = need(run, name, capabilities, record_path(mem, ptr, length))
        assert refused is not None
        return refused
    if length % 2**32 > MAX_PATH_BYTES:  # refused by its length: never copied out and decoded (it may be 4 GiB)
        span(mem, ptr, length)
        return int(Errno.NAMETOOLONG)
    path = path_text(mem, ptr, length)
    if path is None:
        return int(Errno.ILSEQ)
    return mem, got[0], got[1], path


def _stat_at(
    run: RunContext, caller: int, cctx: int, name: str, capability: str, fd: int, ptr: int, length: int
) -> tuple[Memory, Stat] | int:
    """The stat of the path (a file or directory there), behind ``capability``; or an errno."""
    got = _lookup(run, caller, cctx, name, (capability,), fd, ptr, length, wasi.PATH_RIGHTS[name])
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
    rights = wasi.PATH_RIGHTS[name]

    def handler(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
        fd, ptr, length = p
        got = _lookup(run, caller, cctx, name, capabilities, fd, ptr, length, rights)
        if isinstance(got, int):
            return got
        _mem, ov, at, path = got
        done = op(ov, path, at)
        return OK if done is None else errno_of(done)

    return handler


def _path_rename(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, ptr, length, new_fd, new_ptr, new_length = p
    target = directory(state(run), run, new_fd, Rights.PATH_RENAME_TARGET)  # both rights before the grant
    if isinstance(target, int):
        return target
    src = _lookup(run, caller, cctx, "path_rename", ("fs/write", "fs/rm"), fd, ptr, length, Rights.PATH_RENAME_SOURCE)
    if isinstance(src, int):
        return src
    dst = _lookup(run, caller, cctx, "path_rename", (), new_fd, new_ptr, new_length, Rights.PATH_RENAME_TARGET)
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
    got = _lookup(run, caller, cctx, "path_open", (), fd, ptr, length, wasi.open_needs(oflags))
    if isinstance(got, int):
        return got
    parent = st.fds[fd]
    mem, ov, at, path = got
    span(mem, out, 4)
    create, want_dir = bool(oflags & wasi.OFLAG_CREAT), bool(oflags & wasi.OFLAG_DIRECTORY)
    exclusive, truncate = bool(oflags & wasi.OFLAG_EXCL), bool(oflags & wasi.OFLAG_TRUNC)
    if want_dir and (create or exclusive or truncate):
        return INVAL  # no directory is made, emptied or required new by path_open (Linux and wasmtime: EINVAL)
    found = ov.stat_path(path, at)
    is_dir = not isinstance(found, OvErrno) and found.kind == "dir"
    if isinstance(found, OvErrno) and not create:
        return errno_of(found)  # (with O_CREAT the overlay's open says which errno: ISDIR for "file/")
    rights = wasi.open_rights(base, inheriting, is_dir, parent.inheriting)
    if rights is None:
        return NOTCAPABLE  # it asked for a right its directory does not pass on
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
    assert (stat.kind == "dir") == is_dir  # what was found is what was opened (one thread, nothing between)
    if is_dir and base & Rights.FD_WRITE:  # (not fd_datasync, fd_allocate, fd_filestat_set_size: as wasmtime)
        ov.close(handle)
        return ISDIR
    st.fds[number] = Fd(DIR if is_dir else FILE, rights[0], rights[1], fdflags & SETTABLE_FLAGS, handle)
    pack(mem, out, _U32, number)
    return OK


def _path_symlink(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = directory(state(run), run, p[2], Rights.PATH_SYMLINK)
    return got if isinstance(got, int) else NOTSUP


def _path_link(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    for fd, right in ((p[0], Rights.PATH_LINK_SOURCE), (p[4], Rights.PATH_LINK_TARGET)):
        got = directory(st, run, fd, right)
        if isinstance(got, int):
            return got
    return NOTSUP


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
