"""The seam between the ABI imports and kuro.fs: one function per import, answers as values.

## The one decision
Import handlers never call :class:`kuro_fs.fs.Fs` directly: they call
:func:`call`, which runs the kuro.fs operation and turns *any* outcome into a
:class:`Answer` — a value (and maybe a new ``Fs``), or a kuro.fs denial
reason that :data:`kuro_wasm.model.abi.REASON_CODES` maps to an error code. A block
that goes missing or fails its hash while bytes are being copied is the
``block-missing`` reason too, so no kuro_fs exception reaches an import. Every
operation goes through the ``Fs`` value first (path rules, the ``Fs``'s own
grant, existence, type), so the gate adds nothing kuro.fs would refuse.

``fs_read`` copies straight from the file's blocks into guest memory
(:func:`kuro_fs.fileread.stream_file` over the range it needs, after
``Fs.read_range(path, 0, 0)`` has accepted the path), so a large read costs one
copy, not two.

**A long call stops with its run.** The run's ``Fs`` reads its blocks through a
store that checks the run's deadline and kill before each block (:func:`opened_fs`),
so an ``fs_read`` of a file of many leaves, or a listing of a large sharded
directory, ends at the next block once the run must stop (the import traps with
the run's stop reason: ``timeout``, ``cancelled``), not after the whole call; bytes
already copied into guest memory still put the file in ``kuro/reads``.

``entries`` and ``stat`` answer kuro.fs's own values (a component's ``ls``
and ``stat`` return them typed); ``ls`` answers the ABI v1 listing bytes.

**The scratch directory.** A run whose grant holds ``fs/scratch`` (the original
kuro's ``tmp/write``) sees ``tmp/`` as its own scratch directory: it starts
empty, lives in memory for that run only (its blocks never reach the block
store), and is never committed — a write there does not advance the fs root
and is not in ``kuro/fs-root-after``; reading a scratch file adds nothing to
``kuro/reads``. Every fs import under ``tmp/`` needs ``fs/scratch`` and nothing
else; at most :data:`SCRATCH_MAX_BYTES` may be written there per run (past it a
write answers ``TOO_LARGE``, kuro.fs ``over-budget``). Without ``fs/scratch``, ``tmp/`` is an ordinary path of
the fs root. Why a mount point, not a separate import: the original guests
write temporary files by path, and a guest written for this host keeps using
the seven imports it knows.

## Effects
Only the ``Fs`` value's block store (and the run's in-memory scratch store).

## Not done here
No caching of directory blocks between calls. The scratch directory is not
listed in its parent (``fs_ls(".")`` shows the fs root's own entries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kuro_fs.blocks import BlockStore, MemoryBlockStore
from kuro_fs.errors import BlockStoreError, CorruptBlock, DagPbError, FileTooDeep, InvalidCID, KuroFsError
from kuro_fs.fileread import stream_file
from kuro_fs.fs import Fs
from kuro_fs.paths import clean_path, has_control, join_path
from kuro_fs.unixfs import MissingBlock, file_root_info
from kuro_wasm.host.calls import Memory, span, store_bytes
from kuro_wasm.host.context import RunContext, Stopped
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode

__all__ = [
    "SCRATCH_CAPABILITY",
    "SCRATCH_DIR",
    "SCRATCH_MAX_BYTES",
    "Answer",
    "call",
    "call_in",
    "call_in_run",
    "fault_kind",
    "open_fs",
    "opened_fs",
    "read_into_guest",
    "record_read",
    "scratch_path",
]

#: The name under the fs root where a run granted :data:`SCRATCH_CAPABILITY` finds its scratch directory.
SCRATCH_DIR: Final = "tmp"
SCRATCH_CAPABILITY: Final = "fs/scratch"
#: The most bytes one run may write into its scratch directory (file bytes, counted per write).
SCRATCH_MAX_BYTES: Final = 64 * 2**20


@dataclass(frozen=True, slots=True)
class Answer:
    """A kuro.fs outcome: ``value`` and maybe a new ``fs``, or a denial ``reason``."""

    value: Any = None
    fs: Any = None
    reason: str | None = None
    #: The DAG root of a file whose bytes reached the guest — set even when the op then failed part-way,
    #: so that bytes already copied into guest memory are never left out of ``kuro/reads``.
    read: str | None = None


def open_fs(store: BlockStore, fs: object, session_root: str) -> Fs | str | None:
    """The run's ``Fs``: ``fs`` itself, ``Fs(store, fs)`` for a root CID, or the session's root.

    Returns an error message (str) for an ``fs`` argument that cannot name a
    filesystem; ``None`` when no argument was given and the session's root is
    not a kuro.fs directory (then every fs import answers ``IO``).
    """
    if isinstance(fs, Fs):
        return fs
    if fs is None:
        try:
            return Fs(store, session_root)
        except (InvalidCID, ValueError):
            return None
    if isinstance(fs, str):
        try:
            return Fs(store, fs)
        except (InvalidCID, ValueError) as exc:
            return f"fs root {fs!r} is not a kuro.fs directory CID: {exc}"
    return f"fs must be a kuro_fs.Fs or a root CID string, got {type(fs).__name__}"


class _Interruptible:
    """A run's block store that checks the run's deadline and kill before handing out or storing each
    block, and records each block it could not hand out.

    Every kuro.fs operation reads its blocks through ``get``, so a host call that reads many
    (an ``fs_read`` of a large file, a listing of a large sharded directory) ends at the next block
    once the run must stop — :class:`~kuro_wasm.host.context.Stopped`, which the trampoline turns
    into the stop — instead of after the whole call; and every one stores its blocks through ``put``,
    so does a write building a large file (an ``fs_write`` of 1 GiB, a WASI commit). A block the store
    lacks, refuses as corrupt (it failed its hash) or cannot reach is recorded with
    :meth:`~kuro_wasm.host.context.RunContext.store_fault` before the failure goes on to become the
    guest's I/O error, so the receipt (``kuro/store-faults``) says the host's store failed, not the
    guest. Everything else is the store's own.
    """

    __slots__ = ("_fault", "_should_stop", "_store")

    def __init__(
        self, store: BlockStore, should_stop: Callable[[], str | None], fault: Callable[[str | None, str], None]
    ) -> None:
        self._store = store
        self._should_stop = should_stop
        self._fault = fault

    def _check(self) -> None:
        reason = self._should_stop()
        if reason is not None:
            raise Stopped(reason)

    def get(self, cid: str) -> bytes | None:
        self._check()
        try:
            block = self._store.get(cid)
        except BlockStoreError as exc:
            self._fault(cid, fault_kind(exc))
            raise
        if block is None:
            self._fault(cid, "missing")
        return block

    def put(self, data: bytes, codec: str = "raw", **kw: Any) -> str:
        self._check()  # a write building a big DAG (or a commit of a big file) stops at its next block
        return self._store.put(data, codec, **kw)

    def __getattr__(self, name: str) -> Any:
        if name == "get_many_into":  # only _Batch has it: kuro_fs.fileread asks for it by getattr
            raise AttributeError(name)
        return getattr(self._store, name)


class _Batch(_Interruptible):
    """:class:`_Interruptible` over a store that reads many leaves at once (checked before each batch)."""

    __slots__ = ()

    def get_many_into(self, requests: Any) -> Any:
        self._check()
        try:
            return self._store.get_many_into(requests)  # type: ignore[attr-defined]
        except BlockStoreError as exc:  # MissingBlock and CorruptBlock name their block
            self._fault(getattr(exc, "cid", None), fault_kind(exc))
            raise


def fault_kind(exc: KuroFsError) -> str:
    """How a store failed on a block, as ``kuro/store-faults`` names it: ``corrupt``, ``missing`` or ``unavailable``."""
    if isinstance(exc, CorruptBlock):
        return "corrupt"
    if isinstance(exc, MissingBlock):  # a store that raises for an absent block instead of answering None
        return "missing"
    return "unavailable"


def _interruptible(fs: Any, run: RunContext) -> Any:
    """The run's ``Fs`` reading through :class:`_Interruptible` (anything else as it is)."""
    if not isinstance(fs, Fs):
        return fs
    kind = _Batch if callable(getattr(fs.store, "get_many_into", None)) else _Interruptible
    return fs.with_store(kind(fs.store, run.should_stop, run.store_fault))


def opened_fs(run: RunContext) -> Any:
    """The run's ``Fs``, opened (and made interruptible) by its first fs call."""
    if run.fs is None and run.open_fs is not None:
        run.fs, run.open_fs = _interruptible(run.open_fs(), run), None
    return run.fs


def _denied(result: Any) -> str | None:
    if result.receipt.get("kuro.fs/type") == "kuro.fs/receipt":
        return None
    reason = result.receipt.get("kuro.fs/reason")
    return reason if isinstance(reason, str) else "block-missing"


def _read_into(
    fs: Fs, path: str, cap: int, sink: Callable[[int, bytes | memoryview], None], whole: bool = False
) -> Answer:
    # The bytes this call would copy, min(size, cap), are known from the root block before any leaf is
    # read: past the Fs budget's bytes — or, with ``whole``, a file longer than ``cap`` — it is over-budget
    # and nothing is copied. A DAG cannot yield more than its root claims (the walk checks every node).
    probe = fs.read_range(path, 0, 0)
    reason = _denied(probe)
    if reason is not None:
        return Answer(reason=reason)
    cid = probe.receipt["kuro.fs/cid"]
    size = file_root_info(fs.store.get, cid).size
    if min(size, cap) > fs.budget.bytes or (whole and size > cap):
        return Answer(reason="over-budget")
    at = 0
    try:
        for piece in stream_file(fs.store, cid, 0, min(size, cap), size=size):
            sink(at, piece)
            at += len(piece)
    except FileTooDeep:  # a budget of its own: kuro.fs refuses it over-budget too
        return Answer(reason="over-budget", read=cid if at else None)
    except (MissingBlock, CorruptBlock, DagPbError, KuroFsError):
        # a leaf missing or corrupt after others were copied: those bytes are in guest memory now
        return Answer(reason="block-missing", read=cid if at else None)
    except Stopped as stop:  # the run must stop: so must the copy, at the next leaf
        stop.read = cid if at else None
        raise
    return Answer(value=(size, cid), read=cid)


def _read_at(fs: Fs, path: str, offset: int, cap: int) -> Answer:
    result = fs.read_range(path, offset, cap)
    reason = _denied(result)
    if reason is not None:
        return Answer(reason=reason)
    cid = result.receipt["kuro.fs/cid"]
    return Answer(value=(result.value, cid), read=cid)


def _write(fs: Fs, path: str, data: bytes) -> Answer:
    result = fs.write(path, data)
    reason = _denied(result)
    return Answer(reason=reason) if reason is not None else Answer(value=0, fs=result.fs)


def _rm(fs: Fs, path: str) -> Answer:
    result = fs.rm(path)
    reason = _denied(result)
    return Answer(reason=reason) if reason is not None else Answer(value=0, fs=result.fs)


def _entries(fs: Fs, path: str) -> Answer:
    result = fs.ls(path)
    reason = _denied(result)
    return Answer(reason=reason) if reason is not None else Answer(value=result.value)


def _stat(fs: Fs, path: str) -> Answer:
    result = fs.stat(path)
    reason = _denied(result)
    return Answer(reason=reason) if reason is not None else Answer(value=result.value)


def _ls(fs: Fs, path: str) -> Answer:
    result = fs.ls(path)
    reason = _denied(result)
    if reason is not None:
        return Answer(reason=reason)
    # An entry whose name holds a control character (an older tree's: kuro.fs refuses new ones) is left
    # out: no path can reach it, and listed raw its newline would forge a line of this listing.
    lines = [
        f"{e['name']}/\n" if e["kind"] == "dir" else f"{e['name']}\n"
        for e in result.value
        if not has_control(e["name"])
    ]
    return Answer(value="".join(lines).encode("utf-8", "surrogatepass"))


_OPS: dict[str, Callable[..., Answer]] = {
    "read_into": _read_into,
    "read_at": _read_at,
    "write": _write,
    "rm": _rm,
    "ls": _ls,
    "entries": _entries,
    "stat": _stat,
}


def call(fs: Any, op: str, *args: Any) -> Answer:
    """Run ``op`` on ``fs``; every failure is an :class:`Answer` with a kuro.fs reason, never a raise.

    ``fs`` None (no filesystem) answers ``block-missing`` (the guest sees ``IO``).
    Exceptions that are not kuro_fs's (a bug, or a guest-memory fault raised by
    a sink) propagate to the import's trampoline.
    """
    if not isinstance(fs, Fs):
        return Answer(reason="block-missing")
    try:
        return _OPS[op](fs, *args)
    except FileTooDeep:
        return Answer(reason="over-budget")
    except (MissingBlock, CorruptBlock, DagPbError, KuroFsError):
        return Answer(reason="block-missing")


def call_in_run(run: Any, op: str, *args: Any) -> Answer:
    """:func:`call` on the run's ``Fs``, opening it first if this is the run's first fs call.

    ``run`` is a :class:`~kuro_wasm.host.context.RunContext` (``fs``, ``open_fs``).
    """
    return call(opened_fs(run), op, *args)


# ---- one run's view: the fs root, and the scratch directory under tmp/


def scratch_path(run: RunContext, path: str) -> str | None:
    """``path`` inside the run's scratch directory, or None if it is not there (or ``fs/scratch`` is not granted).

    >>> from kuro_wasm.host.context import RunContext, Stopped
    >>> run = RunContext(grant=frozenset({"fs/scratch"}), emit=lambda name, data: True)
    >>> scratch_path(run, "/tmp/a.txt"), scratch_path(run, "tmp"), scratch_path(run, "docs/tmp")
    ('a.txt', '.', None)
    """
    if SCRATCH_CAPABILITY not in run.grant:
        return None
    parts = clean_path(path)
    if not parts or parts[0] != SCRATCH_DIR:
        return None
    return join_path(parts[1:])


def call_in(run: RunContext, name: str, capability: str, op: str, *args: Any, scratch: bool = False) -> Answer:
    """:func:`call` on the run's fs root (opened on first use) or, with ``scratch``, on its scratch directory.

    A kuro.fs ``missing-capability`` refusal is recorded in the run's denials
    against ``capability``. A write into the scratch directory past
    :data:`SCRATCH_MAX_BYTES` answers ``over-budget`` (``TOO_LARGE``) and stores nothing; only
    accepted writes count against that bound.
    """
    if scratch:
        if run.scratch is None:
            run.scratch = Fs.empty(MemoryBlockStore())
        if op != "write":
            return call(run.scratch, op, *args)
        if run.scratch_bytes + len(args[1]) > SCRATCH_MAX_BYTES:
            return Answer(reason="over-budget")
        answer = call(run.scratch, op, *args)
        if answer.reason is None:  # a refused write stored nothing: only what was written counts
            run.scratch_bytes += len(args[1])
        return answer
    answer = call(opened_fs(run), op, *args)
    if answer.reason is not None and abi.error_for_reason(answer.reason) == ErrorCode.DENIED:
        run.deny(name, capability, args[0] if args and isinstance(args[0], str) else None)
    return answer


def read_into_guest(
    run: RunContext, name: str, path: str, mem: Memory, buf_ptr: int, cap: int, *, scratch: bool = False
) -> int:
    """Copy min(size, cap) bytes of the file at ``path`` to guest memory at ``buf_ptr``; the size or an error code.

    The whole range ``[buf_ptr, buf_ptr+cap)`` must lie in guest memory (else
    :class:`~kuro_wasm.host.calls.Fault`). A file of the fs root whose bytes
    reached guest memory has its CID added to the run's reads (:func:`record_read`).
    """
    span(mem, buf_ptr, cap)
    try:
        answer = call_in(
            run,
            name,
            "fs/read",
            "read_into",
            path,
            cap % 2**32,
            lambda at, data: store_bytes(mem, buf_ptr + at, data),
            scratch=scratch,
        )
    except Stopped as stop:  # stopped part-way: what was copied is still a read
        record_read(run, Answer(read=stop.read), scratch=scratch)
        raise
    record_read(run, answer, scratch=scratch)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    size, _ = answer.value
    return abi.clamp_i32(size)


def record_read(run: RunContext, answer: Answer, *, scratch: bool = False) -> None:
    """Name in ``kuro/reads`` the file whose bytes reached guest memory (even if the call then failed).

    A scratch file is not named: its blocks never leave the run.
    """
    if not scratch and answer.read is not None and answer.read not in run.reads:
        run.reads.append(answer.read)
