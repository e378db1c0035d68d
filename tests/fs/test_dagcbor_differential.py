"""kuro_fs.dagcbor against the ``dag-cbor`` package (the reference implementation, test-only).

Generated values must encode to the reference's bytes exactly and come back
unchanged; mutated and random bytes must either decode to a value that encodes
back to the same bytes, or raise DagCborError — never another exception.
"""

from __future__ import annotations

import math
from typing import Any

import dag_cbor
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from multiformats import CID

from kuro_fs.cid import cid_for
from kuro_fs.dagcbor import MAX_DEPTH, Link, decode, encode
from kuro_fs.errors import DagCborError

# ---- the bridge to the reference's data model


def _to_ref(value: Any) -> Any:
    """Our value → the reference's (CID objects for links, lists for tuples, bytes for bytes-likes)."""
    if isinstance(value, Link):
        return CID.decode(value.cid)
    if isinstance(value, dict):
        return {key: _to_ref(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_ref(item) for item in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _from_ref(value: Any) -> Any:
    if isinstance(value, CID):
        return Link(str(value.set(base="base32")))
    if isinstance(value, dict):
        return {key: _from_ref(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_from_ref(item) for item in value]
    return value


def _plain(value: Any) -> Any:
    """What decode gives back for ``value``: tuples as lists, bytes-likes as bytes."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_has_integral_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_integral_float(item) for item in value)
    return False


def _has_foreign_link(value: Any) -> bool:
    if isinstance(value, CID):
        return not (
            value.version == 1
            and value.codec.name in ("raw", "dag-pb", "dag-cbor")
            and value.hashfun.name == "sha2-256"
            and len(value.raw_digest) == 32
        )
    if isinstance(value, dict):
        return any(_has_foreign_link(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_foreign_link(item) for item in value)
    return False


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


# ---- strategies

_BOUNDARIES = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53, 2**63, 2**64 - 1]
_INTS = (
    st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.sampled_from(_BOUNDARIES + [-1 - n for n in _BOUNDARIES])
    | st.integers(min_value=-300, max_value=300)
)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
# Keys whose order differs between length-first-on-UTF-8 and plain string order: "z" < "aa",
# "é" (2 bytes) sorts with the 2-byte keys, "€" (3 bytes) with the 3-byte ones, "😀" (4) after "aaa".
_TRICKY_KEYS = ["", "a", "b", "z", "aa", "ab", "zz", "é", "ü", "aaa", "€", "😀", "a\x00", "\x7f", "\x80"]
_KEYS = st.sampled_from(_TRICKY_KEYS) | st.text(max_size=6)
_LINKS = st.builds(
    lambda data, codec: Link(cid_for(data, codec)),
    st.binary(max_size=8),
    st.sampled_from(["raw", "dag-pb", "dag-cbor"]),
)
_SCALARS = (
    st.none()
    | st.booleans()
    | _INTS
    | _FLOATS
    | st.text(max_size=30)
    | st.binary(max_size=30)
    | st.binary(max_size=8).map(bytearray)
    | _LINKS
)
ENTRY_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=6)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(_KEYS, children, max_size=6)
    ),
    max_leaves=30,
)


# ---- generated values


@given(ENTRY_VALUES)
@settings(max_examples=200, deadline=None)
def test_our_bytes_are_the_reference_bytes(value: Any) -> None:
    assert encode(value) == bytes(dag_cbor.encode(_to_ref(value)))


@given(ENTRY_VALUES)
@settings(max_examples=200, deadline=None)
def test_decode_of_encode_gives_the_value_back_and_agrees_with_the_reference(value: Any) -> None:
    data = encode(value)
    assert decode(data) == _plain(value)
    assert _from_ref(dag_cbor.decode(data)) == _plain(value)


@given(st.dictionaries(_KEYS, _INTS, min_size=2, max_size=12))
@settings(max_examples=100, deadline=None)
def test_tricky_key_orders_match_the_reference(value: dict[str, int]) -> None:
    data = encode(value)
    assert data == bytes(dag_cbor.encode(_to_ref(value)))
    assert list(decode(data)) == sorted(value, key=lambda k: (len(k.encode()), k.encode()))


@given(st.sampled_from(_BOUNDARIES + [-1 - n for n in _BOUNDARIES]))
def test_every_integer_boundary_matches_the_reference(number: int) -> None:
    assert encode(number) == bytes(dag_cbor.encode(number))
    assert decode(encode(number)) == number


@given(st.floats(min_value=-(2.0**53 - 1), max_value=2.0**53 - 1).filter(lambda f: f.is_integer()))
@settings(max_examples=50, deadline=None)
def test_integral_floats_are_refused_although_the_reference_writes_them_and_we_read_them(number: float) -> None:
    with pytest.raises(DagCborError, match="integral float"):
        encode(number)
    written = bytes(dag_cbor.encode(number))
    back = decode(written)
    assert isinstance(back, float) and back == number


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f.is_integer() and abs(f) > 2**53 - 1))
@settings(max_examples=50, deadline=None)
def test_whole_floats_past_2_53_are_written_as_the_reference_writes_them(number: float) -> None:
    written = bytes(dag_cbor.encode(number))
    assert encode(number) == written
    back = decode(written)
    assert isinstance(back, float) and back == number


# ---- mutated and random bytes


def _check_decodes_canonically_or_refuses(data: bytes) -> None:
    try:
        value = decode(data)
    except DagCborError:
        # Refused: the reference refuses too, unless it accepted a link outside kuro's CID profile
        # or nesting past our cap (it has none but the interpreter's recursion limit).
        try:
            accepted = dag_cbor.decode(data)
        except Exception:
            return
        assert _has_foreign_link(accepted) or _depth(accepted) > MAX_DEPTH, data.hex()
        return
    # Accepted: the bytes were canonical, so encoding the value again gives them back. Integral
    # floats, which decode accepts but encode refuses, are re-encoded by the reference instead.
    again = bytes(dag_cbor.encode(_to_ref(value))) if _has_integral_float(value) else encode(value)
    assert again == data
    assert _from_ref(dag_cbor.decode(data)) == value


_MUTATIONS = st.sampled_from(["flip", "set", "insert", "delete", "truncate", "append"])


@given(
    ENTRY_VALUES, st.lists(st.tuples(_MUTATIONS, st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=3)
)
@settings(max_examples=200, deadline=None)
def test_mutated_blocks_decode_canonically_or_raise_dag_cbor_error(value: Any, mutations: Any) -> None:
    data = bytearray(encode(value))
    for kind, where, byte in mutations:
        at = where % (len(data) + 1)
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << (byte % 8)
        elif kind == "set" and at < len(data):
            data[at] = byte
        elif kind == "insert":
            data.insert(at, byte)
        elif kind == "delete" and at < len(data):
            del data[at]
        elif kind == "truncate":
            del data[at:]
        elif kind == "append":
            data.append(byte)
    _check_decodes_canonically_or_refuses(bytes(data))


@given(st.binary(max_size=64))
@settings(max_examples=200, deadline=None)
@example(bytes.fromhex("fb3ff0000000000000"))
@example(bytes.fromhex("82fb4000000000000000a0"))
@example(b"\x81" * 300 + b"\x00")
@example(bytes.fromhex("d82a58250001721220e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
def test_random_bytes_decode_canonically_or_raise_dag_cbor_error(data: bytes) -> None:
    _check_decodes_canonically_or_refuses(data)


@pytest.mark.parametrize("number", [0.0, -0.0, 1.0, -(2.0**64), 2.0**1023])
def test_integral_floats_other_implementations_write_decode_as_the_same_float(number: float) -> None:
    back = decode(bytes(dag_cbor.encode(number)))
    assert isinstance(back, float) and back == number and math.copysign(1, back) == math.copysign(1, number)
