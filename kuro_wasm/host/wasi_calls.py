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

An fd's rights are fixed at ``path_open`` (what was asked, within what its directory may pass on):
``fd_fdstat_set_rights`` changes none, as on wasmtime's WASI (``ENOTSUP``; ``EBADF`` on stdio).
Reading a descriptor not opened for reading, or writing one not opened for writing, is ``EBADF`` as
on POSIX (and in wasmtime's WASI); other missing fd rights are ``ENOTCAPABLE``, which the program
brought on itself and which is not a denial.

Where POSIX leaves room, the answers follow wasmtime's built-in WASI (the differential tests in
``tests/wasi`` hold this binding to it on the same trees): ``lseek`` on stdio is ``ESPIPE``, reading
a directory ``EBADF`` and listing a file ``EBADF``, opening one for writing ``EISDIR``, resizing a file
not opened for writing ``EINVAL``, the CPU-time clocks are refused (``ENOTSUP`` here), ``sock_*`` on a
descriptor that is not a socket ``ENOTSOCK``, and ``poll_oneoff`` on a descriptor that cannot be
waited on that way fails whole with ``EBADF``.

The calls live by concept: :mod:`kuro_wasm.host.wasi_fds` (descriptors themselves),
:mod:`kuro_wasm.host.wasi_io` (bytes in and out, directory listings), :mod:`kuro_wasm.host.wasi_paths`
(paths), what they share in :mod:`kuro_wasm.host.wasi_guest`; this module holds the rest (argv and
environment, clocks, random, ``poll_oneoff``, the process, sockets) and the one table of all of them.

## Effects
Guest memory (through :mod:`kuro_wasm.host.calls`), the run's stdin and condition variable, the host's
clocks and entropy (:mod:`kuro_wasm.host.wasi_state`).

## Not done here
No sockets (none can be opened: no preopened listener), no symlinks or hard links (kuro.fs has
neither: ``path_symlink``/``path_link`` are ``ENOTSUP``), no signals. File times: kuro.fs keeps
none, so they read 0 unless the program set them (``*_set_times``) during the run, which keeps
them for the run only.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Final

from kuro_fs.overlay import Stat
from kuro_wasm.host.calls import Handler, guest_memory, load_array, pack, span, span_array, store_bytes
from kuro_wasm.host.context import STOP_CHECK_BYTES, RunContext
from kuro_wasm.host.wasi_fds import FD_HANDLERS
from kuro_wasm.host.wasi_guest import BADF, INVAL, NOTSUP, OK, deny, guarded, state
from kuro_wasm.host.wasi_io import IO_HANDLERS
from kuro_wasm.host.wasi_paths import PATH_HANDLERS
from kuro_wasm.host.wasi_state import FILE, MAX_FDS, STDIN, WasiState
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import Errno, Rights

__all__ = ["HANDLERS"]

_U32: Final = wasi.U32
_U64: Final = wasi.U64
_2_32: Final = 2**32


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
        return OK

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
        return OK

    return handler


def _clock_res_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    clock, ptr = p
    if clock not in (wasi.CLOCK_REALTIME, wasi.CLOCK_MONOTONIC):
        return NOTSUP  # the CPU-time clocks (a clock id past the enum's four traps: kuro_wasm.model.wasi_args)
    pack(guest_memory(run, caller, cctx), ptr, _U64, 1)
    return OK


def _clock_time_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    clock, _precision, ptr = p
    mem = guest_memory(run, caller, cctx)
    span(mem, ptr, 8)
    now = state(run).now(run, clock)
    if now is None:
        return NOTSUP  # the CPU-time clocks
    pack(mem, ptr, _U64, now)
    return OK


def _random_get(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    """The whole range is checked first (EFAULT: nothing written), then filled a chunk at a time, the run's
    stop checked between chunks: 4 GiB of random bytes take seconds, the deadline does not wait for them."""
    buf, length = p
    mem = guest_memory(run, caller, cctx)
    _, n = span(mem, buf, length)
    st = state(run)
    at = 0
    while True:
        piece = min(STOP_CHECK_BYTES, n - at)
        store_bytes(mem, buf % _2_32 + at, st.random(run, piece))
        at += piece
        if at >= n:
            return OK
        run.check_stop()


def _sched_yield(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return OK


def _proc_exit(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    state(run).exit_code = p[0] % 2**32  # the witx ``exitcode`` is a u32: exit(-1) is 4294967295, never negative
    return None  # a trap ends the guest; the kind reads the exit code (it is not a stop)


def _proc_raise(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    return NOTSUP


def _sock(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    """There are no socket descriptors: an open fd is ENOTSOCK, any other EBADF."""
    return int(Errno.NOTSOCK) if p[0] in state(run).fds else BADF


def _poll_oneoff(run: RunContext, caller: int, cctx: int, p: Any) -> int | None:
    subs_ptr, events_ptr, nsubs, out = p
    st = state(run)
    nsubs %= 2**32
    if nsubs == 0:
        return INVAL
    mem = guest_memory(run, caller, cctx)
    span_array(mem, subs_ptr, nsubs, wasi.SUBSCRIPTION.size)
    span_array(mem, events_ptr, nsubs, wasi.EVENT.size)
    span(mem, out, 4)
    if nsubs > MAX_SUBSCRIPTIONS:
        return INVAL  # as POSIX poll answers more descriptors than a process may open; nothing read
    raw = load_array(mem, subs_ptr, nsubs, wasi.SUBSCRIPTION.size)
    subs = [wasi.SUBSCRIPTION.unpack_from(raw, i * wasi.SUBSCRIPTION.size) for i in range(nsubs)]
    timers: list[tuple[int, int]] = []  # (subscription index, ns to wait from now)
    for index, (_userdata, tag, u0, timeout, _precision, flags) in enumerate(subs):
        if tag in (wasi.EVENTTYPE_FD_READ, wasi.EVENTTYPE_FD_WRITE) and not _pollable(st, u0 & 0xFFFFFFFF, tag):
            return BADF  # the whole call, as wasmtime's WASI (no event for it)
        if tag == wasi.EVENTTYPE_CLOCK:
            if u0 & 0xFFFFFFFF not in (wasi.CLOCK_REALTIME, wasi.CLOCK_MONOTONIC) or flags & ~wasi.SUBCLOCK_ABSTIME:
                return INVAL  # a clock this host has no timer on, or flags no witx names: the whole call, as wasmtime
            if flags & wasi.SUBCLOCK_ABSTIME:
                now = st.now(run, u0 & 0xFFFFFFFF)
                assert now is not None
                timers.append((index, max(0, timeout - now)))
            else:
                timers.append((index, timeout))
        elif tag not in (wasi.EVENTTYPE_FD_READ, wasi.EVENTTYPE_FD_WRITE):
            return INVAL  # no such event type (the witx enum has three)
    due = min((ns for _, ns in timers), default=None)
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
    return OK


#: The most subscriptions one ``poll_oneoff`` may make: a read and a write of every descriptor a run may hold, and
#: a timeout. Each becomes a host object: a guest whose memory is all subscriptions (89 million in 4 GiB) would
#: otherwise make the host build them all.
MAX_SUBSCRIPTIONS: Final = 2 * MAX_FDS + 1


def _pollable(st: WasiState, fd: int, tag: int) -> bool:
    """Whether ``fd`` is open and can be waited on for ``tag``: writing to stdout/stderr or a file opened
    for writing; reading stdin or a file opened for reading (never a directory)."""
    f = st.fds.get(fd)
    if f is None:
        return False
    if tag == wasi.EVENTTYPE_FD_WRITE:
        return f.stream is not None or bool(f.kind == FILE and f.rights & Rights.FD_WRITE)
    return f.kind == STDIN or bool(f.kind == FILE and f.rights & Rights.FD_READ)


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
        if elapsed >= wait:
            events.append((subs[index][0], OK, wasi.EVENTTYPE_CLOCK, 0, 0))
    for userdata, tag, u0, *_rest in subs:
        if tag == wasi.EVENTTYPE_CLOCK:
            continue
        f = st.fds[u0 & 0xFFFFFFFF]  # pollable for ``tag``: checked before the first wait
        if tag == wasi.EVENTTYPE_FD_WRITE:
            events.append((userdata, OK, tag, 0, 0))
        elif f.kind == STDIN:
            if "stdin/read" not in run.grant:
                events.append((userdata, deny(run, "poll_oneoff", "stdin/read"), tag, 0, 0))
            else:
                assert run.stdin is not None
                if run.stdin.ready():
                    pending = run.stdin.pending()
                    events.append((userdata, OK, tag, pending, 0 if pending else wasi.EVENTRW_HANGUP))
        else:  # a file opened for reading
            assert st.overlay is not None and f.handle is not None
            stat = st.overlay.stat(f.handle)
            size = stat.size if isinstance(stat, Stat) else 0
            events.append((userdata, OK, tag, max(0, size - f.pos), 0))
    return events


#: Every function of :data:`kuro_wasm.model.wasi.FUNCTIONS`, by name, unguarded.
_HANDLERS: Final[dict[str, Handler]] = {
    "args_get": _strings_get("argv"),
    "args_sizes_get": _sizes_get("argv"),
    "environ_get": _strings_get("environ"),
    "environ_sizes_get": _sizes_get("environ"),
    "clock_res_get": _clock_res_get,
    "clock_time_get": _clock_time_get,
    "fd_advise": FD_HANDLERS["fd_advise"],
    "fd_allocate": FD_HANDLERS["fd_allocate"],
    "fd_close": FD_HANDLERS["fd_close"],
    "fd_datasync": FD_HANDLERS["fd_datasync"],
    "fd_fdstat_get": FD_HANDLERS["fd_fdstat_get"],
    "fd_fdstat_set_flags": FD_HANDLERS["fd_fdstat_set_flags"],
    "fd_fdstat_set_rights": FD_HANDLERS["fd_fdstat_set_rights"],
    "fd_filestat_get": FD_HANDLERS["fd_filestat_get"],
    "fd_filestat_set_size": FD_HANDLERS["fd_filestat_set_size"],
    "fd_filestat_set_times": FD_HANDLERS["fd_filestat_set_times"],
    "fd_pread": IO_HANDLERS["fd_pread"],
    "fd_prestat_get": FD_HANDLERS["fd_prestat_get"],
    "fd_prestat_dir_name": FD_HANDLERS["fd_prestat_dir_name"],
    "fd_pwrite": IO_HANDLERS["fd_pwrite"],
    "fd_read": IO_HANDLERS["fd_read"],
    "fd_readdir": IO_HANDLERS["fd_readdir"],
    "fd_renumber": FD_HANDLERS["fd_renumber"],
    "fd_seek": IO_HANDLERS["fd_seek"],
    "fd_sync": FD_HANDLERS["fd_sync"],
    "fd_tell": IO_HANDLERS["fd_tell"],
    "fd_write": IO_HANDLERS["fd_write"],
    "path_create_directory": PATH_HANDLERS["path_create_directory"],
    "path_filestat_get": PATH_HANDLERS["path_filestat_get"],
    "path_filestat_set_times": PATH_HANDLERS["path_filestat_set_times"],
    "path_link": PATH_HANDLERS["path_link"],
    "path_open": PATH_HANDLERS["path_open"],
    "path_readlink": PATH_HANDLERS["path_readlink"],
    "path_remove_directory": PATH_HANDLERS["path_remove_directory"],
    "path_rename": PATH_HANDLERS["path_rename"],
    "path_symlink": PATH_HANDLERS["path_symlink"],
    "path_unlink_file": PATH_HANDLERS["path_unlink_file"],
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

#: Every function of :data:`kuro_wasm.model.wasi.FUNCTIONS`, by name: an argument no value of its witx type traps
#: before the function runs (:func:`kuro_wasm.host.wasi_guest.guarded`).
HANDLERS: Final[dict[str, Handler]] = {name: guarded(name, handler) for name, handler in _HANDLERS.items()}
