"""Canonical dag-cbor (codec 0x71): the one place that turns kuro values into CBOR bytes.

## The one decision
Every dag-cbor block kuro mints (directories, receipts, CAR headers, digests of
arguments) goes through :func:`encode`, so the canonical rules live here once:
definite lengths, shortest integers and lengths, string keys only, sorted
length-first then bytewise on their UTF-8, 64-bit floats only (``fb``), no
NaN/±Inf, only the simple values null/true/false, integers in −2^64 … 2^64−1,
links as tag 42 over ``0x00 ‖ binary CID`` (checked against kuro's CID profile).
That is the ``@ipld/dag-cbor`` (JavaScript) encoding on every published vector
*except one*: a whole-valued float (``1.0``) is ``fb 3ff0…`` in Python and ``01``
in JavaScript. Two encodings of one value would mean two CIDs for one receipt,
so :func:`encode` **refuses integral floats** JavaScript would write as integers
— those within its safe-integer range, |x| ≤ 2^53−1 (``DagCborError``); kuro's
own data model normalises them to ints before they get here. A whole float past
that range (``2.0**60``, ``1e300``) is a float in JavaScript too (``fb``), and is
written as one. :func:`decode` still
*accepts* a 64-bit integral float (other implementations write them) and
returns it as a float.

The codec is written out here rather than taken from the ``dag-cbor`` package:
that package routes every link through ``multiformats.CID`` and a runtime type
checker (~300 µs per link to decode), and kuro.fs directories are maps of
links read on every ``ls``/``read``/``write``. The package stays the reference
implementation in the differential tests. Both directions are iterative, with
nesting capped at :data:`MAX_DEPTH`, so hostile input cannot raise
``RecursionError``; declared lengths are checked against the bytes actually
present before anything is allocated.

Links are :class:`Link` values holding a CID string, so plain data can carry a
link without importing ``multiformats``.

## Pure
No I/O. Two bounded memos (map-key encodings, binary CID → :class:`Link`) are
caches of pure functions over immutable values; they change no result.

## Not done here
No decoding leniency: non-canonical input (unsorted or duplicate keys,
non-minimal heads, indefinite lengths, float16/32, other tags, undefined,
NaN/±Inf, trailing bytes) is rejected with :class:`DagCborError`.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from kuro_fs.cid import cid_bytes, cid_for, cid_from_bytes, parse
from kuro_fs.errors import DagCborError, InvalidCID

__all__ = ["JS_SAFE_INTEGER", "MAX_DEPTH", "Link", "cid_of", "decode", "encode", "js_number", "links"]

#: Deepest nesting of arrays/maps either direction accepts (far beyond any kuro structure).
MAX_DEPTH: Final = 256

_U64_LIMIT: Final = 1 << 64
_TAG_LINK: Final = 42
_FLOAT64 = struct.Struct(">Bd")
#: The largest integer JavaScript numbers hold exactly; @ipld/dag-cbor writes a whole number past it as a float.
JS_SAFE_INTEGER: Final = 2**53 - 1


def js_number(value: float) -> int | float:
    """``value`` as JavaScript's dag-cbor would write it: an int if whole and within ±(2^53−1), else the float.

    >>> js_number(2.0), js_number(2.5), js_number(1e300)
    (2, 2.5, 1e+300)
    """
    return int(value) if _js_writes_an_int(value) else value


def _js_writes_an_int(value: float) -> bool:
    return value.is_integer() and -JS_SAFE_INTEGER <= value <= JS_SAFE_INTEGER


_HEAD16 = struct.Struct(">BH")
_HEAD32 = struct.Struct(">BI")
_HEAD64 = struct.Struct(">BQ")


@dataclass(frozen=True, slots=True)
class Link:
    """A dag-cbor link (tag 42) to the block named by ``cid`` (a CID string)."""

    cid: str

    def __post_init__(self) -> None:
        parse(self.cid)  # raises InvalidCID on a bad name

    def to_data(self) -> dict[str, str]:
        """JSON form of a link, as the IPLD DAG-JSON convention writes it."""
        return {"/": self.cid}


# ---- encode


def _head(out: bytearray, major: int, arg: int) -> None:
    """Append the shortest head for ``major`` with argument ``0 ≤ arg < 2^64``."""
    top = major << 5
    if arg < 24:
        out.append(top | arg)
    elif arg < 0x100:
        out.append(top | 24)
        out.append(arg)
    elif arg < 0x10000:
        out += _HEAD16.pack(top | 25, arg)
    elif arg < 0x100000000:
        out += _HEAD32.pack(top | 26, arg)
    else:
        out += _HEAD64.pack(top | 27, arg)


class _Raw(bytes):
    """Already encoded bytes on the encoder's work stack (a map key)."""


# A path node is (parent node, key of this container in its parent, depth); built only for containers.
_Path: TypeAlias = tuple[Any, Any, int] | None


def _where(node: _Path, key: Any = None) -> str:
    parts: list[str] = [] if key is None else [str(key)]
    while node is not None:
        node, name, _ = node
        if name is not None:
            parts.append(str(name))
    return "/" + "/".join(reversed(parts))


def _utf8(text: str, node: _Path, key: Any) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DagCborError(f"cannot encode a string that is not valid Unicode at {_where(node, key)}: {exc}") from exc


def encode(value: Any) -> bytes:
    """Canonical dag-cbor bytes for ``value``.

    Accepts None, bool, int (−2^64 … 2^64−1), a finite float that is not a whole number JavaScript would write as
    an integer (|x| ≤ 2^53−1), str,
    bytes/bytearray/memoryview, list/tuple, dict with str keys, and :class:`Link`.

    >>> encode({"hello": "world"}).hex()
    'a16568656c6c6f65776f726c64'

    Raises DagCborError: for anything outside that set, NaN/±Inf, integral
    floats, integers out of range, or nesting deeper than :data:`MAX_DEPTH`.
    """
    out = bytearray()
    # Work items: (value, node of the enclosing container, key/index in it).
    stack: list[tuple[Any, _Path, Any]] = [(value, None, None)]
    push = stack.append
    pop = stack.pop
    while stack:
        item, node, key = pop()
        kind = type(item)
        if kind is _Raw:
            out += item
        elif kind is str:
            data = _utf8(item, node, key)
            _head(out, 3, len(data))
            out += data
        elif kind is int:
            if item >= 0:
                if item >= _U64_LIMIT:
                    raise DagCborError(f"integer {item} at {_where(node, key)} is above 2^64-1")
                _head(out, 0, item)
            else:
                if item < -_U64_LIMIT:
                    raise DagCborError(f"integer {item} at {_where(node, key)} is below -2^64")
                _head(out, 1, -1 - item)
        elif kind is Link:
            binary = cid_bytes(item.cid)
            out += b"\xd8\x2a"  # tag 42
            _head(out, 2, len(binary) + 1)
            out.append(0)
            out += binary
        elif kind is dict or kind is list or kind is tuple:
            depth = 1 if node is None else node[2] + 1
            if depth > MAX_DEPTH:
                raise DagCborError(f"nesting deeper than {MAX_DEPTH} at {_where(node, key)}")
            child: _Path = (node, key, depth)
            if kind is dict:
                _encode_map(out, item, child, push)
            else:
                _head(out, 4, len(item))
                for index in range(len(item) - 1, -1, -1):
                    push((item[index], child, index))
        elif item is None:
            out.append(0xF6)
        elif item is True:
            out.append(0xF5)
        elif item is False:
            out.append(0xF4)
        elif kind is float:
            if math.isnan(item) or math.isinf(item):
                raise DagCborError(f"dag-cbor forbids NaN and infinities (at {_where(node, key)})")
            if _js_writes_an_int(item):
                raise DagCborError(
                    f"integral float {item!r} at {_where(node, key)}: it encodes differently in Python and "
                    "JavaScript dag-cbor; pass an int instead"
                )
            out += _FLOAT64.pack(0xFB, item)
        elif kind is bytes or kind is bytearray or kind is memoryview:
            data = bytes(item)
            _head(out, 2, len(data))
            out += data
        else:
            push((_normalise(item, node, key), node, key))
    return bytes(out)


def _normalise(item: Any, node: _Path, key: Any) -> Any:
    """A subclass of a supported type as its base type (an IntEnum as int, …); refuses the rest."""
    # The base types' own conversions, so an overridden __str__/__int__/__iter__ cannot change the bytes.
    if isinstance(item, int):
        return int.__int__(item)
    if isinstance(item, float):
        return float.__float__(item)
    if isinstance(item, str):
        return str.__str__(item)
    if isinstance(item, (bytes, bytearray)):
        return bytes(memoryview(item))
    if isinstance(item, (list, tuple)):
        return [item[index] for index in range(len(item))]
    if isinstance(item, dict):
        return {name: dict.__getitem__(item, name) for name in dict.keys(item)}
    if isinstance(item, Link):
        return Link(item.cid)
    raise DagCborError(f"cannot encode {type(item).__name__} as dag-cbor (at {_where(node, key)})")


@functools.lru_cache(maxsize=4096)
def _key(name: str) -> tuple[tuple[int, bytes], _Raw]:
    """A map key's sort key (UTF-8 length, UTF-8) and its encoding; memoised, keys repeat across maps."""
    data = name.encode("utf-8")
    head = bytearray()
    _head(head, 3, len(data))
    return (len(data), data), _Raw(head + data)


def _encode_map(out: bytearray, item: dict[Any, Any], node: _Path, push: Any) -> None:
    pairs = []
    for name, child in item.items():
        if type(name) is not str:
            if not isinstance(name, str):
                raise DagCborError(f"dag-cbor map keys must be strings, got {type(name).__name__} at {_where(node)}")
            name = str.__str__(name)
        try:
            order, raw = _key(name)
        except UnicodeEncodeError as exc:
            raise DagCborError(f"cannot encode a map key that is not valid Unicode at {_where(node, name)}") from exc
        pairs.append((order, raw, name, child))
    pairs.sort(key=lambda pair: pair[0])
    _head(out, 5, len(pairs))
    previous = None
    for order, raw, name, child in reversed(pairs):
        if order == previous:
            raise DagCborError(f"duplicate map key {name!r} at {_where(node)}")
        previous = order
        push((child, node, name))
        push((raw, None, None))


# ---- decode


class _Bad(Exception):
    """A decoding failure at an offset; turned into DagCborError (with the bytes shown) by :func:`decode`."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


def _argument(buf: bytes, pos: int, info: int, start: int) -> tuple[int, int]:
    """The argument of a head whose additional info is ``info`` (bytes from ``pos``), shortest form enforced."""
    if info < 24:
        return info, pos
    if info > 27:
        raise _Bad("indefinite length" if info == 31 else f"reserved additional info {info}", start)
    width = 1 << (info - 24)
    end = pos + width
    if end > len(buf):
        raise _Bad("truncated head", start)
    arg = int.from_bytes(buf[pos:end], "big")
    if arg < (24 if width == 1 else 1 << (4 * width)):
        raise _Bad(f"non-minimal head (argument {arg} in {width} bytes)", start)
    return arg, end


def _read_link(buf: bytes, pos: int, start: int) -> tuple[Link, int]:
    """Tag 42's content (from ``pos``): a byte string ``0x00 ‖ binary CID`` in kuro's profile."""
    n = len(buf)
    if pos >= n or buf[pos] >> 5 != 2:
        raise _Bad("tag 42 must wrap a byte string", start)
    size, pos = _argument(buf, pos + 1, buf[pos] & 31, pos)
    end = pos + size
    if end > n:
        raise _Bad(f"byte string of {size} bytes runs past the end", start)
    if size == 0 or buf[pos] != 0:
        raise _Bad("a link's bytes must start with the 0x00 multibase prefix", start)
    try:
        return _link(buf[pos + 1 : end]), end
    except InvalidCID as exc:
        raise _Bad(f"link outside kuro's CID profile: {exc}", start) from exc


@functools.lru_cache(maxsize=65536)
def _link(binary: bytes) -> Link:
    """The :class:`Link` for a binary CID, memoised: a directory is decoded again on every op through it,
    and the base32 spelling is most of a link's decoding cost. Invalid CIDs raise and are not cached."""
    return Link(cid_from_bytes(binary))


def _decode(buf: bytes) -> Any:
    n = len(buf)
    pos = 0
    # Open containers: [container, items still to read, pending map key, UTF-8 of the last map key].
    stack: list[list[Any]] = []
    while True:
        if stack and type(stack[-1][0]) is dict:
            # A map wants its next key: a text string strictly after the previous key, length-first.
            frame = stack[-1]
            start = pos
            if pos >= n:
                raise _Bad("truncated map", start)
            initial = buf[pos]
            if initial >> 5 != 3:
                raise _Bad("map keys must be text strings", start)
            size, pos = _argument(buf, pos + 1, initial & 31, start)
            end = pos + size
            if end > n:
                raise _Bad(f"text string of {size} bytes runs past the end", start)
            data = buf[pos:end]
            pos = end
            previous = frame[3]
            if previous is not None and (len(previous), previous) >= (size, data):
                why = "duplicate" if previous == data else "unsorted (length-first, then bytewise)"
                raise _Bad(f"{why} map key", start)
            frame[3] = data
            try:
                frame[2] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Bad(f"invalid UTF-8 in a map key: {exc.reason}", start) from exc
        start = pos
        if pos >= n:
            raise _Bad("empty input" if n == 0 else "truncated input", start)
        initial = buf[pos]
        major = initial >> 5
        pos += 1
        value: Any
        if major == 7:
            if initial == 0xF6:
                value = None
            elif initial == 0xF5:
                value = True
            elif initial == 0xF4:
                value = False
            elif initial == 0xFB:
                if pos + 8 > n:
                    raise _Bad("truncated float", start)
                value = _FLOAT64.unpack_from(buf, start)[1]
                pos += 8
                if math.isnan(value) or math.isinf(value):
                    raise _Bad("NaN and infinities are not dag-cbor", start)
            elif initial in (0xF9, 0xFA):
                raise _Bad("floats must be 64-bit", start)
            else:
                raise _Bad(f"simple value 0x{initial:02x} is not dag-cbor (only null, true, false)", start)
        else:
            arg, pos = _argument(buf, pos, initial & 31, start)
            if major == 0:
                value = arg
            elif major == 1:
                value = -1 - arg
            elif major == 2 or major == 3:
                end = pos + arg
                if end > n:
                    raise _Bad(f"string of {arg} bytes runs past the end", start)
                if major == 2:
                    value = buf[pos:end]
                else:
                    try:
                        value = buf[pos:end].decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise _Bad(f"invalid UTF-8 in a text string: {exc.reason}", start) from exc
                pos = end
            elif major == 6:
                if arg != _TAG_LINK:
                    raise _Bad(f"tag {arg} is not dag-cbor (only 42, links)", start)
                value, pos = _read_link(buf, pos, start)
            else:  # 4 array, 5 map
                if arg * (major - 3) > n - pos:  # every item takes at least one byte
                    raise _Bad(f"declared {arg} items but only {n - pos} bytes follow", start)
                if len(stack) >= MAX_DEPTH:
                    raise _Bad(f"nesting deeper than {MAX_DEPTH}", start)
                if arg:
                    stack.append([[] if major == 4 else {}, arg, None, None])
                    continue
                value = [] if major == 4 else {}
        # Hand the finished value to its container; close every container it completes.
        while stack:
            frame = stack[-1]
            container = frame[0]
            if type(container) is list:
                container.append(value)
            else:
                container[frame[2]] = value
            frame[1] -= 1
            if frame[1]:
                break
            stack.pop()
            value = container
        else:
            if pos != n:
                raise _Bad(f"{n - pos} trailing bytes after the item", pos)
            return value


def decode(data: bytes | bytearray | memoryview) -> Any:
    """Decode one dag-cbor block; links come back as :class:`Link`.

    Raises DagCborError: if the bytes are not a single well-formed canonical
    dag-cbor item (or nest deeper than :data:`MAX_DEPTH`).
    Raises TypeError: if ``data`` is not bytes-like (``bytes([1])`` would silently decode as ``1``).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"dag-cbor decodes bytes, got {type(data).__name__}")
    buf = bytes(data)
    try:
        return _decode(buf)
    except _Bad as bad:
        raise DagCborError(
            f"not dag-cbor ({len(buf)} bytes, starts {buf[:8].hex()}): {bad.reason} "
            f"at offset {bad.offset} ({buf[bad.offset : bad.offset + 8].hex()})"
        ) from bad.__cause__


def cid_of(value: Any) -> str:
    """The dag-cbor CID (``bafyrei…``) of ``value``'s canonical encoding.

    >>> cid_of({"hello": "world"})
    'bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae'
    """
    return cid_for(encode(value), "dag-cbor")


def links(value: Any) -> list[str]:
    """The CIDs of every link (tag 42) in a decoded value, in order (map values in key order).

    >>> links({"a": Link("bafkqaaa"), "b": [1, Link("bafkqaaa")]})
    ['bafkqaaa', 'bafkqaaa']
    """
    out: list[str] = []
    _links_into(value, out)
    return out


def _links_into(value: Any, out: list[str]) -> None:
    if isinstance(value, Link):
        out.append(value.cid)
    elif isinstance(value, dict):
        for item in value.values():
            _links_into(item, out)
    elif isinstance(value, list):
        for item in value:
            _links_into(item, out)
