"""Frames between the host and its worker processes: plain data, length-prefixed, checked against one table.

## The one decision
A frame is ``u32 length ‖ u32 json-length ‖ JSON object ‖ payload bytes`` (big-endian), and nothing else
crosses: no pickle, no code, nothing a worker could use to make the host run anything. The JSON object
carries the structure; the one byte payload a message may have (a stdout chunk, stdin, a block) rides
raw after it, never base64. JSON and not the dag-cbor of :mod:`kuro_fs.dagcbor`: the standard
library's JSON is C code, ~5 µs to encode and decode a run request against ~30 µs each way for the
pure-Python canonical codec (measured here), and every run crosses the boundary at least twice on its
warm path, whose budget is 200 µs. Frames need no canonical form, only plain data.

A ``run`` frame's payload starts with the JSON object of the run's fixed fields (:data:`RUN_FIXED`: session,
limits, command, fs, seed), its stdin after it: the same bytes for every warm run of one caller, so a worker
decodes and checks them once and knows them again by their bytes (~10 µs a warm run, measured here); what
changes from run to run (its id, deadline and flags) is the frame's own small JSON part.

Every message is a row of :data:`MESSAGES` (who sends it, its fields and their types, whether it has
a payload). :func:`decode` refuses anything else with :class:`ProtocolError` — an unknown type, a missing
or extra field, a field of the wrong type, NaN or ±Infinity, nesting deep enough to exhaust the parser,
a frame or payload above its size limit (checked *before* the bytes are read, so a hostile length
allocates nothing) — and the host answers a protocol error by killing the worker.

A run's receipt rides as the ``done`` frame's payload (its JSON, then a component's ``kuro/result`` as
DAG-JSON text, not escaped again inside it), so it crosses whatever its size within
:func:`receipt_limit`, a bound the host derives from the run's own limits before it reads a byte:
:data:`RECEIPT_BASE_BYTES` (64 MiB: everything but the result — ~1 M distinct ``kuro/reads`` at 62
bytes a CID, the ≤ 256 denials and ≤ 64 store faults) plus :data:`RESULT_JSON_PER_BYTE` (64) bytes of
DAG-JSON per byte of ``max_value_bytes`` as :meth:`~kuro_wasm.model.limits.Limits.value_bound` counts it
(the worst nameless WIT value, an empty ``list<u8>`` in a list, is 20 bytes of DAG-JSON per counted byte;
only long field, case or flag names over values of little or no size go past 64). At the default 4 MiB
that is 320 MiB, the size of what an in-process host already holds for one call's value (~80 × the
bound). A worker whose receipt is over it (or cannot be encoded) sends a ``host-error`` receipt saying
why instead: a run that ran always ends in a receipt. The decoded values
are only ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None`` and ``bytes``; what they
*mean* (a session, a receipt) is checked again by the model when the host uses them.

## Effects
Reads from a buffered binary file over a socket; writes with ``sendall`` under the caller's lock.

## Not done here
No versioning between hosts and workers of different builds: a pool only ever talks to workers it
forked from its own zygote, started from the same installed code.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kuro_fs import dagcbor
from kuro_wasm.errors import HostError
from kuro_wasm.model.limits import Limits

__all__ = [
    "CONTROL",
    "MAX_ARTIFACT_BYTES",
    "MAX_BLOCK_BYTES",
    "MAX_JSON_BYTES",
    "MESSAGES",
    "RECEIPT_BASE_BYTES",
    "RESULT_JSON_PER_BYTE",
    "RUN_FIXED",
    "command_data",
    "command_of",
    "Message",
    "ProtocolError",
    "Readable",
    "decode",
    "decode_fixed",
    "decode_receipt",
    "done_receipt",
    "encode",
    "encode_fields",
    "encode_receipt",
    "frame",
    "framed",
    "read_frame",
    "receipt_limit",
    "send",
]

#: The largest JSON part of a frame (a result with 256 denials of 4096-byte paths fits with room).
MAX_JSON_BYTES: Final = 4 << 20
#: The largest block a worker may hand back or ask for (kuro.fs leaves are 256 KiB; directories are one block).
MAX_BLOCK_BYTES: Final = 64 << 20
#: The largest compiled guest (shape ‖ artifact) the host sends a worker; a larger one the worker compiles itself,
#: in memory (a frame's length is 32 bits; a worker refuses any host payload past this).
MAX_ARTIFACT_BYTES: Final = 1 << 30
#: What a ``done`` payload may hold besides a component's ``kuro/result`` (reads, denials, faults, the rest).
RECEIPT_BASE_BYTES: Final = 64 << 20
#: Bytes of ``kuro/result`` DAG-JSON a ``done`` payload may hold per byte of the run's value bound.
RESULT_JSON_PER_BYTE: Final = 64
_HEAD: Final = struct.Struct(">II")
_COUNTS: Final = ("kuro/stdout-bytes", "kuro/stderr-bytes")
#: The most payload one frame can carry (its total length is a u32 that counts the JSON part too).
_MAX_PAYLOAD: Final = (1 << 32) - 1 - 4 - MAX_JSON_BYTES
_SMALL_PAYLOAD: Final = 64 << 10


class ProtocolError(HostError):
    """A frame that is not one of :data:`MESSAGES` (or breaks its limits); the peer is not trusted again."""

    reference = "worker-protocol"


@dataclass(frozen=True, slots=True)
class Message:
    """One message type: who sends it (``host``/``worker``/``zygote``), its fields → type, its payload."""

    sender: str
    fields: Mapping[str, str]
    payload: bool = False


#: Every message of the protocol. Field types: int, num, str, bool, data (any JSON value), str? (str or null).
MESSAGES: Final[Mapping[str, Message]] = {
    # host → worker
    # payload = the JSON object of the run's :data:`RUN_FIXED` fields (its first ``fixed`` bytes) ‖ stdin
    "run": Message(
        "host",
        {
            "id": "int",
            "deadline": "num",
            "stdin_closed": "bool",
            "guest_present": "bool",
            "killed": "bool",
            "store_path": "str?",
            "fixed": "int",
        },
        payload=True,
    ),
    "stdin": Message("host", {"id": "int"}, payload=True),
    "eof": Message("host", {"id": "int"}),
    "kill": Message("host", {"id": "int"}),
    "withdraw": Message("host", {"id": "int"}),
    # fault: why the host's store could not answer (None: it answered; "corrupt", "missing", "unavailable")
    "reply": Message("host", {"rid": "int", "found": "bool", "fault": "str?"}, payload=True),
    # the compiled guest a worker asked for: payload = meta (its first ``meta`` bytes) ‖ artifact; kind None: none.
    # ``parts`` ([[name, length], …], or empty): the artifact is instead the core modules the guest is linked from
    # (serialized, one after another, of those lengths), each for the module cache under ``CID#name``
    "compiled": Message("host", {"rid": "int", "kind": "str?", "meta": "int", "parts": "data"}, payload=True),
    "probe": Message("host", {"what": "str"}),
    # worker → host
    "hello": Message("worker", {"pid": "int", "hardening": "data", "engine": "str", "stores": "data"}),
    "unfit": Message("worker", {"error": "str"}),  # instead of hello: the worker could not harden itself
    "chunk": Message("worker", {"id": "int", "stream": "str"}, payload=True),
    # how many stdin bytes the run's guest has read so far, in all (the host's stdin writer waits on it)
    "took": Message("worker", {"id": "int", "n": "int"}),
    "get": Message("worker", {"id": "int", "rid": "int", "cid": "str"}),
    "has": Message("worker", {"id": "int", "rid": "int", "cid": "str"}),
    "module": Message("worker", {"id": "int", "rid": "int", "cid": "str", "fuel": "bool"}),
    "put": Message("worker", {"id": "int", "cid": "str"}, payload=True),
    # payload = the receipt's JSON (its first ``receipt`` bytes) ‖ its kuro/result as DAG-JSON text (if any)
    "done": Message("worker", {"id": "int", "receipt": "int", "stream": "data", "cpu": "num"}, payload=True),
    "failed": Message("worker", {"id": "int", "error": "str"}),
    "withdrawn": Message("worker", {"id": "int", "ok": "bool"}),
    "probed": Message("worker", {"what": "str", "result": "data"}),
    # host → zygote, zygote → host (one message per SOCK_SEQPACKET packet; a fork carries the worker's socket)
    "fork": Message("host", {"options": "data"}),
    "exited": Message("zygote", {"pid": "int", "status": "int"}),
}

#: A run's fields that stay the same wherever and whenever it is sent, and from one warm run of a caller to the next
#: (all ``data``, checked by the worker's model): one JSON object at the start of its ``run`` frame's payload, so a
#: worker knows a fixed part it has decoded before by its bytes (:func:`decode_fixed`), without decoding it again.
RUN_FIXED: Final = frozenset({"session", "limits", "command", "fs", "seed"})

#: The host's messages that travel on a worker's control channel; its other messages (``run``, ``reply``,
#: ``compiled``) travel on the run channel, with every worker message. The two are not ordered with each other.
CONTROL: Final = frozenset({"stdin", "eof", "kill", "withdraw", "probe"})

_CHECKS: Final[Mapping[str, Callable[[object], bool]]] = {
    "int": lambda v: type(v) is int,
    "num": lambda v: type(v) in (int, float),
    "str": lambda v: type(v) is str,
    "bool": lambda v: type(v) is bool,
    "data": lambda v: True,
    "str?": lambda v: v is None or type(v) is str,
}


#: Each row of :data:`MESSAGES` as :func:`decode` checks it, made once: its field names, the check of each
#: field that has one (``data`` has none), and its ``num`` fields (which must be finite).
_ROWS: Final[
    Mapping[str, tuple[frozenset[str], tuple[tuple[str, Callable[[object], bool], str], ...], tuple[str, ...]]]
] = {
    kind: (
        frozenset(spec.fields),
        tuple((name, _CHECKS[t], t) for name, t in spec.fields.items() if t != "data"),
        tuple(name for name, t in spec.fields.items() if t == "num"),
    )
    for kind, spec in MESSAGES.items()
}


#: Each row as :func:`decode`'s accepting path checks it, made once: its sender, its field names with ``"t"``, the
#: types each typed field may have (``type(v) in types``: no call per field), and its ``num`` fields. A frame that
#: fails a check is looked at again by :func:`_check_fields`, which says why.
_ACCEPT: Final[Mapping[str, tuple[str, frozenset[str], tuple[tuple[str, tuple[type, ...]], ...], tuple[str, ...]]]] = {
    kind: (
        spec.sender,
        frozenset(spec.fields) | {"t"},
        tuple(
            (name, {"int": (int,), "num": (int, float), "str": (str,), "bool": (bool,), "str?": (str, type(None))}[t])
            for name, t in spec.fields.items()
            if t != "data"
        ),
        tuple(name for name, t in spec.fields.items() if t == "num"),
    )
    for kind, spec in MESSAGES.items()
}


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not plain data")


# One encoder and one decoder for every frame: ``json.dumps``/``json.loads`` with options build a new one per call.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_DECODER: Final = json.JSONDecoder(parse_constant=_no_constants)
#: The C encoder and scanner behind those two, called directly: ``JSONEncoder.encode`` builds a C encoder per call
#: and ``JSONDecoder.decode`` runs two Python frames and two regex matches around the C scanner (~2.5 µs and
#: ~4.5 µs of a small frame each way, a few times a run, measured here). Without ``_json`` (another Python), the
#: two objects above. No circular-reference markers: a marker table would be shared by every thread encoding at
#: once (a frame's values come from this process's own code; a cycle ends in RecursionError, refused as such).
_MAKE_ENCODER: Final[Any] = vars(json.encoder).get("c_make_encoder")
_C_ENCODER: Final[Any] = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        None, _ENCODER.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False
    )  # (markers, default, encoder, indent, key separator, item separator, sort_keys, skipkeys, allow_nan)
)
_SCAN: Final[Any] = vars(_DECODER)["scan_once"]


def _dumps(value: Any) -> bytes:
    """``value`` as compact ASCII JSON, as ``_ENCODER.encode`` writes it: a dict key that is an int, float, bool
    or None becomes a string (``"2"``, ``"1.5"``, ``"true"``, ``"null"``), as json's encoder makes it. Raises
    TypeError (a value, or a key, of any other type), ValueError (NaN or ±Infinity, as a value or a key),
    RecursionError (a cycle)."""
    if _C_ENCODER is None:  # pragma: no cover - CPython has _json
        return _ENCODER.encode(value).encode("ascii")
    return "".join(_C_ENCODER(value, 0)).encode("ascii")


def _loads(text: str) -> Any:
    """The JSON value that is all of ``text``, as ``_DECODER.decode`` reads it: the scanner alone when it reads it
    whole, else the full decoder (whitespace around the value, or anything wrong, which it then says).
    Raises ValueError, RecursionError."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        return _DECODER.decode(text)
    return value


def encode_fields(kind: str, fields: Mapping[str, Any]) -> bytes:
    """The JSON object of some of a ``kind`` message's fields, encoded ahead of :func:`frame` (which joins it to the
    rest): a run's session, command, fs and limits are encoded once when it is submitted, however often and to
    whichever worker it is then sent.

    Raises ProtocolError: a value JSON cannot carry (NaN, ±Infinity, a key not a str, int, float, bool or None),
    or more JSON than a frame holds.
    """
    try:
        body = _dumps(fields)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"{kind}: not plain data: {exc}") from exc
    if len(body) > MAX_JSON_BYTES:
        raise ProtocolError(f"{kind}: {len(body)} bytes of JSON is over the {MAX_JSON_BYTES}-byte limit")
    return body


def frame(
    kind: str, fields: Mapping[str, Any], payload: bytes | bytearray | memoryview = b"", encoded: bytes = b"{}"
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """Message ``kind`` as the bytes to write: ``(header ‖ JSON [‖ payload], large payload or b"")``.

    ``encoded`` is the rest of its fields, made by :func:`encode_fields` (no name in both). A payload of up to
    64 KiB rides in the first part, so a frame is one write; a larger one is written after it, not copied.
    The sender's fields are its own: they are checked against the row by the *receiver* (:func:`decode`), not
    here, which keeps a run's warm path short.

    Raises ProtocolError: ``kind`` unknown, a payload where none belongs, or a value JSON cannot
    carry (NaN, ±Infinity, a key not a str, int, float, bool or None), or more JSON than a frame holds.
    """
    spec = MESSAGES.get(kind)
    if spec is None:
        raise ProtocolError(f"unknown message type {kind!r}")
    if payload and not spec.payload:
        raise ProtocolError(f"a {kind} message has no payload")
    try:
        body = _dumps({"t": kind, **fields})
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"{kind}: not plain data: {exc}") from exc
    if len(encoded) > 2:  # not ``{}``: ``{…ours`` + ``,`` + ``theirs…}``
        body = body[:-1] + b"," + encoded[1:]
    return framed(kind, body, payload)


def framed(
    kind: str, body: bytes, payload: bytes | bytearray | memoryview = b""
) -> tuple[bytes, bytes | bytearray | memoryview]:
    """:func:`frame`'s parts for a message whose whole JSON object (``"t"`` included) the caller encoded itself —
    the pool's ``run`` frames, from values it made (the worker checks the fields, as every receiver does).

    Raises ProtocolError: more JSON than a frame holds.
    """
    if len(body) > MAX_JSON_BYTES:
        raise ProtocolError(f"{kind}: {len(body)} bytes of JSON is over the {MAX_JSON_BYTES}-byte limit")
    head = _HEAD.pack(4 + len(body) + len(payload), len(body))
    if len(payload) <= _SMALL_PAYLOAD:
        return head + body + bytes(payload), b""
    return head + body, payload


def encode(kind: str, fields: Mapping[str, Any], payload: bytes | bytearray | memoryview = b"") -> bytes:
    """The frame of message ``kind`` (header and JSON; the payload is appended when small): :func:`frame`'s first
    part. Raises ProtocolError as :func:`frame`."""
    return frame(kind, fields, payload)[0]


def send(
    sock: socket.socket, kind: str, fields: Mapping[str, Any], payload: bytes | bytearray | memoryview = b""
) -> None:
    """Write one frame to ``sock`` (the caller holds the socket's send lock). Raises OSError, ProtocolError."""
    first, rest = frame(kind, fields, payload)
    sock.sendall(first)
    if rest:
        sock.sendall(rest)


def _check_fields(kind: str, fields: Mapping[str, Any]) -> None:
    names, checks, _ = _ROWS[kind]
    if fields.keys() != names:
        missing = sorted(names - set(fields))
        extra = sorted(set(fields) - names)
        raise ProtocolError(f"{kind}: fields missing {missing}, unexpected {extra}")
    for name, check, type_name in checks:
        if not check(fields[name]):
            raise ProtocolError(f"{kind}.{name} must be {type_name}, got {type(fields[name]).__name__}")


def decode(body: bytes, senders: frozenset[str]) -> dict[str, Any]:
    """The message in a frame's JSON part, checked against its row; its sender must be in ``senders``.

    Raises ProtocolError: not a JSON object, not UTF-8, NaN/±Infinity, nested too deep, an unknown type,
    a type this side does not accept, or fields that are not exactly its row's, of its row's types.
    """
    try:
        value = _loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ProtocolError(f"a frame that is not JSON: {exc}") from exc
    if type(value) is not dict:
        raise ProtocolError(f"a frame is a JSON object, got {type(value).__name__}")
    kind = value.get("t")
    row = _ACCEPT.get(kind) if type(kind) is str else None
    if row is None or row[0] not in senders:
        raise ProtocolError(f"unexpected message type {kind!r}")
    if value.keys() != row[1]:
        _check_fields(str(kind), {k: v for k, v in value.items() if k != "t"})  # raises: says which fields
        raise ProtocolError(f"{kind}: fields missing or unexpected")  # pragma: no cover - _check_fields raised
    for name, types in row[2]:
        if type(value[name]) not in types:
            _check_fields(str(kind), {k: v for k, v in value.items() if k != "t"})  # raises: says which, and how
            raise ProtocolError(f"{kind}.{name}: a field of the wrong type")  # pragma: no cover - _check_fields raised
    for name in row[3]:
        if not math.isfinite(value[name]):
            raise ProtocolError(f"{kind}.{name} must be finite")
    return value


def decode_fixed(data: bytes) -> dict[str, Any]:
    """The :data:`RUN_FIXED` fields a ``run`` frame's payload starts with (``data``: those bytes).

    Raises ProtocolError: more than :data:`MAX_JSON_BYTES`, not a JSON object (not UTF-8, NaN/±Infinity, nested too
    deep), or one whose keys are not exactly :data:`RUN_FIXED`.
    """
    if len(data) > MAX_JSON_BYTES:
        raise ProtocolError(f"run: {len(data)} bytes of fixed fields is over the {MAX_JSON_BYTES}-byte limit")
    try:
        value = _loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"run: fixed fields that are not JSON: {exc}") from exc
    if type(value) is not dict or value.keys() != RUN_FIXED:
        got = sorted(value) if type(value) is dict else type(value).__name__
        raise ProtocolError(f"run: the fixed fields must be exactly {sorted(RUN_FIXED)}, got {got}")
    return value


def command_data(command: Mapping[str, Any]) -> Any:
    """A ``run`` frame's ``command`` field: the command itself, or — when it holds bytes, which JSON cannot
    carry (a component's ``list<u8>`` args) — ``["dag-cbor", base64 of its dag-cbor]`` (a command is a map,
    so the list is never one). Exact both ways (:func:`command_of`); a command without bytes pays one walk."""
    stack: list[Any] = list(command.values())
    while stack:
        item = stack.pop()
        if type(item) is bytes:
            return ["dag-cbor", base64.b64encode(dagcbor.encode(dict(command))).decode("ascii")]
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return command


def command_of(data: Any) -> Any:
    """The command a ``run`` frame's ``command`` field carries (:func:`command_data`).

    Raises ProtocolError: a ``dag-cbor`` form that is not base64 of dag-cbor.
    """
    if type(data) is not list:
        return data
    if len(data) != 2 or data[0] != "dag-cbor" or type(data[1]) is not str:
        raise ProtocolError("run: a command is a map, or ['dag-cbor', base64]")
    try:
        return dagcbor.decode(base64.b64decode(data[1], validate=True))
    except ValueError as exc:  # binascii.Error and DagCborError are ValueErrors
        raise ProtocolError(f"run: a command that is not base64 dag-cbor: {exc}") from exc


@functools.lru_cache(maxsize=64)  # a run's limits decide it (frozen): asked on both sides of every run
def receipt_limit(limits: Limits) -> int:
    """The largest ``done`` payload (a run's receipt) the host reads for a run of ``limits`` (module docstring)."""
    return min(_MAX_PAYLOAD, RECEIPT_BASE_BYTES + RESULT_JSON_PER_BYTE * limits.value_bound())


def encode_receipt(receipt: Mapping[str, Any], limit: int) -> tuple[int, bytes]:
    """A ``done`` frame's ``receipt`` field and payload for ``receipt`` (whose ``kuro/result``, if any, is DAG-JSON
    text). Raises ProtocolError: a value JSON cannot carry, or a payload over ``limit`` bytes."""
    result = receipt.get("kuro/result")
    rest = {k: v for k, v in receipt.items() if k != "kuro/result"} if type(result) is str else receipt
    try:
        head = _dumps(rest)
        tail = result.encode("utf-8") if type(result) is str else b""
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"done: the receipt is not plain data: {exc}") from exc
    if len(head) + len(tail) > limit:
        raise ProtocolError(f"done: a {len(head) + len(tail)}-byte receipt is over its run's {limit}-byte limit")
    return len(head), head + tail


def done_receipt(receipt: Mapping[str, Any], limit: int) -> tuple[int, bytes]:
    """:func:`encode_receipt`, or, when ``receipt`` cannot cross (over ``limit``, not plain data), a ``host-error``
    receipt saying why (the host's transport failed, not the guest), keeping the output counts the host checks."""
    try:
        return encode_receipt(receipt, limit)
    except ProtocolError as exc:
        kept = {k: receipt[k] for k in _COUNTS if type(receipt.get(k)) is int}
        why = f"host error: the worker could not send the run's receipt: {exc}"
        return encode_receipt({**kept, "kuro/exit-code": 70, "kuro/outcome": "host-error", "kuro/error": why}, limit)


def decode_receipt(length: int, payload: bytes) -> Any:
    """The receipt a ``done`` frame carries (``kuro/result`` as DAG-JSON text; the model checks the values).

    Raises ProtocolError: ``length`` outside the payload, or a part that is not JSON / UTF-8.
    """
    if not 0 <= length <= len(payload):
        raise ProtocolError(f"done: a {length}-byte receipt in a {len(payload)}-byte payload")
    try:
        receipt = _loads(payload[:length].decode("utf-8"))
        result = payload[length:].decode("utf-8") if length < len(payload) else None
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"done: a receipt that is not JSON: {exc}") from exc
    if result is not None:
        if type(receipt) is not dict or "kuro/result" in receipt:
            raise ProtocolError("done: a kuro/result after a receipt that is not a map or has one already")
        receipt["kuro/result"] = result
    return receipt


class Readable(Protocol):
    """What frames are read from: a buffered binary file over a socket (``socket.makefile("rb")``)."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes; fewer only at the end of the stream."""
        ...


def read_frame(
    stream: Readable, senders: frozenset[str], payload_limit: Callable[[dict[str, Any]], int]
) -> tuple[dict[str, Any], bytes] | None:
    """The next ``(message, payload)`` from ``stream``, or None at a clean end of stream (between frames).

    ``payload_limit(message)`` is the largest payload this side accepts for that message (0: none); it
    is asked after the JSON part is checked and before a payload byte is read.

    Raises ProtocolError: a frame cut short, a length over a limit, or a message :func:`decode` refuses.
    Raises OSError: the socket failed.
    """
    head = stream.read(_HEAD.size)
    if not head:
        return None
    if len(head) < _HEAD.size:
        raise ProtocolError("the stream ended inside a frame header")
    total, json_len = _HEAD.unpack(head)
    if json_len > MAX_JSON_BYTES or total < 4 + json_len:
        raise ProtocolError(f"frame lengths {total}/{json_len} break the limits")
    body = stream.read(json_len)
    if len(body) < json_len:
        raise ProtocolError("the stream ended inside a frame")
    message = decode(body, senders)
    size = total - 4 - json_len
    if size and not MESSAGES[message["t"]].payload:
        raise ProtocolError(f"a {message['t']} message carries no payload, got {size} bytes")
    if size > payload_limit(message):
        raise ProtocolError(f"a {size}-byte {message['t']} payload is over its limit")
    payload = stream.read(size) if size else b""
    if len(payload) < size:
        raise ProtocolError("the stream ended inside a payload")
    return message, payload
