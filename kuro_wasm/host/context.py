"""One run's context: everything a guest's imports may touch, and everything they report back.

## The one decision
Nothing about a run lives outside its :class:`RunContext`. Whatever the guest
kind, its import handlers read the grant, the stream, stdin and the run's
kuro.fs value from here, and write back reads, denials, writes and the first
reason to stop; the run (:mod:`kuro_wasm.host.job`) builds the receipt from it,
never from trap text. Other threads touch a run only through :meth:`RunContext.stop`
and :class:`StdinPipe`. The denial record and the store-fault record are bounded whatever the guest does.

## Effects
A condition variable (stdin, kill and the deadline wake a blocked reader); the
monotonic clock for the deadline; a new reason to stop advances every engine's
epoch (:func:`kuro_wasm.host.engine.interrupt`), so running wasm asks at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kuro_wasm.host.engine import interrupt
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.limits import DEFAULT_MAX_VALUE_BYTES

__all__ = [
    "MAX_DENIAL_ENTRIES",
    "MAX_STORE_FAULT_ENTRIES",
    "STOP_CHECK_BYTES",
    "Admit",
    "Emit",
    "RunContext",
    "StdinPipe",
    "Stopped",
]

#: At most this many distinct (import, capability, path) entries in ``kuro/denials`` (plus one per import).
MAX_DENIAL_ENTRIES: Final = 256

#: At most this many distinct (block, fault) entries in ``kuro/store-faults`` (plus one per fault kind).
MAX_STORE_FAULT_ENTRIES: Final = 64

#: A host call whose work grows with a guest-chosen size checks for a stop (:meth:`RunContext.check_stop`) at
#: least once per this many bytes of it (one ``time.monotonic()`` per MiB: nothing beside the work).
STOP_CHECK_BYTES: Final = 1 << 20

#: Emit one output chunk: (stream name, bytes) → False when the output cap is reached.
Emit = Callable[[str, bytes], bool]
#: Measure a write before building it: (byte count) → True if it would be kept (emit it next), else it is
#: recorded as dropped and False (stop the guest) — :meth:`kuro_wasm.model.stream.Writer.admit`.
Admit = Callable[[int], bool]


def _admit_all(n: int) -> bool:
    return True


def _tally(
    entries: list[dict[str, Any]],
    index: dict[tuple[Any, ...], int],
    what: tuple[str, ...],
    base: dict[str, Any],
    detail_key: str,
    detail: str | None,
    bound: int,
) -> None:
    """Count one ``what`` (+ ``detail``) in a bounded record: a new entry ``base`` (+ ``detail_key``) or a count.

    Each distinct (what, detail) is one entry in first-seen order; a repeat adds to its ``kuro/count``
    (present when above 1). After ``bound`` distinct entries, a new one is folded into a detail-less
    entry for its ``what``, so the record stays bounded and the counts still add up.
    """
    key = (*what, detail)
    at = index.get(key)
    if at is None and len(entries) >= bound:
        key = (*what, None)
        at = index.get(key)
    if at is None:
        if key[-1] is not None:
            base[detail_key] = key[-1]
        index[key] = len(entries)
        entries.append(base)
    else:
        entry = entries[at]
        entry["kuro/count"] = entry.get("kuro/count", 1) + 1


class Stopped(Exception):
    """Raised inside a host call that found its run must stop (deadline, kill) part-way, between two blocks.

    The import trampolines turn it into the stop (the run's ``stop_reason`` says why), never a
    ``host-error``. ``read`` names a file whose bytes had already reached guest memory, for ``kuro/reads``.
    """

    def __init__(self, reason: str, read: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.read = read


#: The most stdin bytes a run buffers that its guest has not read yet: a writer past it waits (a pipe's backpressure).
STDIN_BUFFER_BYTES: Final = 4 << 20
#: A pipe with ``on_take`` reports what its guest has read at least this often (and whenever it is empty).
STDIN_REPORT_BYTES: Final = 1 << 20


class StdinPipe:
    """Bytes written by the caller, read by the guest; closing ends input (``read`` then returns 0).

    Like a pipe, it holds at most ``bound`` unread bytes (None: no bound, for a writer that
    must never wait, as a worker's control thread): a :meth:`write` past it waits until the
    guest reads, input is closed or the run ends — so a guest that never reads cannot make
    its host buffer without end. A write from the thread that runs the guest (an ``on_chunk``
    callback answering output with input) never waits: the guest could not read until it
    returned; it is kept whole. Every method runs with ``cond`` held or takes it.
    """

    def __init__(
        self,
        cond: threading.Condition,
        data: bytes | None = None,
        *,
        closed: bool = False,
        bound: int | None = STDIN_BUFFER_BYTES,
    ) -> None:
        self._cond = cond
        self._buf = bytearray(data or b"")
        self._closed = closed
        self._ended = False
        self._bound = bound
        self._writers = 0  # writers waiting for room: a read that finds none skips the notify
        #: the thread that runs the guest (set when the run starts): its writes never wait
        self.reader: int | None = None
        #: told how many bytes the guest has read in all, every STDIN_REPORT_BYTES and whenever the pipe empties
        #: (a worker's pipe: the host, which holds the bound there, waits on it), by :meth:`report`
        self.on_take: Callable[[int], None] | None = None
        self._taken = 0
        self._reported = 0
        self._due = 0  # a total to report at the next report(), or 0 (only the guest's thread touches these three)

    def write(self, data: bytes) -> None:
        """Append ``data``, waiting while the buffer is full; ignored after :meth:`close` or :meth:`end`.

        Bytes the guest can no longer read (input closed, or the run ended while this waited) are dropped.
        """
        view = memoryview(data)
        with self._cond:
            while view:
                if self._closed or self._ended:
                    return
                room = len(view) if self._bound is None else self._bound - len(self._buf)
                if room <= 0 and threading.get_ident() == self.reader:
                    room = len(view)
                if room <= 0:
                    self._writers += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._writers -= 1
                    continue
                self._buf += view[:room]
                view = view[room:]
                self._cond.notify_all()

    def close(self) -> None:
        """End of input: a blocked ``read`` wakes and returns what is left, then 0."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def end(self) -> None:
        """The run is over: a waiting :meth:`write` returns, and later ones are ignored."""
        cond = self._cond
        cond.acquire()  # (its lock's own methods: no Python-level __enter__/__exit__ on every run's way out)
        try:
            self._ended = True
            if self._writers:  # (the guest's own reads are over: only writers can be waiting now)
                cond.notify_all()
        finally:
            cond.release()

    def ready(self) -> bool:
        """True when a read would not wait: bytes are buffered or input has ended."""
        return bool(self._buf) or self._closed

    def pending(self) -> int:
        """How many bytes are buffered (a read would get at least some of them without waiting)."""
        return len(self._buf)

    def take(self, cap: int) -> bytes | None:
        """Up to ``cap`` buffered bytes; ``b""`` at end of input; None if nothing yet (caller waits, ``cond`` held)."""
        if self._buf:
            out = bytes(self._buf[:cap])
            del self._buf[:cap]
            if self._writers:
                self._cond.notify_all()
            if self.on_take is not None:
                self._taken += len(out)
                if not self._buf or self._taken - self._reported >= STDIN_REPORT_BYTES:
                    self._reported = self._due = self._taken
            return out
        return b"" if self._closed else None

    def report(self) -> None:
        """Tell ``on_take`` what the guest has read, if a report is due; called by the reader *after* it lets
        ``cond`` go (a worker's report is a socket send, and a send that waits must not hold up the thread
        that writes stdin, the worker's control thread, behind ``cond``)."""
        due = self._due
        if due and self.on_take is not None:
            self._due = 0
            self.on_take(due)


@dataclass
class RunContext:
    """Everything one run's imports may touch, and everything they report back.

    ``fs`` is the run's current kuro.fs value (replaced on every write; opened
    by ``open_fs`` on the first fs import);
    ``stop_reason`` is the first reason the run had to stop (``cancelled``,
    ``timeout``, ``output-capped``, ``host-error``) and is never overwritten.
    ``command`` is the guest spec being run (read-only), for host functions whose
    meaning the spec completes (``kuro-browser-v0``'s ``fs_read`` reads the file
    the spec names). ``scratch`` is the run's scratch directory (an ``Fs`` in
    memory, created on first use, never committed; see :mod:`kuro_wasm.host.fsgate`)
    and ``scratch_bytes`` what the guest has written there.
    """

    grant: frozenset[str]
    emit: Emit
    #: a write a kind can measure before building it is admitted first (default: every write; ``emit`` decides)
    admit: Admit = _admit_all
    command: Mapping[str, Any] = field(default_factory=dict)
    fs: Any = None
    open_fs: Callable[[], Any] | None = None
    deadline: float = float("inf")
    #: A deterministic run's seed (fixed clocks, random bytes from the seed); None: the real clocks and entropy.
    seed: int | None = None
    #: The most bytes one value may have crossing a component's boundary (``Limits.value_bound``).
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    cond: threading.Condition = field(default_factory=threading.Condition)
    stdin: StdinPipe | None = None
    reads: list[str] = field(default_factory=list)
    denials: list[dict[str, Any]] = field(default_factory=list)
    #: blocks the host's store could not supply to this run (``kuro/store-faults``): see :meth:`store_fault`
    store_faults: list[dict[str, Any]] = field(default_factory=list)
    wrote: bool = False
    stop_reason: str | None = None
    host_error: str | None = None
    memory: Any = None
    #: the address of ``memory`` (a ``wasmtime_memory_t``) once looked up; 0 until then
    memory_ref: int = 0
    #: the memory's size in bytes when last read: a lower bound of its size now (a memory only grows)
    memory_size: int = 0
    #: the memory's base address once read, kept only where the engine guarantees it never moves
    #: (:func:`kuro_wasm.host.engine.memory_base_fixed`); 0 = ask wasmtime
    memory_base: int = 0
    #: the address of the run's store context (``wasmtime_context_t``), set when the run is registered
    context: int = 0
    #: What a guest kind keeps for this run only (a component's resource table, a WASI exit code …);
    #: under ``"receipt"``, host result keys of its own that the run adds to the receipt (the allow-list applies).
    kind_state: dict[str, Any] = field(default_factory=dict)
    scratch: Any = None
    scratch_bytes: int = 0
    _denial_index: dict[tuple[Any, ...], int] = field(default_factory=dict, repr=False)
    _fault_index: dict[tuple[Any, ...], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.stdin is None:
            self.stdin = StdinPipe(self.cond, closed=True)

    def stop(self, reason: str, detail: str | None = None) -> None:
        """Record the first reason to stop (later ones are ignored), wake a blocked ``read``, and interrupt
        running wasm: the guest's epoch callback asks :meth:`should_stop` now, not at the deadline."""
        if self._record(reason, detail):
            interrupt()

    def _record(self, reason: str, detail: str | None = None) -> bool:
        """Record ``reason`` if it is the first and wake a blocked ``read``; whether it was the first."""
        with self.cond:
            first = self.stop_reason is None
            if first:
                self.stop_reason = reason
                if detail is not None:
                    self.host_error = detail
            self.cond.notify_all()
        return first

    def should_stop(self) -> str | None:
        """The epoch-tick check: the stop reason, with the deadline turned into ``timeout`` when due.

        A deadline found here needs no interrupt: the caller is the run itself (its epoch callback, or a
        host call that stops on the answer), and the ticker keeps ticking while a run past its deadline is live.
        """
        if self.stop_reason is None and time.monotonic() >= self.deadline:
            self._record("timeout")
        return self.stop_reason

    def check_stop(self) -> None:
        """Raise :class:`Stopped` if the run must stop now (kill, cap, or the deadline passed).

        A host call whose work grows with a size the guest chose (random bytes, a file's blocks) asks this
        between chunks of it (:data:`STOP_CHECK_BYTES`), so the run's deadline holds inside the call too.
        """
        reason = self.should_stop()
        if reason is not None:
            raise Stopped(reason)

    def deny(self, name: str, capability: str, path: str | None) -> int:
        """Record one refused call and return ``DENIED``; the record stays bounded whatever the guest does.

        Each distinct (import, capability, path) is one entry, in first-seen
        order; a repeat adds to its ``kuro/count`` (present when above 1), so
        the counts add up to the refused calls. After :data:`MAX_DENIAL_ENTRIES`
        distinct entries, a new one is folded into a path-less entry for its
        import. Without the bound, a guest looping on a refused call with a long
        path grows the host's memory and the receipt without limit (measured:
        ~85 000 entries and +360 MB in one second).
        """
        base = {"kuro/import": name, "kuro/capability": capability}
        _tally(self.denials, self._denial_index, (name, capability), base, "kuro/path", path, MAX_DENIAL_ENTRIES)
        return int(ErrorCode.DENIED)

    def store_fault(self, cid: str | None, fault: str) -> None:
        """Record that the store could not supply block ``cid`` (``missing``, ``corrupt`` or ``unavailable``).

        The guest saw such a block as an I/O error (``IO``, ``EIO``, ``err(io)``): the record says the
        failure was the host's store, not the guest's. Each distinct (block, fault) is one entry in
        first-seen order, a repeat adds to its ``kuro/count``; after :data:`MAX_STORE_FAULT_ENTRIES`
        distinct entries, a new one is folded into a block-less entry for its fault (as :meth:`deny`).
        """
        _tally(
            self.store_faults,
            self._fault_index,
            (fault,),
            {"kuro/fault": fault},
            "kuro/cid",
            cid,
            MAX_STORE_FAULT_ENTRIES,
        )
