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
(:func:`kuro_fs.unixfs.iter_file` over the range it needs, after
``Fs.read_range(path, 0, 0)`` has accepted the path), so a large read costs one
copy, not two.

## Effects
Only the ``Fs`` value's block store.

## Not done here
No caching of directory blocks between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kuro_fs.blocks import BlockStore
from kuro_fs.errors import CorruptBlock, DagPbError, InvalidCID, KuroFsError
from kuro_fs.fs import Fs
from kuro_fs.unixfs import MissingBlock, file_root_info, iter_file

__all__ = ["Answer", "call", "open_fs"]


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


def _denied(result: Any) -> str | None:
    if result.receipt.get("kuro.fs/type") == "kuro.fs/receipt":
        return None
    reason = result.receipt.get("kuro.fs/reason")
    return reason if isinstance(reason, str) else "block-missing"


def _read_into(fs: Fs, path: str, cap: int, sink: Callable[[int, bytes | memoryview], None]) -> Answer:
    probe = fs.read_range(path, 0, 0)
    reason = _denied(probe)
    if reason is not None:
        return Answer(reason=reason)
    cid = probe.receipt["kuro.fs/cid"]
    size = file_root_info(fs.store.get, cid).size
    at = 0
    try:
        for piece in iter_file(fs.store.get, cid, 0, min(size, cap)):
            sink(at, piece)
            at += len(piece)
    except (MissingBlock, CorruptBlock, DagPbError, KuroFsError):
        # a leaf missing or corrupt after others were copied: those bytes are in guest memory now
        return Answer(reason="block-missing", read=cid if at else None)
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


def _ls(fs: Fs, path: str) -> Answer:
    result = fs.ls(path)
    reason = _denied(result)
    if reason is not None:
        return Answer(reason=reason)
    lines = [f"{e['name']}/\n" if e["kind"] == "dir" else f"{e['name']}\n" for e in result.value]
    return Answer(value="".join(lines).encode("utf-8", "surrogatepass"))


_OPS: dict[str, Callable[..., Answer]] = {
    "read_into": _read_into,
    "read_at": _read_at,
    "write": _write,
    "rm": _rm,
    "ls": _ls,
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
    except (MissingBlock, CorruptBlock, DagPbError, KuroFsError):
        return Answer(reason="block-missing")
