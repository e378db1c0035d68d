"""Fuzzing import_car: a mutated CAR is a CarError that stores nothing, or a clean import of verified blocks."""

from __future__ import annotations

import hashlib
import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import import_car, read_car, write_car
from kuro_fs.cid import parse
from kuro_fs.dagcbor import Link, encode
from kuro_fs.dagpb import encode_uvarint
from kuro_fs.errors import CarError
from kuro_fs.fs import Fs
from kuro_fs.unixfs import write_file


def _valid_car() -> bytes:
    store = MemoryBlockStore()
    fs = Fs.empty(store).write("a/b.txt", b"hello " * 50).fs
    fs = fs.write("c.bin", bytes(range(256)) * 3).fs
    file_root = write_file(store.put, b"x" * 700, chunk_size=100, width=3)
    fs = fs.link("big", file_root.cid).fs
    blocks = [(cid, store.get(cid)) for cid in sorted(store._blocks)]  # every block, any order
    return b"".join(write_car([fs.root], [(c, b) for c, b in blocks if b is not None]))


VALID = _valid_car()
ROOT = read_car(io.BytesIO(VALID))[0][0]
_HEADER_BODY = encode({"roots": [Link(ROOT)], "version": 1})
HEADER = encode_uvarint(len(_HEADER_BODY)) + _HEADER_BODY

_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(VALID) - 1), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, len(VALID) - 1), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, len(VALID)), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, len(VALID) - 1), st.integers(1, 40)),
    st.tuples(st.just("varint"), st.integers(0, len(VALID) - 1), st.integers(0, (1 << 64) - 1)),
)


_cbor_values = st.recursive(
    st.integers() | st.text(max_size=5) | st.binary(max_size=5) | st.just(Link(ROOT)) | st.none(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["roots", "version", "x"]), c, max_size=3),
    max_leaves=20,
)


def _mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, at, value in mutations:
        at = min(at, len(buf))
        if kind == "flip" and at < len(buf):
            buf[at] ^= value
        elif kind == "truncate":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = bytes([value])
        elif kind == "delete":
            del buf[at : at + value]
        elif kind == "varint":
            buf[at:at] = encode_uvarint(value)
    return bytes(buf)


def _check_import(data: bytes) -> None:
    store = MemoryBlockStore()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.car"
        path.write_bytes(data)
        try:
            roots = import_car(store, path)
        except CarError:
            assert store._blocks == {}, "a refused CAR stored blocks"
            return
    assert roots
    for cid in roots:
        parse(cid)
    for cid, block in store._blocks.items():
        assert hashlib.sha256(block).digest() == parse(cid).digest


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation, min_size=1, max_size=4))
def test_a_mutated_car_is_a_car_error_that_stores_nothing_or_a_verified_import(
    mutations: list[tuple[str, int, int]],
) -> None:
    _check_import(_mutate(VALID, mutations))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_a_car_error_or_a_verified_import(data: bytes) -> None:
    _check_import(data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=120), st.binary(max_size=120))
def test_a_valid_header_followed_by_garbage_is_a_car_error_or_a_verified_import(head: bytes, tail: bytes) -> None:
    _check_import(HEADER + head + tail)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.binary(max_size=64))
def test_a_huge_declared_length_is_a_car_error_not_a_memory_error(length: int, body: bytes) -> None:
    _check_import(encode_uvarint(length) + body)
    _check_import(HEADER + encode_uvarint(length) + body)


@settings(max_examples=100, deadline=None)
@given(_cbor_values)
def test_a_header_of_any_dag_cbor_shape_is_a_car_error_or_a_verified_import(value: object) -> None:
    try:
        header = encode(value)
    except ValueError:
        return
    _check_import(encode_uvarint(len(header)) + header)
