"""Canonical dag-cbor (codec 0x71): the one place that turns kuro values into CBOR bytes.

## The one decision
Every dag-cbor block kuro mints (directories, receipts, CAR headers, digests of
arguments) goes through :func:`encode`, so the canonical rules live here once:
definite lengths, shortest integers, string keys sorted length-first then
bytewise, 64-bit floats only, no NaN/±Inf, links as tag 42 over ``0x00 ‖ CID``.
The byte-level work is done by the ``dag-cbor`` package, which matches
``@ipld/dag-cbor`` on every published vector *except one*: a whole-valued float
(``1.0``) is ``fb 3ff0…`` in Python and ``01`` in JavaScript. Two encodings of
one value would mean two CIDs for one receipt, so :func:`encode` **refuses
integral floats** (``DagCborError``); kuro's own data model normalises them to
ints before they get here.

Links are :class:`Link` values holding a CID string, so plain data can carry a
link without importing ``multiformats``.

## Pure
No I/O.

## Not done here
No decoding leniency: non-canonical input is rejected by the library's decoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dag_cbor as _dag_cbor
from multiformats import CID as _MfCID

from kuro_fs.cid import cid_for, parse
from kuro_fs.errors import DagCborError, InvalidCID

__all__ = ["Link", "cid_of", "decode", "encode"]


@dataclass(frozen=True, slots=True)
class Link:
    """A dag-cbor link (tag 42) to the block named by ``cid`` (a CID string)."""

    cid: str

    def __post_init__(self) -> None:
        parse(self.cid)  # raises InvalidCID on a bad name

    def to_data(self) -> dict[str, str]:
        """JSON form of a link, as the IPLD DAG-JSON convention writes it."""
        return {"/": self.cid}


def _to_lib(value: Any, where: str) -> Any:
    if isinstance(value, Link):
        return _MfCID.decode(value.cid)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str, bytes)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise DagCborError(f"dag-cbor forbids NaN and infinities (at {where or '/'})")
        if value.is_integer():
            raise DagCborError(
                f"integral float {value!r} at {where or '/'}: it encodes differently in Python and "
                "JavaScript dag-cbor; pass an int instead"
            )
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise DagCborError(f"dag-cbor map keys must be strings, got {type(key).__name__} at {where or '/'}")
            out[key] = _to_lib(item, f"{where}/{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_to_lib(item, f"{where}/{i}") for i, item in enumerate(value)]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise DagCborError(f"cannot encode {type(value).__name__} as dag-cbor (at {where or '/'})")


def _from_lib(value: Any) -> Any:
    if isinstance(value, _MfCID):
        return Link(str(value.set(base="base32")) if value.version == 1 else str(value))
    if isinstance(value, dict):
        return {key: _from_lib(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_from_lib(item) for item in value]
    return value


def encode(value: Any) -> bytes:
    """Canonical dag-cbor bytes for ``value``.

    Accepts None, bool, int (−2^64 … 2^64−1), non-integral finite float, str,
    bytes, list/tuple, dict with str keys, and :class:`Link`.

    >>> encode({"hello": "world"}).hex()
    'a16568656c6c6f65776f726c64'

    Raises DagCborError: for anything outside that set, NaN/±Inf, integral
    floats, or integers out of range.
    """
    lib_value = _to_lib(value, "")
    try:
        return bytes(_dag_cbor.encode(lib_value))
    except Exception as exc:  # the library raises its own hierarchy and ValueError
        raise DagCborError(f"cannot encode as dag-cbor: {exc}") from exc


def decode(data: bytes) -> Any:
    """Decode one dag-cbor block; links come back as :class:`Link`.

    Raises DagCborError: if the bytes are not a single well-formed dag-cbor item.
    Raises TypeError: if ``data`` is not bytes-like (``bytes([1])`` would silently decode as ``1``).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"dag-cbor decodes bytes, got {type(data).__name__}")
    try:
        value = _dag_cbor.decode(bytes(data))
    except Exception as exc:
        raise DagCborError(f"not dag-cbor ({len(data)} bytes, starts {bytes(data[:8]).hex()}): {exc}") from exc
    try:
        return _from_lib(value)
    except InvalidCID as exc:
        raise DagCborError(f"dag-cbor link outside kuro's CID profile: {exc}") from exc


def cid_of(value: Any) -> str:
    """The dag-cbor CID (``bafyrei…``) of ``value``'s canonical encoding.

    >>> cid_of({"hello": "world"})
    'bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae'
    """
    return cid_for(encode(value), "dag-cbor")
