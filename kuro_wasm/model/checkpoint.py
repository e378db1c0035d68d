"""Checkpoints: a stream as plain, versioned data that survives its host.

## The one decision
A restored stream is **never** ``running``. A guest does not survive the host
process that ran it, so a stream saved while running comes back ``orphaned``
(``restored_from`` says what it was), can take no more output, and is closed
with :func:`abandon` into a receipt with outcome ``abandoned`` (exit 129 by
default) — never silently resumed as though the guest were still there.

Taking a checkpoint of a run is what the ``agent/checkpoint`` capability
gates: :func:`to_data` of a run whose session lacks it returns the
``missing-capabilities`` denial value instead of the data (the original kuro
granted it only in ``terminal-agent`` and never checked it).

Optionally (``max_chunk_bytes``, off by default) the saved body is cut to a
**total** budget across chunks, in order, at a UTF-8 code-point boundary (a
multi-byte character is never split; bytes that are not valid UTF-8 are cut
where the budget ends). The cut is recorded as ``kuro.checkpoint/dropped-bytes``
while the byte counters keep the pre-cut truth, so kept + checkpoint-dropped =
the stream's kept total; after restore the cut shows as stream truncation.

## Pure
Data in, data out; the data encodes as dag-cbor and (via ``receipt.to_json``) as JSON.

## Not done here
No storage, no resumption of a guest, no session registry (tmux-like attach).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any, Final

from kuro_wasm.errors import CheckpointError, CheckpointVersionError, ModelError, StreamClosed
from kuro_wasm.model.isolation import ISOLATIONS
from kuro_wasm.model.sessions import Session, denial, is_guest_spec, missing_capabilities
from kuro_wasm.model.stream import STATES, STREAMS, Chunk, Stream, _finish, chunks

__all__ = [
    "ABANDONED_ERROR",
    "REQUIRES",
    "UNRECORDED_ISOLATION",
    "VERSION",
    "abandon",
    "restore",
    "summary",
    "to_data",
]

VERSION: Final = 1
#: What the run's session must grant for a checkpoint of it to be taken.
REQUIRES: Final = frozenset({"agent/checkpoint"})
#: The ``kuro/error`` of an abandoned run unless the host states the real reason.
ABANDONED_ERROR: Final = "guest did not survive its host"
_CHUNK_KEYS: Final = frozenset({"kuro/stream", "kuro/bytes", "kuro/seq"})
#: The ``kuro/isolation`` of an abandoned run whose checkpoint did not record its backend.
UNRECORDED_ISOLATION: Final = "unknown"


def _boundary(data: bytes, cut: int) -> int:
    """The largest cut ≤ ``cut`` that does not split a well-formed UTF-8 character."""
    if cut >= len(data):
        return len(data)
    start = cut
    while start > 0 and cut - start < 3 and 0x80 <= data[start] < 0xC0:
        start -= 1
    lead = data[start]
    width = 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1
    if start < cut < start + width:
        try:
            data[start : start + width].decode("utf-8")
        except UnicodeDecodeError:
            return cut
        return start
    return cut


def _saved_chunks(s: Stream, max_chunk_bytes: int | None) -> tuple[list[dict[str, Any]], int]:
    saved: list[dict[str, Any]] = []
    kept = dropped = 0
    for chunk in chunks(s):
        data = chunk.data
        if max_chunk_bytes is not None:
            room = max(0, max_chunk_bytes - kept)
            if room == 0:
                dropped += len(data)
                continue
            if len(data) > room:
                cut = _boundary(data, room)
                dropped += len(data) - cut
                data = data[:cut]
        kept += len(data)
        saved.append({"kuro/stream": chunk.stream, "kuro/bytes": data, "kuro/seq": chunk.seq})
    return saved, dropped


def to_data(
    s: Stream,
    session: Session | None = None,
    command: Mapping[str, Any] | None = None,
    *,
    max_chunk_bytes: int | None = None,
    isolation: str | None = None,
) -> dict[str, Any]:
    """The checkpoint of ``s``: plain versioned data (``kuro.checkpoint/version`` 1), or a denial.

    ``isolation`` (else the stream's own) is the backend running the guest, one of
    :data:`~kuro_wasm.model.isolation.ISOLATIONS`, kept as ``kuro/isolation`` so that
    :func:`abandon` states it.

    The run's session (``session``, else the stream's own) must grant
    ``agent/checkpoint`` (:data:`REQUIRES`); otherwise the value returned is the
    ``missing-capabilities`` denial (:func:`kuro_wasm.model.sessions.missing_capabilities`),
    with ``kuro/type`` ``"kuro/denial"``, and nothing is saved.
    Chunks are saved in the closed shape ``{kuro/stream, kuro/bytes, kuro/seq}``.
    ``session``/``command`` default to the stream's own. With ``max_chunk_bytes``
    the chunk bytes are cut to that total and ``kuro.checkpoint/dropped-bytes``
    records the cut (absent when nothing was cut).

    Raises ModelError: if no session/command is known, ``max_chunk_bytes`` is
    not a non-negative int, or ``isolation`` is not a known backend.
    """
    iso = isolation if isolation is not None else s.isolation
    if iso is not None and iso not in ISOLATIONS:
        raise ModelError(f"isolation must be one of {sorted(ISOLATIONS)}, got {iso!r}", reason="invalid-isolation")
    sess = session if session is not None else s.session
    cmd = command if command is not None else s.command
    if sess is None or cmd is None:
        raise ModelError("a checkpoint needs the run's session and command", reason="invalid-stream")
    if max_chunk_bytes is not None and (
        isinstance(max_chunk_bytes, bool) or not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 0
    ):
        raise ModelError(f"max_chunk_bytes must be an int >= 0, got {max_chunk_bytes!r}", reason="invalid-limit")
    refused = missing_capabilities(sess, REQUIRES)
    if refused is not None:
        return refused
    saved, dropped = _saved_chunks(s, max_chunk_bytes)
    data: dict[str, Any] = {
        "kuro.checkpoint/version": VERSION,
        "kuro.checkpoint/state": s.state,
        "kuro/session": sess.to_data(),
        "kuro/command": dict(cmd),
        "kuro/session-id": sess.id,
        "kuro/chunks": saved,
        "kuro/seq": s.seq,
        "kuro/stdout-bytes": s.stdout_bytes,
        "kuro/stderr-bytes": s.stderr_bytes,
        "kuro/dropped-bytes": s.dropped_bytes,
        "kuro/truncated?": s.truncated,
        "kuro/max-output-bytes": s.max_output_bytes,
    }
    if dropped:
        data["kuro.checkpoint/dropped-bytes"] = dropped
    if s.capped_by is not None:
        data["kuro/capped-by"] = s.capped_by
    if iso is not None:
        data["kuro/isolation"] = iso
    return data


def _count(data: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    # Below 2**64: a larger counter could never have been written as dag-cbor, and the receipt
    # that abandon() builds from it could not be encoded.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise CheckpointError(f"checkpoint {key} must be an int in 0..2**64-1, got {value!r}")
    return value


def _chunk(item: object, seq: int) -> Chunk:
    if not isinstance(item, Mapping) or set(item) != _CHUNK_KEYS:
        raise CheckpointError(f"checkpoint chunk must have exactly {sorted(_CHUNK_KEYS)}, got {item!r}")
    stream, data, at = item["kuro/stream"], item["kuro/bytes"], item["kuro/seq"]
    if stream not in STREAMS or not isinstance(data, bytes):
        raise CheckpointError(f"checkpoint chunk needs stdout/stderr and bytes, got {stream!r}")
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at < seq:
        raise CheckpointError(f"checkpoint chunk seq {at!r} outside 0..{seq - 1}")
    return Chunk(stream, data, at)


def restore(data: Mapping[str, Any]) -> Stream:
    """A stream from checkpoint ``data``; a saved ``running`` stream comes back ``orphaned``.

    ``restored_from`` is the saved state; ``dropped_bytes`` adds the checkpoint
    cut to the stream's own drops, and a cut makes the stream truncated.

    Raises CheckpointVersionError: if the version is not :data:`VERSION`.
    Raises CheckpointError: if the data is not a checkpoint (wrong shape, chunk
    seqs out of order, counters that do not add up, a bad session or command, or
    a command its session's gate refuses: such a run never ran).
    """
    if not isinstance(data, Mapping):
        raise CheckpointError(f"a checkpoint is a mapping, got {type(data).__name__}")
    if data.get("kuro.checkpoint/version") != VERSION or isinstance(data.get("kuro.checkpoint/version"), bool):
        raise CheckpointVersionError(data.get("kuro.checkpoint/version"), VERSION)
    state = data.get("kuro.checkpoint/state")
    if state not in STATES:
        raise CheckpointError(f"checkpoint state must be one of {STATES}, got {state!r}")
    try:
        sess = Session.from_data(data.get("kuro/session", {}))
    except ModelError as exc:
        raise CheckpointError(f"checkpoint session: {exc}") from exc
    command = data.get("kuro/command")
    if not is_guest_spec(command) or data.get("kuro/session-id") != sess.id:
        raise CheckpointError("checkpoint command must be a guest spec and session-id match the session")
    assert isinstance(command, Mapping)
    refused = denial(sess, command)
    if refused is not None:  # the gate refuses it: it never ran, and abandon() would make it a receipt
        raise CheckpointError(f"checkpoint of a run its session's gate refuses ({refused['kuro/reason']})")
    seq = _count(data, "kuro/seq")
    items = data.get("kuro/chunks")
    if not isinstance(items, (list, tuple)):
        raise CheckpointError("checkpoint kuro/chunks must be a list")
    saved = [_chunk(item, seq) for item in items]
    if any(a.seq >= b.seq for a, b in pairwise(saved)):
        raise CheckpointError("checkpoint chunk seqs must increase")
    out, err = _count(data, "kuro/stdout-bytes"), _count(data, "kuro/stderr-bytes")
    cut = _count(data, "kuro.checkpoint/dropped-bytes", 0)
    # <=, not ==: a stream restored from a cut checkpoint and saved again has already folded
    # the first cut into kuro/dropped-bytes, and its counters still hold the pre-cut truth.
    if sum(len(c.data) for c in saved) + cut > out + err:
        raise CheckpointError("checkpoint chunk bytes plus checkpoint drops exceed the byte counters")
    # Per stream too: the receipt abandon() builds states each counter beside that stream's bytes.
    for name, counted in (("stdout", out), ("stderr", err)):
        if sum(len(c.data) for c in saved if c.stream == name) > counted:
            raise CheckpointError(f"checkpoint {name} chunk bytes exceed kuro/{name}-bytes")
    cap = _count(data, "kuro/max-output-bytes")
    if out + err > cap:
        raise CheckpointError(f"checkpoint keeps {out + err} bytes, more than its kuro/max-output-bytes {cap}")
    truncated = data.get("kuro/truncated?")
    if not isinstance(truncated, bool):
        raise CheckpointError(f"checkpoint kuro/truncated? must be a bool, got {truncated!r}")
    stream_dropped = _count(data, "kuro/dropped-bytes")
    if stream_dropped and not truncated:  # the cap drops only by truncating: else the drop would vanish
        raise CheckpointError("checkpoint kuro/dropped-bytes is nonzero but kuro/truncated? is false")
    capped_by = data.get("kuro/capped-by")
    if capped_by not in (None, "bytes", "chunks"):
        raise CheckpointError(f"checkpoint kuro/capped-by must be bytes or chunks, got {capped_by!r}")
    isolation = data.get("kuro/isolation")
    if isolation is not None and isolation not in ISOLATIONS:
        raise CheckpointError(f"checkpoint kuro/isolation must be one of {sorted(ISOLATIONS)}, got {isolation!r}")
    rev: Any = None
    for chunk in saved:
        rev = (chunk.stream, chunk.data, chunk.seq, rev)
    return Stream(
        max_output_bytes=cap,
        state="orphaned" if state == "running" else state,
        seq=seq,
        stdout_bytes=out,
        stderr_bytes=err,
        dropped_bytes=stream_dropped + cut,
        truncated=truncated or cut > 0,
        restored_from=state,
        session=sess,
        command=dict(command),
        kept_chunks=len(saved),
        capped_by=capped_by,
        _rev=rev,
        isolation=isolation,
    )


def abandon(
    orphan: Stream,
    reason: str | None = None,
    exit_code: int = 129,
    *,
    result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Close a run whose guest did not survive its host into a receipt.

    Outcome ``abandoned``, exit ``exit_code`` (129 unless the host knows the
    real one), ``kuro/error`` ``reason`` or :data:`ABANDONED_ERROR`, isolation
    the backend the run had (the checkpoint's ``kuro/isolation``) unless ``result``
    says otherwise — :data:`UNRECORDED_ISOLATION` (``"unknown"``) for a checkpoint
    that did not record it (one written before it was kept): a guest ran, under a
    backend nobody wrote down, never ``"none"``, which says nothing ran. ``result``
    may add other host keys (``started-at`` …). The kept output and truncation carry through.

    Raises StreamClosed: if the stream is neither ``orphaned`` nor ``running``
    (an exited stream already has a real ending). Raises ModelError: as
    :func:`kuro_wasm.model.receipt.receipt` does.
    """
    if orphan.state not in ("orphaned", "running"):
        raise StreamClosed(
            f"abandon closes a run whose guest died; a {orphan.state} stream already has a real ending",
            state=orphan.state,
        )
    merged: dict[str, Any] = {"isolation": orphan.isolation or UNRECORDED_ISOLATION, **dict(result or {})}
    for key in ("exit-code", "outcome", "error"):
        merged.pop(key, None)
        merged.pop("kuro/" + key, None)
    merged.update({"exit-code": exit_code, "outcome": "abandoned", "error": reason or ABANDONED_ERROR})
    return _finish(orphan, None, None, merged)


def summary(data: Mapping[str, Any]) -> str:
    """One line describing a checkpoint, e.g. ``"s1 bafk…:run(40, 2) [running] 18B"``.

    Adds ``" (stream dropped NB)"`` and ``" (checkpoint dropped NB)"`` when
    something was dropped.

    Raises CheckpointError (or CheckpointVersionError): if ``data`` is not a
    checkpoint :func:`restore` would accept.
    """
    restore(data)  # validates the shape, so the line below reads only well-typed fields
    cmd = data["kuro/command"]
    args = ", ".join(str(a) for a in cmd["kuro/args"])
    total = data["kuro/stdout-bytes"] + data["kuro/stderr-bytes"]
    line = (
        f"{data.get('kuro/session-id')} {cmd.get('kuro/guest')}:{cmd.get('kuro/export')}({args}) "
        f"[{data.get('kuro.checkpoint/state')}] {total}B"
    )
    if data.get("kuro/dropped-bytes"):
        line += f" (stream dropped {data['kuro/dropped-bytes']}B)"
    if "kuro.checkpoint/dropped-bytes" in data:
        line += f" (checkpoint dropped {data['kuro.checkpoint/dropped-bytes']}B)"
    return line
