"""WASI calls that move bytes: read, write, pread, pwrite, seek, tell — and readdir.

## The one decision
Bytes to fds 1 and 2 are one stream chunk per ``fd_write`` (the one output cap: the write that does
not fit stops the guest, and is measured before its bytes are gathered, so a write the cap drops costs
no host memory — its iovecs may name the same memory many times over); bytes from fd 0 are the run's
stdin, a read blocking on the run's condition variable until input, its end, kill or the deadline;
file bytes are the overlay's, read and written at the descriptor's cursor (``O_APPEND``: at the end,
for ``pwrite`` too, as Linux) with the capability checked at every call. A directory lists ``.``,
``..`` and its entries sorted by name, decided at cookie 0 and read from there by later cookies, so a
listing read in small buffers is one consistent listing (unless the listings of all descriptors pass
:data:`~kuro_wasm.host.wasi_state.MAX_LISTED` entries: the least recently listed is then read again).

## Effects
Guest memory, the run's stream and stdin, the overlay.
"""

from __future__ import annotations

import time
from typing import Any, Final

from kuro_fs.overlay import Errno as OvErrno
from kuro_wasm.host.calls import (
    ADDRESS_SPACE,
    COPY_SMALL,
    Handler,
    Memory,
    guest_base,
    guest_memory,
    guest_view,
    load,
    load_array,
    memory_size,
    pack,
    span,
    store_bytes,
)
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_guest import (
    BADF,
    FAULT,
    INVAL,
    IO,
    NOTCAPABLE,
    OK,
    deny,
    gather,
    iovec_count,
    iovec_total,
    iovecs,
    need,
    regular_file,
    scatter,
    state,
)  # fmt: skip
from kuro_wasm.host.wasi_state import DIR, FILE, STDIN, Fd, WasiState, errno_of
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Filetype, Rights

__all__ = ["IO_HANDLERS"]

_U32: Final = wasi.U32
_U64: Final = wasi.U64
_IOVEC: Final = wasi.IOVEC
_I64_MAX: Final = 2**63 - 1


def _fd_write(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, out = p
    st: WasiState = run.kind_state["wasi"]
    f = st.fds.get(fd)
    if f is None:
        return BADF
    stream = f.stream  # stdout/stderr (wherever fd_renumber put them): the run's output stream
    if stream is not None and count == 1:  # the hot path: printf, write(1, …): one buffer to the stream
        iovs %= _2_32
        out %= _2_32
        # The memory's base as the run keeps it (read once where memories never move, else one C call); its size
        # is asked again only if a range does not fit the last read (guest_base: it raises Fault, answered EFAULT).
        end = iovs + 8 if iovs + 4 > out else out + 4
        base = run.memory_base if end <= run.memory_size else 0
        if not base:
            base = guest_base(run, caller, cctx, end)
        buf, n = _IOVEC_FROM(_SPACE, base + iovs)
        stop = buf + n
        if stop > run.memory_size and stop > memory_size(run, cctx):
            return FAULT
        if n == 0:  # writing nothing to a pipe changes nothing (POSIX): no chunk, not even toward the chunk bound
            _U32_INTO(_SPACE, base + out, 0)
            return OK
        if n < _COPY_SMALL_N:
            data = _COPY_SMALL[n](_SPACE, base + buf)[0]
        elif n > _SMALL and not run.admit(n):
            run.stop("output-capped")
            return None
        else:
            data = _SPACE[base + buf : base + stop].tobytes()
        if not run.emit(stream, data):
            run.stop("output-capped")
            return None
        _U32_INTO(_SPACE, base + out, n)
        return OK
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    too_many = iovec_count(mem, iovs, count)
    if too_many is not None:
        return too_many
    if stream is not None:  # measured first: the iovecs may name one buffer many times over
        total = iovec_total(mem, iovs, count)
        if total == 0:  # nothing written: no chunk (as the one-buffer path)
            pack(mem, out, _U32, 0)
            return OK
        if not run.admit(total) or not run.emit(stream, data := gather(mem, iovs, count)):
            run.stop("output-capped")
            return None
        pack(mem, out, _U32, len(data))
        return OK
    refused = _may(run, f, Rights.FD_WRITE, "fd_write", "fs/write")
    if refused is not None:
        return refused
    iovec_total(mem, iovs, count)  # every buffer bounds-checked before any is written
    end, written = _write_file(run, st, f, f.pos, mem, iovs, count)
    if end < 0:
        return -end
    f.pos = end
    pack(mem, out, _U32, written)
    return OK


_2_32: Final = 2**32
#: A one-buffer write to a stream up to this size is copied before the stream's bounds see it (cheaper than
#: asking first); a larger one is admitted first, so one the cap drops is never copied.
_SMALL: Final = 65536
_IOVEC_FROM: Final = _IOVEC.unpack_from
_SPACE: Final = ADDRESS_SPACE
_COPY_SMALL: Final = COPY_SMALL
_COPY_SMALL_N: Final = len(COPY_SMALL)
_U32_INTO: Final = _U32.pack_into


def _may(run: RunContext, f: Fd, right: int, name: str, capability: str) -> int | None:
    """None if ``f`` is a file opened with ``right`` and the grant holds ``capability``; else EBADF (the
    descriptor cannot, as on POSIX) or EACCES (recorded: the grant does not allow it)."""
    if f.kind != FILE or not f.rights & right:
        return BADF
    return need(run, name, (capability,))


def _write_file(
    run: RunContext, st: WasiState, f: Fd, offset: int, mem: Memory, iovs: int, count: int
) -> tuple[int, int]:
    """Write the buffers of an iovec array (bounds-checked by the caller) to ``f``'s file from ``offset``
    (at its end if ``O_APPEND``, as Linux does for pwrite too): ``(offset past the last byte written,
    bytes written)``, or ``(negated errno, 0)``. One buffer at a time, so a write whose iovecs name the
    same memory many times over costs the host one buffer, not their sum; a buffer that fails after
    others were written ends the write short, as ``writev`` does. A ``sync``/``dsync`` descriptor
    commits after the write."""
    assert st.overlay is not None and f.handle is not None
    written = 0
    raw = load_array(mem, iovs, count, _IOVEC.size) or bytes(_IOVEC.size)  # no buffer: one empty write
    for buf, n in _IOVEC.iter_unpack(raw):
        if f.flags & wasi.FDFLAG_APPEND:
            stat = st.overlay.stat(f.handle)
            if isinstance(stat, OvErrno):
                return (-errno_of(stat), 0) if written == 0 else (offset, written)
            offset = stat.size
        done = st.overlay.write(f.handle, offset, load(mem, buf, n))
        if isinstance(done, OvErrno):
            if written == 0:
                return -errno_of(done), 0
            break
        offset += done
        written += done
    if f.flags & (wasi.FDFLAG_SYNC | wasi.FDFLAG_DSYNC) and not st.commit(run):
        return -IO, 0
    return offset, written


def _fd_pwrite(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, offset, out = p
    st = state(run)
    if _not_open_that_way(st, fd, writing=True):
        return BADF
    got = regular_file(st, fd)
    if isinstance(got, int):
        return got
    f = got[0]
    refused = _may(run, f, Rights.FD_WRITE, "fd_pwrite", "fs/write")
    if refused is not None:
        return refused
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    too_many = iovec_count(mem, iovs, count)
    if too_many is not None:
        return too_many
    iovec_total(mem, iovs, count)  # every buffer bounds-checked before any is written
    if offset < 0:
        return INVAL
    end, written = _write_file(run, st, f, offset, mem, iovs, count)
    if end < 0:
        return -end
    pack(mem, out, _U32, written)
    return OK


def _read_stdin(run: RunContext, f: Fd, bufs: list[tuple[int, int]]) -> bytes | int | None:
    """Up to the buffers' total from stdin: bytes (b"" at end of input), None (stop).

    Always blocking: stdin's flags cannot be set (``fd_fdstat_set_flags`` on stdio is ``EBADF``)."""
    if "stdin/read" not in run.grant:
        return deny(run, "fd_read", "stdin/read")
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
                break
            run.cond.wait(timeout=max(0.0, min(run.deadline - time.monotonic(), 0.05)))
    run.stdin.report()
    return chunk


def _fd_read(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, out = p
    st = state(run)
    f = st.fds.get(fd)
    if f is None:
        return BADF
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    too_many = iovec_count(mem, iovs, count)
    if too_many is not None:
        return too_many
    if f.kind == STDIN:
        bufs = iovecs(mem, iovs, count)
        got = _read_stdin(run, f, bufs)
        if got is None or isinstance(got, int):
            return got
        mem = guest_memory(run, caller, cctx)
        scatter(mem, bufs, got)
        pack(mem, out, _U32, len(got))
        return OK
    refused = _may(run, f, Rights.FD_READ, "fd_read", "fs/read")
    if refused is not None:
        return refused
    n = _read_into(st, f, guest_view(run, caller, cctx), mem, iovs, count, f.pos)
    if n < 0:
        return -n
    f.pos += n
    pack(mem, out, _U32, n)
    return OK


def _read_into(st: WasiState, f: Fd, view: memoryview, mem: Memory, iovs: int, count: int, offset: int) -> int:
    """Read the file at ``offset`` straight into the iovec buffers (``view`` is guest memory); bytes read,
    or a negated errno. Raises Fault."""
    assert st.overlay is not None and f.handle is not None
    done = 0
    for buf, length in iovecs(mem, iovs, count):
        n = st.overlay.read_into(f.handle, offset + done, view[buf : buf + length])
        if isinstance(n, OvErrno):
            return -errno_of(n)
        done += n
        if n < length:
            break
    return done


def _not_open_that_way(st: WasiState, fd: int, *, writing: bool) -> bool:
    """Whether ``fd`` is stdio open the other way (stdin for a write, stdout/stderr for a read): ``EBADF`` before
    the ``ESPIPE`` of a positional call on stdio, as wasmtime's WASI answers (POSIX names both)."""
    f = st.fds.get(fd)
    return f is not None and (f.kind == STDIN if writing else f.stream is not None)


def _fd_pread(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, iovs, count, offset, out = p
    st = state(run)
    if _not_open_that_way(st, fd, writing=False):
        return BADF
    got = regular_file(st, fd)
    if isinstance(got, int):
        return got
    f, _ov, _handle = got
    refused = _may(run, f, Rights.FD_READ, "fd_pread", "fs/read")
    if refused is not None:
        return refused
    if offset < 0:
        return INVAL
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 4)
    too_many = iovec_count(mem, iovs, count)
    if too_many is not None:
        return too_many
    n = _read_into(st, f, guest_view(run, caller, cctx), mem, iovs, count, offset)
    if n < 0:
        return -n
    pack(mem, out, _U32, n)
    return OK


def _fd_seek(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, offset, whence, out = p
    got = regular_file(state(run), fd)
    if isinstance(got, int):
        return got
    f, ov, handle = got
    mem = guest_memory(run, caller, cctx)
    span(mem, out, 8)
    if whence == wasi.WHENCE_SET:
        base = 0
    elif whence == wasi.WHENCE_CUR:
        base = f.pos
    else:  # WHENCE_END: a whence past the enum's three traps before the call (kuro_wasm.model.wasi_args)
        stat = ov.stat(handle)
        if isinstance(stat, OvErrno):
            return errno_of(stat)
        base = stat.size
    if not f.rights & (Rights.FD_SEEK | (Rights.FD_TELL if whence == wasi.WHENCE_CUR and offset == 0 else 0)):
        return NOTCAPABLE
    new = base + offset
    if new < 0 or new > _I64_MAX:
        return INVAL
    f.pos = new
    pack(mem, out, _U64, new)
    return OK


def _fd_tell(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    got = regular_file(state(run), p[0])
    if isinstance(got, int):
        return got
    f = got[0]
    if not f.rights & (Rights.FD_TELL | Rights.FD_SEEK):
        return NOTCAPABLE
    pack(guest_memory(run, caller, cctx), p[1], _U64, f.pos)
    return OK


def _fd_readdir(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    fd, buf, length, cookie, out = p
    st = state(run)
    f = st.fds.get(fd)
    if f is None or f.kind != DIR:  # a file or stdio too: EBADF, as wasmtime's WASI
        return BADF
    if not f.rights & Rights.FD_READDIR:
        return NOTCAPABLE
    refused = need(run, "fd_readdir", ("fs/ls",))
    if refused is not None:
        return refused
    mem = guest_memory(run, caller, cctx)
    _, size = span(mem, buf, length)
    span(mem, out, 4)
    cookie %= 2**64
    entries = f.listing
    if cookie == 0 or entries is None:  # (a listing dropped to bound all of them is read again, as at cookie 0)
        listing = _listing(st, run, f)
        if isinstance(listing, int):
            return listing
        st.keep_listing(f, listing)
        entries = listing
    blob = bytearray()
    index = cookie
    while index < len(entries) and len(blob) < size:
        name, kind, ino = entries[index]
        index += 1
        blob += wasi.DIRENT.pack(index, ino, len(name), kind) + name
    store_bytes(mem, buf, blob[:size])
    pack(mem, out, _U32, min(len(blob), size))
    return OK


def _listing(st: WasiState, run: RunContext, f: Fd) -> list[tuple[bytes, int, int]] | int:
    """``.``, ``..`` and the directory's entries sorted by name: (name, filetype, inode)."""
    ov = st.open_overlay(run)
    handle = st.handle(f)
    if ov is None or handle is None:
        return IO
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


#: The calls that move bytes in or out, or list a directory, by name.
IO_HANDLERS: Final[dict[str, Handler]] = {
    "fd_pread": _fd_pread,
    "fd_pwrite": _fd_pwrite,
    "fd_read": _fd_read,
    "fd_readdir": _fd_readdir,
    "fd_seek": _fd_seek,
    "fd_tell": _fd_tell,
    "fd_write": _fd_write,
}
