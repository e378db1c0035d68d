"""One WASI run's state: argv and environment, the descriptor table over the overlay, clocks, random, exit.

## The one decision
A WASI program's file descriptors are **entries of this run's table over one copy-on-write overlay**
(:class:`kuro_fs.overlay.Overlay`) of the session's kuro.fs root, never host files: fd 0 is the
run's stdin, fds 1 and 2 the kuro output stream, fd 3 the preopened directory ``/`` (the overlay's
root), and every fd a program opens is an overlay handle with its own rights, cursor and flags (the
overlay is positional; cursors, ``O_APPEND`` and rights are this table's). The overlay is made on
the first filesystem call, from the run's ``Fs`` value, so a program that touches no file never
opens the filesystem; a grant without any ``fs/…`` capability has no preopen at all. Changes become
a new fs root only at **commit points** — :meth:`WasiState.commit`, called by ``fd_close``,
``fd_sync``/``fd_datasync``, a write to a ``sync``/``dsync`` descriptor, and the normal end of the
run — each folding everything pending into one new root with one kuro.fs operation per changed entry
(:meth:`Overlay.commit`), never one per ``fd_write``. A run that ends by trap, kill, deadline or
output cap does not commit again: the receipt's ``kuro/fs-root-after`` is the root of its last
commit point.

Time and randomness come from the real world (counted into the receipt's
``kuro/nondeterminism``: ``wall-clock`` and ``monotonic-clock`` readings, ``random-bytes``) unless
the run is deterministic (``RunContext.seed``): then the clocks are virtual (fixed starts, +1 µs per
reading, a sleep advances them by its length without waiting) and random bytes come from
:class:`kuro_wasm.model.wasi.SeededBytes` — the run's :class:`~kuro_wasm.host.clocks.RunClocks`,
the same as a component's.

## Effects
The overlay's block store (reads, and blocks written at commit), the host's clocks and
``os.urandom`` (real runs only), the run's ``fs``/``wrote``/``reads``.

## Not done here
The calls (:mod:`kuro_wasm.host.wasi_calls`); capability checks (each call does them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kuro_fs.fs import Fs
from kuro_fs.overlay import Errno as OvErrno
from kuro_fs.overlay import Handle, Overlay
from kuro_wasm.host.clocks import RunClocks
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.fsgate import opened_fs
from kuro_wasm.model import wasi

__all__ = ["FS_CAPABILITIES", "MAX_FDS", "MAX_LISTED", "PREOPEN_FD", "PREOPEN_NAME", "Fd", "WasiState", "initial_fds"]

#: The preopened directory: fd 3, named ``/`` (wasi-libc resolves relative paths against its cwd ``/``).
PREOPEN_FD: Final = 3
PREOPEN_NAME: Final = b"/"
#: At most this many open descriptors (``EMFILE`` beyond): each costs host memory.
MAX_FDS: Final = 16384
#: The most directory entries the listings of all open descriptors keep at once (``fd_readdir``, ~150 bytes each):
#: past it the least recently listed other descriptor's listing is dropped, and read again from its directory at its
#: next cookie — else every one of 16384 descriptors could hold its own copy of one large directory's listing.
MAX_LISTED: Final = 1 << 20
_U64_MAX: Final = 2**64 - 1

STDIN: Final = "stdin"
STDOUT: Final = "stdout"
STDERR: Final = "stderr"
DIR: Final = "dir"
FILE: Final = "file"


@dataclass(slots=True, eq=False)
class Fd:
    """One open descriptor. ``stream`` is the output stream of fds 1/2; ``handle`` the overlay handle of a
    file or directory (None for the preopen until the overlay exists: it is the overlay's root)."""

    kind: str
    rights: int
    inheriting: int
    flags: int = 0
    handle: Handle | None = None
    pos: int = 0
    preopen: bytes | None = None
    stream: str | None = None
    #: a directory's listing from its last ``fd_readdir`` at cookie 0 (later cookies read it)
    listing: list[tuple[bytes, int, int]] | None = None


#: The capabilities that make a filesystem visible: with none of them there is no preopen at all.
FS_CAPABILITIES: Final = frozenset({"fs/read", "fs/ls", "fs/write", "fs/rm"})


def initial_fds(grant: frozenset[str]) -> dict[int, Fd]:
    """fds 0-2, and the preopen (fd 3, ``/``) when ``grant`` holds any filesystem capability.

    Without one the program sees no filesystem at all, as under wasmtime without ``--dir``.
    """
    fds = {
        0: Fd(STDIN, wasi.STDIN_RIGHTS, wasi.STDIN_RIGHTS),
        1: Fd(STDOUT, wasi.STDOUT_RIGHTS, wasi.STDOUT_RIGHTS, stream=STDOUT),
        2: Fd(STDERR, wasi.STDOUT_RIGHTS, wasi.STDOUT_RIGHTS, stream=STDERR),
    }
    if FS_CAPABILITIES & grant:
        rights, inheriting = wasi.DIRECTORY_RIGHTS, wasi.DIRECTORY_RIGHTS | wasi.FILE_RIGHTS
        fds[PREOPEN_FD] = Fd(DIR, rights, inheriting, preopen=PREOPEN_NAME)
    return fds


@dataclass(eq=False)
class WasiState:
    """Everything a WASI run keeps between calls (``RunContext.kind_state["wasi"]``)."""

    argv: tuple[bytes, ...]
    environ: tuple[bytes, ...]
    fds: dict[int, Fd]
    seed: int | None = None
    overlay: Overlay | None = None
    exit_code: int | None = None
    #: why a call trapped the guest (an argument no value of its witx type): the trap's message in the receipt
    trap: str | None = None
    #: the error of the last commit that kuro.fs refused (the changes stay pending), for the receipt
    commit_error: str | None = None
    #: access and modification times the program set (``*_set_times``), by inode; kept for the run only
    times: dict[int, tuple[int, int]] = field(default_factory=dict)
    _opened: bool = False
    #: no descriptor number below this one is free: where :meth:`next_fd` looks first (:meth:`release` lowers it)
    _free_from: int = 0
    #: the descriptors holding a listing, least recently listed first, and how many entries they hold in all
    _listed: dict[int, Fd] = field(default_factory=dict)
    _listed_entries: int = 0
    clocks: RunClocks = field(init=False)

    def __post_init__(self) -> None:
        self.clocks = RunClocks(self.seed)

    # ---- the filesystem

    def open_overlay(self, run: RunContext) -> Overlay | None:
        """The run's overlay, made from its ``Fs`` on first use; None if the run has no kuro.fs root."""
        if not self._opened:
            self._opened = True
            fs = opened_fs(run)  # interruptible: a long read ends at the next block once the run must stop
            if isinstance(fs, Fs):
                self.overlay = Overlay(fs)
        return self.overlay

    def handle(self, fd: Fd) -> Handle | None:
        """The overlay handle ``fd`` stands for (the root for the preopen), or None."""
        if fd.handle is not None:
            return fd.handle
        if fd.preopen is not None and self.overlay is not None:
            return self.overlay.root
        return None

    def commit(self, run: RunContext) -> bool:
        """Fold everything pending into a new fs root (a commit point). False if kuro.fs refused it.

        On success the run's ``fs`` is the new root and ``wrote`` is set (the receipt's
        ``kuro/fs-root-after``). A refusal keeps the changes pending and is remembered for the receipt.
        """
        ov = self.overlay
        if ov is None or not ov.pending:
            return True
        done = ov.commit()
        if not done.ok:
            reason = (done.denial or {}).get("kuro.fs/reason", "refused")
            self.commit_error = f"kuro.fs refused a commit of the guest's changes ({reason}); they were not kept"
            return False
        run.fs = done.fs
        run.wrote = True
        return True

    def record_reads(self, run: RunContext) -> None:
        """Add the overlay's reads (files whose bytes reached the guest) to the run's ``kuro/reads``."""
        if self.overlay is not None:
            known = set(run.reads)
            run.reads.extend(cid for cid in self.overlay.reads if cid not in known)

    def next_fd(self) -> int | None:
        """The lowest free descriptor number, or None at :data:`MAX_FDS` open descriptors.

        As POSIX ``open`` and wasmtime's WASI: a program that closed its stdout gets fd 1 from its next open.
        The search starts where the last one ended, so opening n descriptors looks up O(n) numbers, not O(n**2).
        """
        if len(self.fds) >= MAX_FDS:
            return None
        n = self._free_from
        while n in self.fds:
            n += 1
        self._free_from = n
        return n

    def release(self, number: int) -> Fd | None:
        """Take descriptor ``number`` out of the table (None if it is not open); its number is free again."""
        f = self.fds.pop(number, None)
        if f is not None and number < self._free_from:
            self._free_from = number
        return f

    def keep_listing(self, fd: Fd, listing: list[tuple[bytes, int, int]]) -> None:
        """Give ``fd`` its listing (an ``fd_readdir`` at cookie 0), dropping the least recently listed others'
        while all of them hold more than :data:`MAX_LISTED` entries."""
        self.drop_listing(fd)
        fd.listing = listing
        self._listed[id(fd)] = fd
        self._listed_entries += len(listing)
        while self._listed_entries > MAX_LISTED:
            oldest = next(iter(self._listed.values()))
            if oldest is fd:
                break
            self.drop_listing(oldest)

    def drop_listing(self, fd: Fd) -> None:
        if self._listed.pop(id(fd), None) is not None and fd.listing is not None:
            self._listed_entries -= len(fd.listing)
        fd.listing = None

    def close(self, fd: Fd) -> None:
        """Release what ``fd`` holds in the overlay (its listing; its handle, unless it is the root)."""
        self.drop_listing(fd)
        if fd.handle is not None and self.overlay is not None:
            self.overlay.close(fd.handle)

    # ---- clocks and random (one RunClocks for every kind: kuro_wasm.host.clocks)

    def now(self, run: RunContext, clock: int) -> int | None:
        """Nanoseconds on ``clock`` (realtime or monotonic), or None for a clock this host does not offer.

        A witx ``timestamp`` is a u64: a deterministic run's virtual clocks, moved on by sleeps of any length,
        read 2**64 - 1 once they pass it (as the component kind's), never a number no ``timestamp`` can hold.
        """
        if clock == wasi.CLOCK_REALTIME:
            return min(self.clocks.realtime_ns(run), _U64_MAX)
        if clock == wasi.CLOCK_MONOTONIC:
            return min(self.clocks.monotonic_ns(run), _U64_MAX)
        return None

    def advance(self, ns: int) -> None:
        """A deterministic run's sleep: the virtual clocks move on by ``ns`` without waiting."""
        self.clocks.advance(ns)

    def random(self, run: RunContext, n: int) -> bytes:
        """``n`` random bytes: the host's entropy (counted), or the seeded stream of a deterministic run."""
        return self.clocks.random(run, n)


def errno_of(value: OvErrno) -> int:
    """The WASI errno number of an overlay refusal."""
    return int(wasi.errno_for(value.value))
