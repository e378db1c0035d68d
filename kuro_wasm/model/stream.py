"""The output stream of one guest run: state + event → next state.

## The one decision
One output cap (default 1 MiB) counts stdout and stderr **together**; a chunk
that does not fit is dropped **whole**, and truncation is **sticky**: once a
chunk has been dropped every later chunk is dropped too, even one that would
fit. Every kept chunk also counts against a **chunk bound** (``max_chunks``,
default 100,000): a write — even an empty one — costs host memory for its
bookkeeping, so a guest looping on tiny or zero-length writes is stopped like
one that writes too many bytes, and ``kuro/capped-by`` says which bound
(``bytes`` or ``chunks``) stopped it. So the kept output is always an exact prefix of what the guest emitted
(per stream and interleaved), and ``kept + dropped-bytes = emitted``. ``seq``
advances for dropped chunks too, so a reader can see where the gap is.
:func:`finish` builds the receipt with the stream's own measurements winning
over the host's (handed to :func:`kuro_wasm.model.receipt.receipt_measured`, which
does not check a second time what the stream itself computed); an untruncated
stream's receipt has no ``kuro/truncated?`` and no ``kuro/dropped-bytes`` at all.

The value is immutable, yet :func:`append` is O(1): kept chunks live in a
reversed cons list (``(stream, data, seq, rest)`` tuples — a :class:`Chunk` is
built only when one is asked for) with running counters beside it,
and are put in order only on demand (:func:`chunks`, :func:`kept_bytes`). A
guest may write 100k tiny chunks; copying a tuple per append would be quadratic.
The host's hot path uses a :class:`Writer` (the single writer's side of the same
rules): an append there adds the chunk to two lists and builds no cons cell (a
tuple per write that the cyclic GC keeps rescanning), and a :class:`Stream` value
is made only when someone asks for one (``Writer.value``) — building one per
write cost a sixth of a gated ``write`` call.

## Pure
No I/O, no clock, no threads: the host owns the single writer.

## Not done here
No decoding: chunks are bytes. No persistence (see :mod:`kuro_wasm.model.checkpoint`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeAlias, overload

from kuro_fs.cid import raw_cid
from kuro_wasm.errors import ModelError, StreamClosed
from kuro_wasm.model.receipt import namespace, receipt_closed, receipt_measured
from kuro_wasm.model.sessions import Session

__all__ = [
    "DEFAULT_MAX_CHUNKS",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "STATES",
    "STREAMS",
    "Chunk",
    "Stream",
    "Writer",
    "append",
    "chunks",
    "drop",
    "finish",
    "finish_trusted",
    "kept_bytes",
    "mark_exited",
    "new",
    "total_bytes",
]

DEFAULT_MAX_OUTPUT_BYTES: Final = 1048576
#: Kept chunks per run (stdout and stderr together), whatever their size.
DEFAULT_MAX_CHUNKS: Final = 100_000
STREAMS: Final = ("stdout", "stderr")
#: ``orphaned`` only ever comes from :func:`kuro_wasm.model.checkpoint.restore`.
STATES: Final = ("running", "exited", "orphaned")

_Cons: TypeAlias = "tuple[str, bytes, int, _Cons] | None"


class Chunk(NamedTuple):
    """One kept write: which stream, the bytes, and its sequence number.

    A named tuple (immutable), not a frozen dataclass: one is built per kept write,
    on the guest's hot path, and a frozen dataclass costs twice as much to build.
    """

    stream: str
    data: bytes
    seq: int

    def to_data(self) -> dict[str, Any]:
        """``{"kuro/stream", "kuro/bytes", "kuro/seq"}`` (a closed shape)."""
        return {"kuro/stream": self.stream, "kuro/bytes": self.data, "kuro/seq": self.seq}


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Stream:
    """An output stream value. Build with :func:`new`; change with :func:`append`/:func:`mark_exited`.

    ``stdout_bytes``/``stderr_bytes`` count kept bytes; ``dropped_bytes`` what
    the cap dropped; ``seq`` the number of appends seen (kept or not);
    ``kept_chunks`` the chunks kept, at most ``max_chunks``; ``capped_by`` which
    bound dropped the first chunk (``"bytes"`` or ``"chunks"``), None until one did.
    ``session``/``command`` are optional: :func:`finish` and the checkpoint use
    them when the caller does not pass its own.
    """

    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    state: str = "running"
    seq: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    dropped_bytes: int = 0
    truncated: bool = False
    restored_from: str | None = None
    session: Session | None = None
    command: Mapping[str, Any] | None = None
    max_chunks: int = DEFAULT_MAX_CHUNKS
    kept_chunks: int = 0
    capped_by: str | None = None
    _rev: _Cons = field(default=None, compare=False)
    #: The backend that ran the guest (:data:`kuro_wasm.model.isolation.ISOLATIONS`), as a checkpoint recorded it.
    isolation: str | None = None

    @property
    def running(self) -> bool:
        """True while the guest may still write."""
        return self.state == "running"

    def _key(self) -> tuple[Any, ...]:
        return (
            self.max_output_bytes,
            self.state,
            self.seq,
            self.stdout_bytes,
            self.stderr_bytes,
            self.dropped_bytes,
            self.truncated,
            self.restored_from,
            self.session,
            None if self.command is None else dict(self.command),
            self.max_chunks,
            self.capped_by,
            self.isolation,
            chunks(self),
        )

    def __eq__(self, other: object) -> bool:
        # Defined by hand: comparing two 100k-deep cons lists would recurse.
        return isinstance(other, Stream) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Stream(state={self.state!r}, seq={self.seq}, stdout_bytes={self.stdout_bytes}, "
            f"stderr_bytes={self.stderr_bytes}, dropped_bytes={self.dropped_bytes}, "
            f"truncated={self.truncated}, max_output_bytes={self.max_output_bytes})"
        )


def new(
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    *,
    session: Session | None = None,
    command: Mapping[str, Any] | None = None,
    max_chunks: int = DEFAULT_MAX_CHUNKS,
) -> Stream:
    """A fresh ``running`` stream with the cap ``max_output_bytes`` across both streams.

    Raises ModelError: if the cap or the chunk bound is not a non-negative int.
    """
    for name, value in (("max_output_bytes", max_output_bytes), ("max_chunks", max_chunks)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelError(f"{name} must be an int >= 0, got {value!r}", reason="invalid-limit")
    return Stream(max_output_bytes=max_output_bytes, session=session, command=command, max_chunks=max_chunks)


def _check_name(stream: object) -> str:
    if not isinstance(stream, str) or stream not in STREAMS:
        raise ModelError(f"chunk stream must be stdout or stderr, got {stream!r}", reason="invalid-stream-name")
    return stream


def append(s: Stream, stream: str, data: bytes | bytearray | memoryview) -> tuple[Stream, Chunk | None]:
    """Record that the guest wrote ``data`` to ``stream``: ``(stream', chunk)``.

    ``chunk`` is the kept :class:`Chunk`, or ``None`` when a bound dropped the
    write — then ``stream'.truncated`` is True and the host should stop the guest
    with outcome ``output-capped`` (exit 125). An empty write is kept (and counts
    against the chunk bound) while the stream is not truncated.

    Raises ModelError: if ``stream`` is not stdout/stderr (checked first) or
    ``data`` is not bytes-like. Raises StreamClosed: if ``s`` is not running.
    """
    _check_name(stream)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelError(f"chunk data must be bytes, got {type(data).__name__}", reason="invalid-chunk")
    if s.state != "running":
        raise StreamClosed(f"cannot append to a finished stream (state {s.state})", state=s.state)
    data = bytes(data)
    n = len(data)
    capped = (
        s.capped_by
        if s.truncated
        else _bound_hit(s.max_output_bytes, s.stdout_bytes + s.stderr_bytes, n, s.max_chunks, s.kept_chunks)
    )
    if capped is not None:
        return _next(s, s.stdout_bytes, s.stderr_bytes, s.dropped_bytes + n, True, s.kept_chunks, capped, s._rev), None
    chunk = Chunk(stream, data, s.seq)
    out, err = (s.stdout_bytes + n, s.stderr_bytes) if stream == "stdout" else (s.stdout_bytes, s.stderr_bytes + n)
    rev = (stream, data, chunk.seq, s._rev)
    return _next(s, out, err, s.dropped_bytes, s.truncated, s.kept_chunks + 1, None, rev), chunk


def drop(s: Stream, writes: int, nbytes: int, capped_by: str) -> Stream:
    """The stream after ``writes`` writes of ``nbytes`` in all that a bound (``capped_by``) dropped elsewhere.

    A worker process runs the guest under the same cap and sends only the chunks
    it kept (:mod:`kuro_wasm.host.worker`); the writes it dropped arrive as counts,
    never as bytes, so the host need not hold what nobody keeps. The result is the
    state :func:`append` would have reached: truncated (sticky), ``dropped_bytes``
    and ``seq`` advanced, nothing kept.

    >>> t = drop(new(4), 1, 10, "bytes")
    >>> (t.truncated, t.dropped_bytes, t.seq, total_bytes(t), t.capped_by)
    (True, 10, 1, 0, 'bytes')

    Raises ModelError: ``writes`` not an int ≥ 1, ``nbytes`` not an int ≥ 0, ``capped_by`` not
    ``"bytes"``/``"chunks"``. Raises StreamClosed: if ``s`` is not running.
    """
    for name, value, least in (("writes", writes, 1), ("nbytes", nbytes, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ModelError(f"{name} must be an int >= {least}, got {value!r}", reason="invalid-chunk")
    if capped_by not in ("bytes", "chunks"):
        raise ModelError(f"capped_by must be bytes or chunks, got {capped_by!r}", reason="invalid-chunk")
    if s.state != "running":
        raise StreamClosed(f"cannot drop from a finished stream (state {s.state})", state=s.state)
    return Stream(
        s.max_output_bytes,
        s.state,
        s.seq + writes,
        s.stdout_bytes,
        s.stderr_bytes,
        s.dropped_bytes + nbytes,
        True,
        s.restored_from,
        s.session,
        s.command,
        s.max_chunks,
        s.kept_chunks,
        s.capped_by if s.capped_by is not None else capped_by,
        s._rev,
    )


def _bound_hit(max_bytes: int, kept: int, n: int, max_chunks: int, chunks_kept: int) -> str | None:
    """Which bound a write of ``n`` bytes would exceed (``"bytes"`` first), or None if it fits both."""
    if n > max_bytes - kept:
        return "bytes"
    if chunks_kept >= max_chunks:
        return "chunks"
    return None


def _next(
    s: Stream, out: int, err: int, dropped: int, truncated: bool, kept: int, capped: str | None, rev: _Cons
) -> Stream:
    # The hot path: a positional constructor call, not dataclasses.replace (several times faster).
    return Stream(
        s.max_output_bytes,
        s.state,
        s.seq + 1,
        out,
        err,
        dropped,
        truncated,
        s.restored_from,
        s.session,
        s.command,
        s.max_chunks,
        kept,
        capped if capped is not None else s.capped_by,
        rev,
    )


class Writer:
    """The single writer of a running stream: :func:`append`'s rules, without a new value per write.

    The kept chunks go to two append-only lists (their bytes, their stream names), not to a cons
    list: a cons cell per write is a tuple the cyclic GC must track and scan again and again while
    the run lasts (measured: 0.13 µs per write on top of building it, 0.04 µs), a list slot is not.

    **What an append publishes is the lists, nothing else.** Until the first drop every write is
    kept (truncation is sticky), so the state of an untruncated stream is a function of its kept
    chunks: ``seq`` is the first seq plus their count, the byte counters are sums of their lengths,
    and the count is the length of the names list (appended to after the bytes list, so every chunk
    it counts is in both). The bounds are checked against the writer's own countdown (``_room``:
    bytes the cap still allows; the chunk bound against the list's length), which only the writer
    reads. The first drop publishes, whole, one tuple (``_drop``: the count kept, seq, dropped bytes,
    the bound hit) that every later drop replaces whole; the lists never grow after it. So
    :meth:`value` — callable from any thread — reads ``_drop`` and then, if there was none, the
    count: a state the stream was in (had a drop come in between, the lists had stopped growing).
    Publishing the seven counters as one tuple per write cost a third of that write's stream append.

    :meth:`value` builds the cons list of a :class:`Stream` (and the byte counters beside it) from the
    lists on demand, extending what it built last time (no lock: this module is pure; see :meth:`_at`);
    :meth:`receipt_namespaced` sums the lists at C speed.
    """

    __slots__ = (
        "_base",
        "_base_err",
        "_base_kept",
        "_base_out",
        "_built",
        "_capped",
        "_chunk_cap",
        "_datas",
        "_drop",
        "_dropped",
        "_first_seq",
        "_limit",
        "_max_chunks",
        "_names",
        "_room",
    )

    def __init__(self, base: Stream | None = None, *, max_output_bytes: int = 0, max_chunks: int = 0) -> None:
        """Continue ``base`` (a running stream), or start an empty one with these bounds (trusted ints)."""
        self._base = base
        self._datas: list[bytes] = []
        self._names: list[str] = []
        if base is None:
            self._limit, self._max_chunks = max_output_bytes, max_chunks
            seq = out = err = dropped = kept = 0
            truncated, capped = False, None
            rev: _Cons = None
        else:
            if base.state != "running":
                raise StreamClosed(f"cannot write to a finished stream (state {base.state})", state=base.state)
            self._limit, self._max_chunks = base.max_output_bytes, base.max_chunks
            seq, out, err, dropped = base.seq, base.stdout_bytes, base.stderr_bytes, base.dropped_bytes
            kept, truncated, capped, rev = base.kept_chunks, base.truncated, base.capped_by, base._rev
        self._first_seq, self._base_out, self._base_err, self._base_kept = seq, out, err, kept
        self._dropped, self._capped = dropped, capped  # (as long as nothing is dropped)
        # The writer's own countdown (read by the writer only): bytes the cap still allows; -1 once truncated.
        self._room = -1 if truncated else self._limit - out - err
        self._chunk_cap = self._max_chunks - kept  # list entries the chunk bound still allows
        #: None until a write is dropped; then (chunks of the lists kept, seq, dropped bytes, bound hit)
        self._drop: tuple[int, int, int, str | None] | None = (0, seq, dropped, capped) if truncated else None
        self._built: tuple[int, _Cons, int, int] = (0, rev, out, err)  # (chunks of the lists in it, cons, out, err)

    def append(self, stream: str, data: bytes) -> bool:
        """Record a write of ``data`` (bytes) to ``stream`` (``"stdout"``/``"stderr"``, trusted: host constants).

        Returns True if the chunk was kept (its seq is then :attr:`seq` - 1), False when a bound
        dropped it (the host stops the guest).
        """
        room = self._room - len(data)
        names = self._names
        if room < 0 or len(names) >= self._chunk_cap:
            return self.admit(len(data))  # records the drop
        self._room = room
        self._datas.append(data)  # the bytes first: a chunk the names list counts is in both lists
        names.append(stream)
        return True

    def admit(self, n: int) -> bool:
        """True if a write of ``n`` bytes would be kept now (the caller then appends it); else
        the write is recorded as dropped, exactly as :meth:`append` records it, and False (the host stops
        the guest). So a host measures a write before building its bytes, and never builds one that no
        bound lets through (a WASI ``fd_write`` whose iovecs name the same memory many times over).

        >>> w = Writer(max_output_bytes=4, max_chunks=10)
        >>> (w.admit(4), w.admit(5), w.value().dropped_bytes, w.value().truncated, w.admit(0))
        (True, False, 5, True, False)
        """
        room, count = self._room, len(self._names)
        drop = self._drop
        if drop is None:
            if n <= room and count < self._chunk_cap:
                return True
            hit = "bytes" if n > room else "chunks"
            self._drop = (count, self._first_seq + count + 1, self._dropped + n, hit)
            self._room = -1
        else:
            self._drop = (drop[0], drop[1] + 1, drop[2] + n, drop[3])
        return False

    def _now(self) -> tuple[int, int, int, bool, str | None]:
        """(chunks of the lists counted, seq, dropped bytes, truncated, bound hit): one state the stream was in."""
        drop = self._drop
        if drop is None:
            count = len(self._names)
            return count, self._first_seq + count, self._dropped, False, self._capped
        count, seq, dropped, capped = drop
        return count, seq, dropped, True, capped

    @property
    def seq(self) -> int:
        """Writes seen so far (kept or not)."""
        drop = self._drop
        return self._first_seq + len(self._names) if drop is None else drop[1]

    def _count(self, kept: int) -> int:
        """How many chunks of the lists a state with ``kept`` kept chunks counts."""
        return kept - self._base_kept

    def totals(self) -> tuple[int, int, int, int, bool, str | None]:
        """(seq, stdout bytes kept, stderr bytes kept, dropped bytes, truncated, bound hit): one state the stream was
        in, summed at C speed without building a :class:`Stream` value (what a worker process reports of its run).

        >>> w = Writer(max_output_bytes=4, max_chunks=10)
        >>> (w.append("stdout", b"ab"), w.append("stderr", b"c"), w.append("stdout", b"de"), w.totals())
        (True, True, False, (3, 2, 1, 2, True, 'bytes'))
        """
        count, seq, dropped, truncated, capped = self._now()
        datas, names = self._datas, self._names
        if count != len(datas) or count != len(names):
            datas, names = datas[:count], names[:count]
        if "stderr" not in names:
            out, err = sum(map(len, datas)), 0
        elif "stdout" not in names:
            out, err = 0, sum(map(len, datas))
        else:
            out = sum([len(d) for d, name in zip(datas, names, strict=True) if name == "stdout"])
            err = sum(map(len, datas)) - out
        return seq, self._base_out + out, self._base_err + err, dropped, truncated, capped

    def receipt_namespaced(self, sess: Session, command: Mapping[str, Any], host: dict[str, Any]) -> dict[str, Any]:
        """:func:`finish_trusted` of what was written, without building a :class:`Stream` value first, for a
        ``result`` already namespaced: ``host`` is a :func:`~kuro_wasm.model.receipt.namespace` result (a fresh
        dict, taken over and completed in place), updated with ``kuro/…`` host keys only — the host's own run
        builds its keys so, and the receipt is the one :func:`finish_trusted` makes of the bare keys."""
        count, _, dropped, truncated, capped = self._now()
        datas, names = self._datas, self._names
        if count != len(datas) or count != len(names):
            datas, names = datas[:count], names[:count]
        # One count at C speed (most runs write to one stream only); the names are the host's "stdout"/"stderr"
        # constants, so it mostly compares by identity
        to_stdout = names.count("stdout")
        if to_stdout == len(names):
            out, err = b"".join(datas), b""
        elif to_stdout == 0:
            out, err = b"", b"".join(datas)
        else:
            out = b"".join([d for d, name in zip(datas, names, strict=True) if name == "stdout"])
            err = b"".join([d for d, name in zip(datas, names, strict=True) if name != "stdout"])
        out_n, err_n = self._base_out + len(out), self._base_err + len(err)
        if self._base is not None and self._base._rev is not None:
            before_out, before_err = _kept_both(self._base._rev)
            out, err = before_out + out, before_err + err
        return _trusted_host(sess, command, host, _measure_kept(out, err, out_n, err_n, dropped, truncated, capped))

    def value(self, state: str = "running") -> Stream:
        """The stream as written so far (``running``; ``exited`` once the writer's run is over)."""
        drop = self._drop  # (_now, inlined: on_chunk asks after every write)
        if drop is None:
            count = len(self._names)
            seq, dropped, truncated, capped = self._first_seq + count, self._dropped, False, self._capped
        else:
            count, seq, dropped, capped = drop
            truncated = True
        rev, out, err = self._at(count)
        kept = self._base_kept + count
        b = self._base
        if b is None:
            return Stream(
                self._limit, state, seq, out, err, dropped, truncated, None, None, None, self._max_chunks, kept, capped,
                rev,
            )  # fmt: skip
        return Stream(
            b.max_output_bytes, state, seq, out, err, dropped, truncated, b.restored_from, b.session, b.command,
            b.max_chunks, kept, capped, rev,
        )  # fmt: skip

    def _rev(self, count: int) -> _Cons:
        """The cons list of the base's chunks and the first ``count`` of the lists."""
        return self._at(count)[0]

    def _at(self, count: int) -> tuple[_Cons, int, int]:
        """The cons list of the base's chunks and the first ``count`` of the lists, with their stdout and stderr
        byte counts, extending the last one built. Two threads asking at once may each build the same cells;
        each result is whole and right (``_built`` is one tuple, read and replaced whole), the cache keeps either."""
        built, rev, out, err = self._built
        if built > count:  # another thread built further: step back to ``count``
            for _ in range(built - count):
                assert rev is not None
                if rev[0] == "stdout":
                    out -= len(rev[1])
                else:
                    err -= len(rev[1])
                rev = rev[3]
            return rev, out, err
        datas, names, first = self._datas, self._names, self._first_seq
        for i in range(built, count):
            data, name = datas[i], names[i]
            rev = (name, data, first + i, rev)
            if name == "stdout":
                out += len(data)
            else:
                err += len(data)
        self._built = (count, rev, out, err)
        return rev, out, err


def _walk(s: Stream) -> Iterator[Chunk]:
    node = s._rev
    while node is not None:
        yield Chunk(node[0], node[1], node[2])
        node = node[3]


def chunks(s: Stream) -> tuple[Chunk, ...]:
    """The kept chunks in write order (O(n): materialised on demand)."""
    out = list(_walk(s))
    out.reverse()
    return tuple(out)


def kept_bytes(s: Stream, stream: str) -> bytes:
    """The kept bytes of one stream, concatenated in order.

    Raises ModelError: if ``stream`` is not stdout/stderr.
    """
    _check_name(stream)
    parts = [c.data for c in _walk(s) if c.stream == stream]
    parts.reverse()
    return b"".join(parts)


def total_bytes(s: Stream) -> int:
    """Kept bytes across both streams (dropped bytes excluded)."""
    return s.stdout_bytes + s.stderr_bytes


def mark_exited(s: Stream) -> Stream:
    """The stream with state ``exited``; idempotent on an exited stream.

    Raises StreamClosed: on an ``orphaned`` stream (close it with checkpoint.abandon).
    """
    if s.state == "exited":
        return s
    if s.state != "running":
        raise StreamClosed(f"only a running stream exits (state {s.state}); abandon an orphan", state=s.state)
    return Stream(
        s.max_output_bytes,
        "exited",
        s.seq,
        s.stdout_bytes,
        s.stderr_bytes,
        s.dropped_bytes,
        s.truncated,
        s.restored_from,
        s.session,
        s.command,
        s.max_chunks,
        s.kept_chunks,
        s.capped_by,
        s._rev,
    )


_EMPTY_CID: Final = raw_cid(b"")
_SMALL: Final = 1024


@functools.lru_cache(maxsize=256)
def _small_raw_cid(data: bytes) -> str:
    return raw_cid(data)


def _cid_of_kept(data: bytes) -> str:
    """``raw_cid(data)``; a run's output is often empty or the same few bytes again, so those are remembered."""
    if not data:
        return _EMPTY_CID
    return _small_raw_cid(data) if len(data) <= _SMALL else raw_cid(data)


def _kept_both(rev: _Cons) -> tuple[bytes, bytes]:
    """(stdout, stderr) kept bytes in one walk of the cons list (no Chunk built)."""
    if rev is None:
        return b"", b""
    out: list[bytes] = []
    err: list[bytes] = []
    node: _Cons = rev
    while node is not None:
        (out if node[0] == "stdout" else err).append(node[1])
        node = node[3]
    out.reverse()
    err.reverse()
    return b"".join(out), b"".join(err)


def _measured(s: Stream) -> dict[str, Any]:
    """The receipt keys the stream measures itself (they win over the host's)."""
    return _measure(s.stdout_bytes, s.stderr_bytes, s.dropped_bytes, s.truncated, s.capped_by, s._rev)


def _measure(out_n: int, err_n: int, dropped: int, truncated: bool, capped: str | None, rev: _Cons) -> dict[str, Any]:
    out, err = _kept_both(rev)
    return _measure_kept(out, err, out_n, err_n, dropped, truncated, capped)


def _measure_kept(
    out: bytes, err: bytes, out_n: int, err_n: int, dropped: int, truncated: bool, capped: str | None
) -> dict[str, Any]:
    measured: dict[str, Any] = {
        "kuro/stdout": out,
        "kuro/stderr": err,
        "kuro/stdout-cid": _cid_of_kept(out),
        "kuro/stderr-cid": _cid_of_kept(err),
        "kuro/stdout-bytes": out_n,
        "kuro/stderr-bytes": err_n,
    }
    if truncated:
        measured["kuro/truncated?"] = True
        measured["kuro/dropped-bytes"] = dropped
        if capped is not None:
            measured["kuro/capped-by"] = capped
    return measured


def _finish(
    s: Stream, sess: Session | None, command: Mapping[str, Any] | None, result: Mapping[str, Any]
) -> dict[str, Any]:
    """finish without the state check; shared with :func:`kuro_wasm.model.checkpoint.abandon` (orphans)."""
    sess = sess if sess is not None else s.session
    command = command if command is not None else s.command
    if sess is None or command is None:
        raise ModelError(
            "finish needs the run's session and command (pass them or give them to new())", reason="invalid-stream"
        )
    host = namespace(result)
    host.pop("kuro/truncated?", None)
    host.pop("kuro/dropped-bytes", None)
    host.pop("kuro/capped-by", None)
    # The stream's own measurements are handed over as measured (not re-checked); the host's keys are checked.
    return receipt_measured(sess, command, host, _measured(s))


@overload
def finish(s: Stream, result: Mapping[str, Any], /) -> dict[str, Any]: ...


@overload
def finish(
    s: Stream, session: Session | None, command: Mapping[str, Any] | None, result: Mapping[str, Any], /
) -> dict[str, Any]: ...


def finish(s: Stream, *args: Any) -> dict[str, Any]:
    """The receipt of the run, built with :func:`kuro_wasm.model.receipt.receipt`.

    Called as ``finish(stream, result)`` (the session and command given to
    :func:`new`) or ``finish(stream, session, command, result)`` (``None`` for
    either falls back to the stream's own).

    The stream's measurements win over ``result``: ``kuro/stdout``/``stderr``
    (kept bytes), ``stdout-cid``/``stderr-cid`` (raw CIDs of the kept bytes),
    ``stdout-bytes``/``stderr-bytes``, and — only when truncated —
    ``truncated?`` True and ``dropped-bytes``; an untruncated stream's receipt
    has neither key, whatever the host says. The state is unchanged: call
    :func:`mark_exited` after.

    Raises StreamClosed: if ``s`` is not running. Raises ModelError: as
    :func:`~kuro_wasm.model.receipt.receipt` does, or when no session/command is known.
    Raises TypeError: for any other number of arguments.
    """
    if len(args) == 1:
        session, command, result = None, None, args[0]
    elif len(args) == 3:
        session, command, result = args
    else:
        raise TypeError(f"finish takes (stream, result) or (stream, session, command, result); got {1 + len(args)}")
    if s.state != "running":
        raise StreamClosed(f"stream already finished (state {s.state})", state=s.state)
    return _finish(s, session, command, result)


def finish_trusted(s: Stream, sess: Session, command: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`finish` for the host's own run: ``result``'s values are taken as given, not checked again.

    The caller vouches that ``session``/``command`` already passed the model's gate
    (:func:`kuro_wasm.model.sessions.denial`) and that every value in ``result`` has its
    key's declared kind (it built them itself, as :class:`kuro_wasm.host.job.Job` does);
    the exit-code/outcome rules, the closed key set, ``None`` dropping and the stream's own
    measurements are applied exactly as :func:`finish` applies them, and for such results
    the receipt is equal to :func:`finish`'s (property-tested). Checking a dozen host values
    per run cost a fifth of a warm trivial invocation.

    ``s`` may already be the ``exited`` value of the run's writer.

    Raises StreamClosed: for an ``orphaned`` stream. Raises ModelError: a bad exit code or outcome.
    """
    if s.state not in ("running", "exited"):
        raise StreamClosed(f"stream already finished (state {s.state})", state=s.state)
    return _trusted(sess, command, result, _measured(s))


def _trusted(
    sess: Session, command: Mapping[str, Any], result: Mapping[str, Any], measured: dict[str, Any]
) -> dict[str, Any]:
    return _trusted_host(sess, command, namespace(result), measured)


def _trusted_host(
    sess: Session, command: Mapping[str, Any], host: dict[str, Any], measured: dict[str, Any]
) -> dict[str, Any]:
    host.pop("kuro/truncated?", None)
    host.pop("kuro/dropped-bytes", None)
    host.pop("kuro/capped-by", None)
    host.update(measured)  # the stream's keys: host keys, as namespace() left every other
    return receipt_closed(sess, command, host)
