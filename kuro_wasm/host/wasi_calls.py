"""The WASI preview 1 functions of one run: decode arguments → capability → descriptor table / overlay → errno.

## The one decision
Every call answers an errno (:class:`kuro_wasm.model.wasi.Errno`) and nothing else crosses back:
a pointer/length outside guest memory is ``EFAULT`` (the trampoline's fault code), a refused
capability is ``EACCES`` (:data:`kuro_wasm.model.wasi.DENIED_ERRNO`) **recorded in**
``kuro/denials`` (:meth:`RunContext.deny`, one counted entry per distinct call) while the guest
keeps running, and a run that must stop (kill, deadline,
output cap, ``proc_exit``) answers None — a trap whose text nobody reads; *why* is in the context.
The capability is checked at **every** call that has an effect, by what the call does:

==========================================  ==================================================
call                                        needs
==========================================  ==================================================
``fd_read`` of fd 0, ``poll_oneoff`` on it  ``stdin/read``
``path_open`` for reading a file            ``fs/read`` (and every ``fd_read``/``fd_pread``)
``path_open`` of a directory; ``fd_readdir``, ``fs/ls``
``path_filestat_get``, ``path_readlink``
``path_open`` for writing, creating or      ``fs/write`` (and every ``fd_write``/``fd_pwrite``,
truncating; ``path_create_directory``;      ``fd_filestat_set_size``, ``fd_allocate``)
``*_set_times``
``path_unlink_file``, ``path_remove_directory``  ``fs/rm``
``path_rename``                             ``fs/write`` and ``fs/rm``
==========================================  ==================================================

An fd's rights are fixed at ``path_open`` (what was asked, within what its directory may pass on)
and only shrink (``fd_fdstat_set_rights``). Reading a descriptor not opened for reading, or writing
one not opened for writing, is ``EBADF`` as on POSIX (and in wasmtime's WASI); other missing fd
rights are ``ENOTCAPABLE``, which the program brought on itself and which is not a denial.

Where POSIX leaves room, the answers follow wasmtime's built-in WASI (the differential tests in
``tests/wasi`` hold this binding to it on the same trees): ``lseek`` on stdio is ``ESPIPE``, reading
a directory ``EBADF``, opening one for writing ``EISDIR``, the CPU-time clocks are refused
(``ENOTSUP`` here), ``sock_*`` on a descriptor that is not a socket ``ENOTSOCK``.

## Effects
Guest memory (through :mod:`kuro_wasm.host.calls`), the run's stream, stdin and condition variable,
the overlay, the host's clocks and entropy (:mod:`kuro_wasm.host.wasi_state`).

## Not done here
No sockets (none can be opened: no preopened listener), no symlinks or hard links (kuro.fs has
neither: ``path_symlink``/``path_link`` are ``ENOTSUP``), no signals. File times: kuro.fs keeps
none, so they read 0 unless the program set them (``*_set_times``) during the run, which keeps
them for the run only.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any, Final

from kuro_fs.overlay import Errno as OvErrno
from kuro_fs.overlay import Handle, Overlay, Stat
from kuro_wasm.host.calls import Handler, Memory, guest_memory, guest_view, load, pack, span, store_bytes, unpack
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_state import DIR, FILE, FS_CAPABILITIES, STDIN, Fd, WasiState, errno_of
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Errno, Filetype, Rights

__all__ = ["HANDLERS", "state"]

_OK: Final = 0
_BADF: Final = int(Errno.BADF)
_INVAL: Final = int(Errno.INVAL)
_IO: Final = int(Errno.IO)
_NOTSUP: Final = int(Errno.NOTSUP)
_NOTCAPABLE: Final = int(Errno.NOTCAPABLE)
_DENIED: Final = int(wasi.DENIED_ERRNO)
_SPIPE: Final = int(Errno.SPIPE)
_ISDIR: Final = int(Errno.ISDIR)
_NOTDIR: Final = int(Errno.NOTDIR)
_U32: Final = wasi.U32
_U64: Final = wasi.U64
_IOVEC: Final = wasi.IOVEC
_I64_MAX: Final = 2**63 - 1
#: The one device number every kuro.fs entry reports (one filesystem).
DEVICE: Final = 0x6B75726F  # "kuro"


def state(run: RunContext) -> WasiState:
    """The run's WASI state (set by the kind before the entry is called)."""
    st: WasiState = run.kind_state["wasi"]
    return st


# ---- shared helpers


def _deny(run: RunContext, name: str, capability: str, path: str | None = None) -> int:
    run.deny(name, capability, path)
    return _DENIED


def _need(run: RunContext, name: str, capabilities: tuple[str, ...], path: str | None = None) -> int | None:
    """None if every capability is granted, else EACCES with each missing one recorded."""
    missing = [c for c in capabilities if c not in run.grant]
    for capability in missing:
        run.deny(name, capability, path)
    return _DENIED if missing else None


def _path(mem: Memory, ptr: int, length: int) -> str | None:
    """The UTF-8 path at (ptr, len), or None if it is not UTF-8 (``EILSEQ``). Raises Fault."""
    try:
        return load(mem, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _record_path(mem: Memory, ptr: int, length: int) -> str | None:
    if length % 2**32 > 4096:
        return None
    try:
        return _path(mem, ptr, length)
    except Exception:
        return None


def _iovecs(mem: Memory, iovs: int, count: int) -> list[tuple[int, int]]:
    """The (pointer, length) of each buffer of an iovec array, every one bounds-checked. Raises Fault."""
    if count == 1:
        buf, length = unpack(mem, iovs, _IOVEC)
        span(mem, buf, length)
        return [(buf, length)]
    raw = load(mem, iovs, (count % 2**32) * _IOVEC.size)
    out = list(_IOVEC.iter_unpack(raw))
    for buf, length in out:
        span(mem, buf, length)
    return out


def _gather(mem: Memory, iovs: int, count: int) -> bytes:
    """The bytes of an iovec array, concatenated. Raises Fault."""
    if count == 1:
        buf, length = unpack(mem, iovs, _IOVEC)
        return load(mem, buf, length)
    return b"".join(load(mem, buf, n) for buf, n in _iovecs(mem, iovs, count))


def _scatter(mem: Memory, bufs: list[tuple[int, int]], data: bytes | memoryview) -> None:
    """Copy ``data`` into the buffers in order (the caller sized it to fit)."""
    at = 0
    view = memoryview(data)
    for buf, length in bufs:
        if at >= len(view):
            break
        piece = view[at : at + length]
        store_bytes(mem, buf, piece)
        at += len(piece)


def _dir(st: WasiState, run: RunContext, fd: int) -> tuple[Overlay, Handle] | int:
    """The overlay and handle of directory descriptor ``fd``, or an errno (BADF, NOTDIR, IO)."""
    f = st.fds.get(fd)
    if f is None:
        return _BADF
    if f.kind != DIR:
        return _NOTDIR
    ov = st.open_overlay(run)
    if ov is None:
        return _IO
    handle = st.handle(f)
    assert handle is not None
    return ov, handle


def _filestat(st: WasiState, stat: Stat) -> tuple[int, ...]:
    """A ``filestat``: one device for kuro.fs; times 0 unless the program set them this run."""
    kind = Filetype.DIRECTORY if stat.kind == "dir" else Filetype.REGULAR_FILE
    atim, mtim = st.times.get(stat.ino, (0, 0))
    return (DEVICE, stat.ino, int(kind), 1, stat.size, atim, mtim, max(atim, mtim))


def _file(st: WasiState, fd: int) -> tuple[Fd, Overlay, Handle] | int:
    """A regular file's descriptor, or the errno for this one: BADF (closed, a directory), SPIPE (stdio).

    As wasmtime's WASI answers positional calls (seek, tell, pread, pwrite) on stdio and directories.
    """
    f = st.fds.get(fd)
    if f is None:
        return _BADF
    if f.kind != FILE:
        return _BADF if f.kind == DIR else _SPIPE
    assert st.overlay is not None and f.handle is not None
    return f, st.overlay, f.handle


# ---- args, environ


def _strings_get(which: str) -> Handler:
    """``args_get`` / ``environ_get``: the pointers, then the NUL-terminated strings."""

    def handler(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
        ptrs, buf = p
        items: tuple[bytes, ...] = getattr(state(run), which)
        mem = guest_memory(run, caller, cctx)
        offsets, at = [], buf % 2**32
        for item in items:
            offsets.append(at)
            at += len(item) + 1
        span(mem, ptrs, 4 * len(offsets))
        store_bytes(mem, buf, b"".join(item + b"\0" for item in items))
        if offsets:
            store_bytes(mem, ptrs, struct.pack(f"<{len(offsets)}I", *offsets))
        return _OK

    return handler


def _sizes_get(which: str) -> Handler:
    """``args_sizes_get`` / ``environ_sizes_get``: the count and the buffer size the strings need."""

    def handler(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
        count_ptr, size_ptr = p
        items: tuple[bytes, ...] = getattr(state(run), which)
        mem = guest_memory(run, caller, cctx)
        span(mem, count_ptr, 4)
        pack(mem, size_ptr, _U32, sum(len(item) + 1 for item in items))
        pack(mem, count_ptr, _U32, len(items))
        return _OK

    return handler


# ---- clocks, random, scheduling, process


def _clock_res_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    clock, ptr = p
    if clock not in (wasi.CLOCK_REALTIME, wasi.CLOCK_MONOTONIC):
        return _NOTSUP if clock in (wasi.CLOCK_PROCESS_CPUTIME, wasi.CLOCK_THREAD_CPUTIME) else _INVAL
    pack(guest_memory(run, caller, cctx), ptr, _U64, 1)
    return _OK


def _clock_time_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    clock, _precision, ptr = p
    mem = guest_memory(run, caller, cctx)
    span(mem, ptr, 8)
    now = state(run).now(run, clock)
    if now is None:
        return _NOTSUP if clock in (wasi.CLOCK_PROCESS_CPUTIME, wasi.CLOCK_THREAD_CPUTIME) else _INVAL
    pack(mem, ptr, _U64, now)
    return _OK


def _random_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    buf, length = p
    mem = guest_memory(run, caller, cctx)
    _, n = span(mem, buf, length)
    store_bytes(mem, buf, state(run).random(run, n))
    return _OK


def _sched_yield(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return _OK


def _proc_exit(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    state(run).exit_code = p[0]
    return None  # a trap ends the guest; the kind reads the exit code (it is not a stop)


def _proc_raise(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return _NOTSUP


def _sock(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    """There are no socket descriptors: an open fd is ENOTSOCK, any other EBADF."""
    return int(Errno.NOTSOCK) if p[0] in state(run).fds else _BADF


def _path_symlink(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return _NOTSUP if p[2] in state(run).fds else _BADF


def _path_link(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fds = state(run).fds
    return _NOTSUP if p[0] in fds and p[4] in fds else _BADF


# ---- descriptors


def _fd_close(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.pop(p[0], None)
    if f is None:
        return _BADF
    st.close(f)
    return _OK if st.commit(run) else _IO


def _fd_sync(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.get(p[0])
    if f is None or f.kind not in (FILE, DIR):
        return _BADF
    return _OK if st.commit(run) else _IO


def _fd_renumber(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    src, dst = p
    if src not in st.fds or dst not in st.fds:
        return _BADF
    if src != dst:
        st.close(st.fds[dst])
        st.fds[dst] = st.fds.pop(src)
        if not st.commit(run):
            return _IO
    return _OK


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
        return _BADF
    pack(guest_memory(run, caller, cctx), p[1], wasi.FDSTAT, int(_filetype(st, f)), f.flags, f.rights, f.inheriting)
    return _OK


_SETTABLE_FLAGS: Final = (
    wasi.FDFLAG_APPEND | wasi.FDFLAG_NONBLOCK | wasi.FDFLAG_DSYNC | wasi.FDFLAG_RSYNC | wasi.FDFLAG_SYNC
)


def _fd_fdstat_set_flags(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None:
        return _BADF
    flags = p[1] & 0xFFFF
    if flags & ~_SETTABLE_FLAGS:
        return _INVAL
    if f.kind == FILE or f.kind == STDIN or flags == f.flags:
        f.flags = flags
        return _OK
    return _NOTSUP


def _fd_fdstat_set_rights(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None:
        return _BADF
    base, inheriting = p[1] % 2**64, p[2] % 2**64
    if base & ~f.rights or inheriting & ~f.inheriting:
        return _NOTCAPABLE  # rights only shrink
    f.rights, f.inheriting = base, inheriting
    return _OK


def _fd_filestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    st = state(run)
    f = st.fds.get(p[0])
    if f is None:
        return _BADF
    mem = guest_memory(run, caller, cctx)
    handle = st.handle(f)
    if handle is None or st.overlay is None:
        if f.kind == DIR:  # the preopen, before the overlay exists
            ov = st.open_overlay(run)
            if ov is None:
                return _IO
            handle = ov.root
        else:
            pack(mem, p[1], wasi.FILESTAT, 0, 0, int(_filetype(st, f)), 0, 0, 0, 0, 0)
            return _OK
    assert st.overlay is not None
    stat = st.overlay.stat(handle)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    pack(mem, p[1], wasi.FILESTAT, *_filestat(st, stat))
    return _OK


def _fd_filestat_set_size(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = _file(state(run), p[0])
    if isinstance(got, int):
        return _BADF  # only a regular file opened for writing has a size to set
    f, ov, handle = got
    if not f.rights & Rights.FD_FILESTAT_SET_SIZE:
        return _BADF
    refused = _need(run, "fd_filestat_set_size", ("fs/write",))
    if refused is not None:
        return refused
    done = ov.set_size(handle, p[1]) if p[1] >= 0 else OvErrno.INVAL
    return _OK if done is None else errno_of(done)


def _fd_allocate(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = _file(state(run), p[0])
    if isinstance(got, int):
        return _BADF
    f, ov, handle = got
    if not f.rights & Rights.FD_ALLOCATE:
        return _BADF
    refused = _need(run, "fd_allocate", ("fs/write",))
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
    return _OK


def _fd_advise(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = _file(state(run), p[0])
    if isinstance(got, int):
        return got
    return _OK if 0 <= p[3] <= 5 else _INVAL


def _set_times_flags(flags: int) -> int | None:
    if (flags & wasi.FSTFLAG_ATIM and flags & wasi.FSTFLAG_ATIM_NOW) or (
        flags & wasi.FSTFLAG_MTIM and flags & wasi.FSTFLAG_MTIM_NOW
    ):
        return _INVAL
    return None


def _set_times(run: RunContext, st: WasiState, ino: int, atim: int, mtim: int, flags: int) -> None:
    """Record the times a ``*_set_times`` call asks for (``*_NOW``: the run's realtime clock)."""
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
        return _BADF
    bad = _set_times_flags(flags)
    if bad is not None:
        return bad
    handle = st.handle(f)
    if f.kind not in (FILE, DIR) or handle is None or st.overlay is None:
        return _OK  # stdio (and a preopen not yet looked at) has no times to keep
    refused = _need(run, "fd_filestat_set_times", ("fs/write",))
    if refused is not None:
        return refused
    stat = st.overlay.stat(handle)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    _set_times(run, st, stat.ino, atim, mtim, flags)
    return _OK


def _fd_prestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None or f.preopen is None:
        return _BADF
    pack(guest_memory(run, caller, cctx), p[1], wasi.PRESTAT, wasi.PREOPENTYPE_DIR, len(f.preopen))
    return _OK


def _fd_prestat_dir_name(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    f = state(run).fds.get(p[0])
    if f is None or f.preopen is None:
        return _BADF
    mem = guest_memory(run, caller, cctx)
    if p[2] % 2**32 < len(f.preopen):
        return int(Errno.NAMETOOLONG)
    store_bytes(mem, p[1], f.preopen)
    return _OK


# ---- reading and writing


def _fd_write(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, out = p
    st: WasiState = run.kind_state["wasi"]
    f = st.fds.get(fd)
    if f is None:
        return _BADF
    stream = f.stream
    if stream is not None and count == 1:  # the hot path: printf, write(1, …): one buffer to the stream
        view = guest_view(run, caller, cctx)
        out %= _2_32
        try:
            buf, n = _IOVEC_FROM(view, iovs % _2_32)
        except struct.error:
            return _FAULT
        if buf + n > len(view) or out + 4 > len(view):
            return _FAULT
        if not run.emit(stream, view[buf : buf + n].tobytes()):
            run.stop("output-capped")
            return None
        _U32_INTO(view, out, n)
        return _OK
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    if stream is not None:
        data = _gather(mem, iovs, count)
        if not run.emit(stream, data):
            run.stop("output-capped")
            return None
        pack(mem, out, _U32, len(data))
        return _OK
    if f.kind != FILE or not f.rights & Rights.FD_WRITE:
        return _BADF
    refused = _need(run, "fd_write", ("fs/write",))
    if refused is not None:
        return refused
    data = _gather(mem, iovs, count)
    assert st.overlay is not None and f.handle is not None
    at = f.pos
    if f.flags & wasi.FDFLAG_APPEND:
        stat = st.overlay.stat(f.handle)
        if isinstance(stat, OvErrno):
            return errno_of(stat)
        at = stat.size
    written = st.overlay.write(f.handle, at, data)
    if isinstance(written, OvErrno):
        return errno_of(written)
    f.pos = at + written
    if f.flags & (wasi.FDFLAG_SYNC | wasi.FDFLAG_DSYNC) and not st.commit(run):
        return _IO
    pack(mem, out, _U32, written)
    return _OK


_2_32: Final = 2**32
_FAULT: Final = int(Errno.FAULT)
_IOVEC_FROM: Final = _IOVEC.unpack_from
_U32_INTO: Final = _U32.pack_into


def _fd_pwrite(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, offset, out = p
    st = state(run)
    got = _file(st, fd)
    if isinstance(got, int):
        return got
    f, ov, handle = got
    if not f.rights & Rights.FD_WRITE:
        return _BADF
    refused = _need(run, "fd_pwrite", ("fs/write",))
    if refused is not None:
        return refused
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    data = _gather(mem, iovs, count)
    if offset < 0:
        return _INVAL
    if f.flags & wasi.FDFLAG_APPEND:  # as Linux (and wasmtime): an O_APPEND descriptor always writes at the end
        stat = ov.stat(handle)
        if isinstance(stat, OvErrno):
            return errno_of(stat)
        offset = stat.size
    written = ov.write(handle, offset, data)
    if isinstance(written, OvErrno):
        return errno_of(written)
    if f.flags & (wasi.FDFLAG_SYNC | wasi.FDFLAG_DSYNC) and not st.commit(run):
        return _IO
    pack(mem, out, _U32, written)
    return _OK


def _read_stdin(run: RunContext, f: Fd, bufs: list[tuple[int, int]]) -> bytes | int | None:
    """Up to the buffers' total from stdin: bytes (b"" at end of input), EAGAIN (nonblocking), None (stop)."""
    if "stdin/read" not in run.grant:
        return _deny(run, "fd_read", "stdin/read")
    total = sum(n % 2**32 for _, n in bufs)
    if total == 0:
        return b""
    assert run.stdin is not None
    with run.cond:
        while True:
            if run.should_stop() is not None:
                return None
            chunk = run.stdin.take(total)
            if chunk is not None:
                return chunk
            if f.flags & wasi.FDFLAG_NONBLOCK:
                return int(Errno.AGAIN)
            run.cond.wait(timeout=max(0.0, min(run.deadline - time.monotonic(), 0.05)))


def _fd_read(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, out = p
    st = state(run)
    f = st.fds.get(fd)
    if f is None:
        return _BADF
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    if f.kind == STDIN:
        bufs = _iovecs(mem, iovs, count)
        got = _read_stdin(run, f, bufs)
        if got is None or isinstance(got, int):
            return got
        mem = guest_memory(run, caller, cctx)
        _scatter(mem, bufs, got)
        pack(mem, out, _U32, len(got))
        return _OK
    if f.kind != FILE or not f.rights & Rights.FD_READ:
        return _BADF
    refused = _need(run, "fd_read", ("fs/read",))
    if refused is not None:
        return refused
    n = _read_into(st, f, mem, iovs, count, f.pos)
    if n < 0:
        return -n
    f.pos += n
    pack(mem, out, _U32, n)
    return _OK


def _read_into(st: WasiState, f: Fd, mem: Memory, iovs: int, count: int, offset: int) -> int:
    """Read the file at ``offset`` into the iovec buffers; bytes read, or a negated errno. Raises Fault."""
    assert st.overlay is not None and f.handle is not None
    bufs = _iovecs(mem, iovs, count)
    n = sum(length % 2**32 for _, length in bufs)
    data = st.overlay.read(f.handle, offset, n)
    if isinstance(data, OvErrno):
        return -errno_of(data)
    _scatter(mem, bufs, data)
    return len(data)


def _fd_pread(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, offset, out = p
    st = state(run)
    got = _file(st, fd)
    if isinstance(got, int):
        return got
    f, _ov, _handle = got
    if not f.rights & Rights.FD_READ:
        return _BADF
    refused = _need(run, "fd_pread", ("fs/read",))
    if refused is not None:
        return refused
    if offset < 0:
        return _INVAL
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    n = _read_into(st, f, mem, iovs, count, offset)
    if n < 0:
        return -n
    pack(mem, out, _U32, n)
    return _OK


def _fd_seek(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, offset, whence, out = p
    got = _file(state(run), fd)
    if isinstance(got, int):
        return got
    f, ov, handle = got
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 8)
    if whence == wasi.WHENCE_SET:
        base = 0
    elif whence == wasi.WHENCE_CUR:
        base = f.pos
    elif whence == wasi.WHENCE_END:
        stat = ov.stat(handle)
        if isinstance(stat, OvErrno):
            return errno_of(stat)
        base = stat.size
    else:
        return _INVAL
    if not f.rights & (Rights.FD_SEEK | (Rights.FD_TELL if whence == wasi.WHENCE_CUR and offset == 0 else 0)):
        return _NOTCAPABLE
    new = base + offset
    if new < 0 or new > _I64_MAX:
        return _INVAL
    f.pos = new
    pack(mem, out, _U64, new)
    return _OK


def _fd_tell(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = _file(state(run), p[0])
    if isinstance(got, int):
        return got
    f = got[0]
    if not f.rights & (Rights.FD_TELL | Rights.FD_SEEK):
        return _NOTCAPABLE
    pack(guest_memory(run, caller, cctx), p[1], _U64, f.pos)
    return _OK


def _fd_readdir(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, buf, length, cookie, out = p
    st = state(run)
    f = st.fds.get(fd)
    if f is None:
        return _BADF
    if f.kind != DIR:
        return _NOTDIR
    if not f.rights & Rights.FD_READDIR:
        return _NOTCAPABLE
    refused = _need(run, "fd_readdir", ("fs/ls",))
    if refused is not None:
        return refused
    mem = guest_memory(run, caller, cctx)
    _, size = span(mem, buf, length)
    span(mem, out, 4)
    cookie %= 2**64
    if cookie == 0 or f.listing is None:
        listing = _listing(st, run, f)
        if isinstance(listing, int):
            return listing
        f.listing = listing
    entries = f.listing
    blob = bytearray()
    index = cookie
    while index < len(entries) and len(blob) < size:
        name, kind, ino = entries[index]
        index += 1
        blob += wasi.DIRENT.pack(index, ino, len(name), kind) + name
    store_bytes(mem, buf, blob[:size])
    pack(mem, out, _U32, min(len(blob), size))
    return _OK


def _listing(st: WasiState, run: RunContext, f: Fd) -> list[tuple[bytes, int, int]] | int:
    """``.``, ``..`` and the directory's entries sorted by name: (name, filetype, inode)."""
    ov = st.open_overlay(run)
    handle = st.handle(f)
    if ov is None or handle is None:
        return _IO
    here = ov.stat(handle)
    entries = ov.readdir(handle)
    if isinstance(here, OvErrno):
        return errno_of(here)
    if isinstance(entries, OvErrno):
        return errno_of(entries)
    directory = int(Filetype.DIRECTORY)
    out = [(b".", directory, here.ino), (b"..", directory, here.ino)]
    for e in entries:
        kind = directory if e.kind == "dir" else int(Filetype.REGULAR_FILE)
        out.append((e.name.encode("utf-8", "surrogatepass"), kind, e.ino))
    return out


# ---- paths


def _lookup(
    run: RunContext, caller: int, cctx: int, name: str, fd: int, ptr: int, length: int
) -> tuple[Memory, Overlay, Handle, str] | int:
    """The directory fd's overlay and handle, and the path: or an errno (BADF, NOTDIR, IO, ILSEQ, FAULT)."""
    st = state(run)
    mem = guest_memory(run, caller, cctx)
    path = _path(mem, ptr, length)
    got = _dir(st, run, fd)
    if isinstance(got, int):
        return got
    if path is None:
        return int(Errno.ILSEQ)
    return mem, got[0], got[1], path


def _path_filestat_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _flags, ptr, length, buf = p
    mem = guest_memory(run, caller, cctx)
    if "fs/ls" not in run.grant:
        return _deny(run, "path_filestat_get", "fs/ls", _record_path(mem, ptr, length))
    got = _lookup(run, caller, cctx, "path_filestat_get", fd, ptr, length)
    if isinstance(got, int):
        return got
    mem, ov, at, path = got
    span(mem, buf, wasi.FILESTAT.size)
    stat = ov.stat_path(path, at)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    pack(mem, buf, wasi.FILESTAT, *_filestat(state(run), stat))
    return _OK


def _path_filestat_set_times(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _flags, ptr, length, atim, mtim, fst = p
    mem = guest_memory(run, caller, cctx)
    if "fs/write" not in run.grant:
        return _deny(run, "path_filestat_set_times", "fs/write", _record_path(mem, ptr, length))
    bad = _set_times_flags(fst)
    if bad is not None:
        return bad
    got = _lookup(run, caller, cctx, "path_filestat_set_times", fd, ptr, length)
    if isinstance(got, int):
        return got
    _mem, ov, at, path = got
    stat = ov.stat_path(path, at)
    if isinstance(stat, OvErrno):
        return errno_of(stat)
    _set_times(run, state(run), stat.ino, atim, mtim, fst)
    return _OK


def _path_readlink(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, ptr, length, _buf, _buf_len, _used = p
    mem = guest_memory(run, caller, cctx)
    if "fs/ls" not in run.grant:
        return _deny(run, "path_readlink", "fs/ls", _record_path(mem, ptr, length))
    got = _lookup(run, caller, cctx, "path_readlink", fd, ptr, length)
    if isinstance(got, int):
        return got
    _mem, ov, at, path = got
    stat = ov.stat_path(path, at)
    return errno_of(stat) if isinstance(stat, OvErrno) else _INVAL  # it exists and is not a symlink


def _namespace(
    name: str, capabilities: tuple[str, ...], op: Callable[[Overlay, str, Handle], OvErrno | None]
) -> Handler:
    """A call that changes one path of the tree (mkdir, rmdir, unlink) behind ``capabilities``."""

    def handler(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
        fd, ptr, length = p
        mem = guest_memory(run, caller, cctx)
        missing = [c for c in capabilities if c not in run.grant]
        if missing:
            return _need(run, name, capabilities, _record_path(mem, ptr, length))
        got = _lookup(run, caller, cctx, name, fd, ptr, length)
        if isinstance(got, int):
            return got
        _mem, ov, at, path = got
        done = op(ov, path, at)
        return _OK if done is None else errno_of(done)

    return handler


def _path_rename(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, ptr, length, new_fd, new_ptr, new_length = p
    mem = guest_memory(run, caller, cctx)
    if "fs/write" not in run.grant or "fs/rm" not in run.grant:
        return _need(run, "path_rename", ("fs/write", "fs/rm"), _record_path(mem, ptr, length))
    src = _lookup(run, caller, cctx, "path_rename", fd, ptr, length)
    if isinstance(src, int):
        return src
    dst = _lookup(run, caller, cctx, "path_rename", new_fd, new_ptr, new_length)
    if isinstance(dst, int):
        return dst
    done = src[1].rename(src[3], dst[3], src_at=src[2], dst_at=dst[2])
    return _OK if done is None else errno_of(done)


def _path_open(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, _dirflags, ptr, length, oflags, base, inheriting, fdflags, out = p
    st = state(run)
    mem = guest_memory(run, caller, cctx)
    read, write = bool(base & Rights.FD_READ), bool(base & wasi.WRITE_RIGHTS)
    if not FS_CAPABILITIES & run.grant:  # nothing to look up with: refused before the path is even resolved
        wanted = (
            "fs/write" if write or oflags & (wasi.OFLAG_CREAT | wasi.OFLAG_TRUNC) else "fs/read" if read else "fs/ls"
        )
        return _deny(run, "path_open", wanted, _record_path(mem, ptr, length))
    parent = st.fds.get(fd)
    got = _lookup(run, caller, cctx, "path_open", fd, ptr, length)
    if isinstance(got, int):
        return got
    assert parent is not None
    mem, ov, at, path = got
    span(mem, out, 4)
    if not parent.rights & Rights.PATH_OPEN:
        return _NOTCAPABLE
    base, inheriting = base % 2**64 & parent.inheriting, inheriting % 2**64 & parent.inheriting
    create, directory = bool(oflags & wasi.OFLAG_CREAT), bool(oflags & wasi.OFLAG_DIRECTORY)
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
    refused = _need(run, "path_open", tuple(needs), path)
    if refused is not None:
        return refused
    number = st.next_fd()
    if number is None:
        return int(Errno.MFILE)
    handle = ov.open(path, at, create=create, exclusive=exclusive, truncate=truncate, directory=directory)
    if isinstance(handle, OvErrno):
        return errno_of(handle)
    stat = ov.stat(handle)
    if isinstance(stat, OvErrno):
        ov.close(handle)
        return errno_of(stat)
    if stat.kind == "dir":
        if write:
            ov.close(handle)
            return _ISDIR
        entry = Fd(DIR, base & wasi.DIRECTORY_RIGHTS, inheriting, fdflags & _SETTABLE_FLAGS, handle)
    else:
        entry = Fd(FILE, base & wasi.FILE_RIGHTS, 0, fdflags & _SETTABLE_FLAGS, handle)
    st.fds[number] = entry
    pack(mem, out, _U32, number)
    return _OK


# ---- poll_oneoff


def _poll_oneoff(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    subs_ptr, events_ptr, nsubs, out = p
    st = state(run)
    nsubs %= 2**32
    if nsubs == 0:
        return _INVAL
    mem = guest_memory(run, caller, cctx)
    raw = load(mem, subs_ptr, nsubs * wasi.SUBSCRIPTION.size)
    span(mem, events_ptr, nsubs * wasi.EVENT.size)
    span(mem, out, 4)
    subs = [wasi.SUBSCRIPTION.unpack_from(raw, i * wasi.SUBSCRIPTION.size) for i in range(nsubs)]
    timers: list[tuple[int, int]] = []  # (subscription index, ns to wait from now; -1: a clock not offered)
    for index, (_userdata, tag, u0, timeout, _precision, flags) in enumerate(subs):
        if tag == wasi.EVENTTYPE_CLOCK:
            if flags & wasi.SUBCLOCK_ABSTIME:
                now = st.now(run, u0 & 0xFFFFFFFF)
                timers.append((index, -1 if now is None else max(0, timeout - now)))
            else:
                timers.append((index, timeout))
    due = min((ns for _, ns in timers if ns >= 0), default=None)
    start = time.monotonic_ns()
    elapsed = 0
    while True:
        events = _ready(run, st, subs, timers, elapsed)
        if events is None:
            return None
        if events:
            break
        if st.seed is not None and due is not None:  # deterministic: the virtual clocks jump to the timer
            st.advance(due - elapsed)
            elapsed = due
            continue
        with run.cond:
            if run.should_stop() is not None:
                return None
            left = 0.05 if due is None else (due - (time.monotonic_ns() - start)) / 1e9
            if left > 0 and not _any_ready(run, subs):
                run.cond.wait(timeout=min(left, 0.05, max(0.0, run.deadline - time.monotonic())))
        if st.seed is None:
            elapsed = time.monotonic_ns() - start
    store_bytes(mem, events_ptr, b"".join(wasi.EVENT.pack(*event) for event in events))
    pack(mem, out, _U32, len(events))
    return _OK


def _any_ready(run: RunContext, subs: list[tuple[int, ...]]) -> bool:
    assert run.stdin is not None
    return any(tag != wasi.EVENTTYPE_CLOCK for _u, tag, *_rest in subs) and run.stdin.ready()


def _ready(
    run: RunContext, st: WasiState, subs: list[tuple[int, ...]], timers: list[tuple[int, int]], elapsed: int
) -> list[tuple[int, int, int, int, int]] | None:
    """The events ready now (userdata, error, type, nbytes, flags); None if the run must stop."""
    if run.should_stop() is not None:
        return None
    events: list[tuple[int, int, int, int, int]] = []
    for index, wait in timers:
        userdata = subs[index][0]
        if wait < 0:
            events.append((userdata, _INVAL, wasi.EVENTTYPE_CLOCK, 0, 0))
        elif elapsed >= wait:
            events.append((userdata, _OK, wasi.EVENTTYPE_CLOCK, 0, 0))
    for userdata, tag, u0, *_rest in subs:
        if tag == wasi.EVENTTYPE_CLOCK:
            continue
        if tag not in (wasi.EVENTTYPE_FD_READ, wasi.EVENTTYPE_FD_WRITE):
            events.append((userdata, _INVAL, tag, 0, 0))
            continue
        f = st.fds.get(u0 & 0xFFFFFFFF)
        if f is None:
            events.append((userdata, _BADF, tag, 0, 0))
        elif tag == wasi.EVENTTYPE_FD_WRITE:
            ok = f.stream is not None or (f.kind == FILE and f.rights & Rights.FD_WRITE)
            events.append((userdata, _OK if ok else _BADF, tag, 0, 0))
        elif f.kind == STDIN:
            if "stdin/read" not in run.grant:
                events.append((userdata, _deny(run, "poll_oneoff", "stdin/read"), tag, 0, 0))
            else:
                assert run.stdin is not None
                if run.stdin.ready():
                    pending = run.stdin.pending()
                    events.append((userdata, _OK, tag, pending, 0 if pending else wasi.EVENTRW_HANGUP))
        elif f.kind == FILE and f.rights & Rights.FD_READ:
            assert st.overlay is not None and f.handle is not None
            stat = st.overlay.stat(f.handle)
            size = stat.size if isinstance(stat, Stat) else 0
            events.append((userdata, _OK, tag, max(0, size - f.pos), 0))
        else:
            events.append((userdata, _BADF, tag, 0, 0))
    return events


# ---- the table

#: Every function of :data:`kuro_wasm.model.wasi.FUNCTIONS`, by name.
HANDLERS: Final[dict[str, Handler]] = {
    "args_get": _strings_get("argv"),
    "args_sizes_get": _sizes_get("argv"),
    "environ_get": _strings_get("environ"),
    "environ_sizes_get": _sizes_get("environ"),
    "clock_res_get": _clock_res_get,
    "clock_time_get": _clock_time_get,
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
    "fd_pread": _fd_pread,
    "fd_prestat_get": _fd_prestat_get,
    "fd_prestat_dir_name": _fd_prestat_dir_name,
    "fd_pwrite": _fd_pwrite,
    "fd_read": _fd_read,
    "fd_readdir": _fd_readdir,
    "fd_renumber": _fd_renumber,
    "fd_seek": _fd_seek,
    "fd_sync": _fd_sync,
    "fd_tell": _fd_tell,
    "fd_write": _fd_write,
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
    "poll_oneoff": _poll_oneoff,
    "proc_exit": _proc_exit,
    "proc_raise": _proc_raise,
    "sched_yield": _sched_yield,
    "random_get": _random_get,
    "sock_accept": _sock,
    "sock_recv": _sock,
    "sock_send": _sock,
    "sock_shutdown": _sock,
}
