"""WASI calls on descriptors themselves: close, sync, renumber, flags, rights, stat, size, times, preopens.

## The one decision
A descriptor's rights are the ones ``path_open`` gave it, for good (``fd_fdstat_set_rights`` is
``ENOTSUP``, ``EBADF`` on stdio, as on wasmtime's WASI, so a program behaves alike on both), and
closing, syncing or renumbering one is a **commit point**: everything pending in the overlay becomes
a new fs root (:meth:`kuro_wasm.host.wasi_state.WasiState.commit`; ``EIO`` if kuro.fs refuses it).
Times a program sets are kept for the run only (kuro.fs stores none): they read 0 until set.

## Effects
The run's descriptor table and overlay (:mod:`kuro_wasm.host.wasi_state`), guest memory.
"""

from __future__ import annotations

from typing import Any, Final

from kuro_fs.overlay import Errno as OvErrno
from kuro_wasm.host.calls import Handler, guest_memory, pack, store_bytes
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_guest import (
    BADF,
    INVAL,
    IO,
    NOTCAPABLE,
    NOTSUP,
    OK,
    filestat,
    need,
    regular_file,
    state,
)  # fmt: skip
from kuro_wasm.host.wasi_state import DIR, FILE, Fd, WasiState, errno_of
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Errno, Filetype, Rights

__all__ = ["FD_HANDLERS", "SETTABLE_FLAGS", "check_time_flags", "set_times"]

SETTABLE_FLAGS: Final = (
    wasi.FDFLAG_APPEND | wasi.FDFLAG_NONBLOCK | wasi.FDFLAG_DSYNC | wasi.FDFLAG_RSYNC | wasi.FDFLAG_SYNC
)


def _fd_close(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.release(p[0])
    if f is None:
        return BADF
    st.close(f)
    return OK if st.commit(run) else IO


def _fd_sync(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.get(p[0])
    if f is None or f.kind not in (FILE, DIR):
        return BADF
    return OK if st.commit(run) else IO


def _fd_renumber(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    src, dst = p
    if src not in st.fds or dst not in st.fds:
        return BADF
    if src != dst:
        st.close(st.fds[dst])
        moved = st.release(src)
        assert moved is not None
        st.fds[dst] = moved
        if not st.commit(run):
            return IO
    return OK


def _filetype(st: WasiState, f: Fd) -> Filetype:
    if f.kind == DIR:
        return Filetype.DIRECTORY
    if f.kind == FILE:
        return Filetype.REGULAR_FILE
    return Filetype.UNKNOWN  # stdio is not a terminal (isatty is false, as for wasmtime writing to files)


def _fd_fdstat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.get(p[0])
    if f is None:
        return BADF
    pack(guest_memory(run, caller, cctx), p[1], wasi.FDSTAT, int(_filetype(st, f)), f.flags, f.rights, f.inheriting)
    return OK


def _fd_fdstat_set_flags(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None or f.kind not in (FILE, DIR):
        return BADF  # stdio too, as wasmtime's WASI (50.0.1) answers even for flags it already has
    flags = p[1]  # fdflags: a bit the type does not name traps before the call (kuro_wasm.model.wasi_args)
    if f.kind == FILE or flags == f.flags:
        f.flags = flags
        return OK
    return NOTSUP


def _fd_fdstat_set_rights(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    # Rights are set at path_open only, as on wasmtime's WASI (50.0.1): a descriptor that can hold rights
    # (a file or a directory) answers ENOTSUP whatever is asked, stdio and a closed number EBADF.
    f = state(run).fds.get(p[0])
    return BADF if f is None or f.kind not in (FILE, DIR) else NOTSUP


def _fd_filestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.get(p[0])
    if f is None:
        return BADF
    if f.kind in (FILE, DIR) and not f.rights & Rights.FD_FILESTAT_GET:
        return NOTCAPABLE  # (stdio has no stat to keep from anyone: it answers whatever its rights)
    mem = guest_memory(run, caller, cctx)
    handle = st.handle(f)
    if handle is None or st.overlay is None:
        if f.kind == DIR:  # the preopen, before the overlay exists
            ov = st.open_overlay(run)
            if ov is None:
                return IO
            handle = ov.root
        else:
            pack(mem, p[1], wasi.FILESTAT, 0, 0, int(_filetype(st, f)), 0, 0, 0, 0, 0)
            return OK
    assert st.overlay is not None
    stat = st.overlay.stat(handle)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    pack(mem, p[1], wasi.FILESTAT, *filestat(st, stat))
    return OK


def _fd_filestat_set_size(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = regular_file(state(run), p[0])
    if isinstance(got, int):
        return BADF  # only a regular file opened for writing has a size to set
    f, ov, handle = got
    if not f.rights & Rights.FD_WRITE:
        return INVAL  # not open for writing: EINVAL, as Linux's ftruncate and wasmtime's WASI
    if not f.rights & Rights.FD_FILESTAT_SET_SIZE:
        return NOTCAPABLE
    refused = need(run, "fd_filestat_set_size", ("fs/write",))
    if refused is not None:
        return refused
    done = ov.set_size(handle, p[1]) if p[1] >= 0 else OvErrno.INVAL
    return OK if done is None else errno_of(done)


def _fd_allocate(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = regular_file(state(run), p[0])
    if isinstance(got, int):
        return BADF
    f, ov, handle = got
    if not f.rights & Rights.FD_ALLOCATE:
        return BADF
    refused = need(run, "fd_allocate", ("fs/write",))
    if refused is not None:
        return refused
    offset, length = p[1] % 2**64, p[2] % 2**64
    stat = ov.stat(handle)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    if offset + length > stat.size:
        done = ov.set_size(handle, offset + length)
        if done is not None:
            return errno_of(done)
    return OK


def _fd_advise(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    # EBADF for stdio too, not regular_file's ESPIPE: wasmtime's WASI advises only a file descriptor.
    if isinstance(regular_file(state(run), p[0]), int):
        return BADF
    return OK  # any of the six advices (another traps before the call: kuro_wasm.model.wasi_args)


def check_time_flags(flags: int) -> int | None:
    if (flags & wasi.FSTFLAG_ATIM and flags & wasi.FSTFLAG_ATIM_NOW) or (
        flags & wasi.FSTFLAG_MTIM and flags & wasi.FSTFLAG_MTIM_NOW
    ):
        return INVAL
    return None


def set_times(run: RunContext, st: WasiState, ino: int, atim: int, mtim: int, flags: int) -> None:
    """Record the times a ``*set_times`` call asks for (``*_NOW``: the run's realtime clock)."""
    old_atim, old_mtim = st.times.get(ino, (0, 0))
    now = (st.now(run, wasi.CLOCK_REALTIME) or 0) if flags & (wasi.FSTFLAG_ATIM_NOW | wasi.FSTFLAG_MTIM_NOW) else 0
    new_atim = atim % 2**64 if flags & wasi.FSTFLAG_ATIM else now if flags & wasi.FSTFLAG_ATIM_NOW else old_atim
    new_mtim = mtim % 2**64 if flags & wasi.FSTFLAG_MTIM else now if flags & wasi.FSTFLAG_MTIM_NOW else old_mtim
    st.times[ino] = (new_atim, new_mtim)


def _fd_filestat_set_times(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, atim, mtim, flags = p
    st = state(run)
    f = st.fds.get(fd)
    if f is None:
        return BADF
    bad = check_time_flags(flags)
    if bad is not None:
        return bad
    if f.kind not in (FILE, DIR):
        return BADF  # stdio has no times to set: EBADF, as wasmtime's WASI (50.0.1), after a bad flag pair
    if not f.rights & Rights.FD_FILESTAT_SET_TIMES:
        return NOTCAPABLE
    refused = need(run, "fd_filestat_set_times", ("fs/write",))
    if refused is not None:
        return refused
    ov = st.open_overlay(run)  # the preopen may be the first of the tree the program looks at
    handle = st.handle(f)
    if ov is None or handle is None:
        return IO
    stat = ov.stat(handle)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    set_times(run, st, stat.ino, atim, mtim, flags)
    return OK


def _fd_prestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None or f.preopen is None:
        return BADF
    pack(guest_memory(run, caller, cctx), p[1], wasi.PRESTAT, wasi.PREOPENTYPE_DIR, len(f.preopen))
    return OK


def _fd_prestat_dir_name(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None or f.preopen is None:
        return BADF
    mem = guest_memory(run, caller, cctx)
    if p[2] % 2**32 < len(f.preopen):
        return int(Errno.NAMETOOLONG)
    store_bytes(mem, p[1], f.preopen)
    return OK


#: The calls on a descriptor itself (not its bytes), by name.
FD_HANDLERS: Final[dict[str, Handler]] = {
    "fd_advise": _fd_advise,
    "fd_allocate": _fd_allocate,
    "fd_close": _fd_close,
    "fd_datasync": _fd_sync,
    "fd_fdstat_get": _fd_fdstat_get,
    "fd_fdstat_set_flags": _fd_fdstat_set_flags,
    "fd_fdstat_set_rights": _fd_fdstat_set_rights,
    "fd_filestat_get": _fd_filestat_get,
    "fd_filestat_set_size": _fd_filestat_set_size,
    "fd_filestat_set_times": _fd_filestat_set_times,
    "fd_prestat_get": _fd_prestat_get,
    "fd_prestat_dir_name": _fd_prestat_dir_name,
    "fd_renumber": _fd_renumber,
    "fd_sync": _fd_sync,
}
