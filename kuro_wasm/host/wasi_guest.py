"""What every WASI call of a run shares: its state, its refusals, and its arguments in guest memory.

## The one decision
A WASI call's pointers are read only through here, each ``(ptr, len)`` bounds-checked against the
guest's memory at the time of the call (:func:`kuro_wasm.host.calls.span`, raising ``Fault``, which
the trampoline answers with ``EFAULT``), and a refused capability is answered only through
:func:`deny`/:func:`need`: ``EACCES`` *and* one counted entry in ``kuro/denials``, never one without
the other. Paths are UTF-8 (anything else is ``EILSEQ``); errno answers are plain ints. An argument that
is no value of its witx type (:mod:`kuro_wasm.model.wasi_args`) traps the guest before the call does
anything (:func:`guarded`): the run's state keeps why, and the kind puts it in the receipt's trap.

## Effects
Guest memory through :mod:`kuro_wasm.host.calls`; the run's denial record.
"""

from __future__ import annotations

from typing import Final

from kuro_fs.overlay import Handle, Overlay, Stat
from kuro_wasm.host.calls import Handler, Memory, load, load_array, span, span_array, store_bytes, unpack
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.wasi_state import DIR, FILE, Fd, WasiState
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Errno, Filetype
from kuro_wasm.model.wasi_args import RULES, broken

__all__ = [
    "BADF", "DENIED", "DEVICE", "FAULT", "INVAL", "IO", "IOV_MAX", "ISDIR", "NOTCAPABLE", "NOTDIR", "NOTSUP", "OK",
    "SPIPE", "deny", "directory", "filestat", "gather", "guarded", "iovec_count", "iovec_total", "iovecs", "need",
    "path_text", "record_path", "regular_file", "scatter", "state",
]  # fmt: skip

OK: Final = 0
BADF: Final = int(Errno.BADF)
INVAL: Final = int(Errno.INVAL)
IO: Final = int(Errno.IO)
NOTSUP: Final = int(Errno.NOTSUP)
NOTCAPABLE: Final = int(Errno.NOTCAPABLE)
#: What a refused capability answers (:data:`kuro_wasm.model.wasi.DENIED_ERRNO`).
DENIED: Final = int(wasi.DENIED_ERRNO)
SPIPE: Final = int(Errno.SPIPE)
ISDIR: Final = int(Errno.ISDIR)
NOTDIR: Final = int(Errno.NOTDIR)
FAULT: Final = int(Errno.FAULT)
#: The one device number every kuro.fs entry reports (one filesystem).
DEVICE: Final = 0x6B75726F  # "kuro"
_IOVEC: Final = wasi.IOVEC


def state(run: RunContext) -> WasiState:
    """The run's WASI state (set by the kind before the entry is called)."""
    st: WasiState = run.kind_state["wasi"]
    return st


def guarded(name: str, handler: Handler) -> Handler:
    """``handler`` behind the witx type checks of call ``name``'s arguments (itself if it has none): an argument
    no value of its type traps the guest — the handler is not called, and the run's state says why.

    Most calls' rules are one or two bit masks (a pointer's low bits, a flags type's unnamed bits, an enum of
    four cases): those are checked in one expression, since ``fd_write`` and ``fd_read`` are among them and
    run hot; the rest ask :func:`kuro_wasm.model.wasi_args.broken` each call.
    """
    rules = RULES.get(name, ())
    if not rules:
        return handler

    def trap(run: RunContext, p: tuple[int, ...]) -> None:
        state(run).trap = broken(name, p)  # no stop reason: the trap is the guest's own

    masks = [(r.index, ~(r.cases - 1) if r.cases else r.forbidden) for r in rules if not r.cases & (r.cases - 1)]
    if len(masks) == len(rules) <= 2:
        (i, m), (j, n) = masks[0], masks[-1]  # one rule: checked twice, harmlessly

        def masked(run: RunContext, caller: int, cctx: int, p: tuple[int, ...]) -> int | None:
            if p[i] & m or p[j] & n:
                trap(run, p)
                return None
            return handler(run, caller, cctx, p)

        return masked

    def checked(run: RunContext, caller: int, cctx: int, p: tuple[int, ...]) -> int | None:
        if broken(name, p) is not None:
            trap(run, p)
            return None
        return handler(run, caller, cctx, p)

    return checked


def deny(run: RunContext, name: str, capability: str, path: str | None = None) -> int:
    """Record the refusal of ``name`` for lack of ``capability`` (``kuro/denials``) and answer ``EACCES``."""
    run.deny(name, capability, path)
    return DENIED


def need(run: RunContext, name: str, capabilities: tuple[str, ...], path: str | None = None) -> int | None:
    """None if every capability is granted, else EACCES with each missing one recorded."""
    missing = [c for c in capabilities if c not in run.grant]
    for capability in missing:
        run.deny(name, capability, path)
    return DENIED if missing else None


def path_text(mem: Memory, ptr: int, length: int) -> str | None:
    """The UTF-8 path at (ptr, len), or None if it is not UTF-8 (``EILSEQ``). Raises Fault."""
    try:
        return load(mem, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


def record_path(mem: Memory, ptr: int, length: int) -> str | None:
    if length % 2**32 > 4096:
        return None
    try:
        return path_text(mem, ptr, length)
    except Exception:
        return None


#: The most buffers one read or write may name: POSIX's ``IOV_MAX`` (1024 in wasi-libc's ``limits.h``).
IOV_MAX: Final = 1024


def iovec_count(mem: Memory, iovs: int, count: int) -> int | None:
    """None if an iovec array of ``count`` may be read; ``EINVAL`` for more than :data:`IOV_MAX` buffers, as POSIX's
    ``readv``/``writev`` answer. Raises Fault first if the array is not inside guest memory.

    Checked before any array is read: each iovec becomes a host object, and a guest whose memory is all
    iovecs (2**29 in 4 GiB) would otherwise make the host build them all, and spend minutes on them.
    """
    span_array(mem, iovs, count, _IOVEC.size)
    return INVAL if count % 2**32 > IOV_MAX else None


def iovecs(mem: Memory, iovs: int, count: int) -> list[tuple[int, int]]:
    """The (pointer, length) of each buffer of an iovec array, every one bounds-checked. Raises Fault."""
    if count == 1:
        buf, length = unpack(mem, iovs, _IOVEC)
        span(mem, buf, length)
        return [(buf, length)]
    raw = load_array(mem, iovs, count, _IOVEC.size)
    out = list(_IOVEC.iter_unpack(raw))
    for buf, length in out:
        span(mem, buf, length)
    return out


def iovec_total(mem: Memory, iovs: int, count: int) -> int:
    """The bytes an iovec array names in all, every buffer bounds-checked, none copied. Raises Fault.

    Buffers may overlap, so the total may be ``count`` times the memory's size: an output write is
    measured with this before it is gathered, and one no output bound lets through is never built.
    """
    total = 0
    for buf, length in _IOVEC.iter_unpack(load_array(mem, iovs, count, _IOVEC.size)):
        span(mem, buf, length)
        total += length
    return total


def gather(mem: Memory, iovs: int, count: int) -> bytes:
    """The bytes of an iovec array, concatenated. Raises Fault."""
    if count == 1:
        buf, length = unpack(mem, iovs, _IOVEC)
        return load(mem, buf, length)
    return b"".join(load(mem, buf, n) for buf, n in iovecs(mem, iovs, count))


def scatter(mem: Memory, bufs: list[tuple[int, int]], data: bytes | memoryview) -> None:
    """Copy ``data`` into the buffers in order (the caller sized it to fit)."""
    at = 0
    view = memoryview(data)
    for buf, length in bufs:
        if at >= len(view):
            break
        piece = view[at : at + length]
        store_bytes(mem, buf, piece)
        at += len(piece)


def directory(st: WasiState, run: RunContext, fd: int, rights: int = 0) -> tuple[Overlay, Handle] | int:
    """The overlay and handle of directory descriptor ``fd``, which must hold ``rights``, or an errno
    (BADF, NOTDIR, NOTCAPABLE: it lacks one of ``rights``, IO)."""
    f = st.fds.get(fd)
    if f is None:
        return BADF
    if f.kind != DIR:
        return NOTDIR
    if rights & ~f.rights:
        return NOTCAPABLE
    ov = st.open_overlay(run)
    if ov is None:
        return IO
    handle = st.handle(f)
    assert handle is not None
    return ov, handle


def filestat(st: WasiState, stat: Stat) -> tuple[int, ...]:
    """A ``filestat``: one device for kuro.fs; times 0 unless the program set them this run."""
    kind = Filetype.DIRECTORY if stat.kind == "dir" else Filetype.REGULAR_FILE
    atim, mtim = st.times.get(stat.ino, (0, 0))
    return (DEVICE, stat.ino, int(kind), 1, stat.size, atim, mtim, max(atim, mtim))


def regular_file(st: WasiState, fd: int) -> tuple[Fd, Overlay, Handle] | int:
    """A regular file's descriptor, or the errno for this one: BADF (closed, a directory), SPIPE (stdio).

    As wasmtime's WASI answers positional calls (seek, tell, pread, pwrite) on stdio and directories.
    """
    f = st.fds.get(fd)
    if f is None:
        return BADF
    if f.kind != FILE:
        return BADF if f.kind == DIR else SPIPE
    assert st.overlay is not None and f.handle is not None
    return f, st.overlay, f.handle
