"""Fuzzing Fs ops: hostile paths and values always give an FsResult with a receipt; a denial changes nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import DENIAL_REASONS, RECEIPT_KEYS, Fs, FsResult
from kuro_wasm.host import fsgate

_segments = st.sampled_from(["a", "b.txt", "..", ".", "", "d", "a/b.txt", "\x00", "\\", "é", "\ud800", "x" * 300])
_joined = st.lists(_segments, max_size=6).map("/".join)
_hostile_text = st.one_of(
    _joined,
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None), max_size=20),
    st.builds(lambda n: "a/" * n, st.integers(0, 5000)),
    st.builds(lambda n: "y" * n, st.integers(0, 70000)),
)
_hostile_objects: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=10),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=3),
    st.just(b"a/b.txt"),
    st.just(object()),
)
paths = st.one_of(_hostile_text, _hostile_objects)


def _released(data: bytes) -> memoryview:
    view = memoryview(data)
    view.release()
    return view


values = st.one_of(
    st.binary(max_size=600),
    st.builds(_released, st.binary(max_size=10)),
    st.builds(bytearray, st.binary(max_size=50)),
    st.binary(max_size=50).map(lambda b: memoryview(b)),
    _hostile_objects,
    st.text(max_size=10),
)
counts: st.SearchStrategy[object] = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70), _hostile_objects, st.just(True), st.just(1.0)
)


def _seed() -> Fs:
    fs = (
        Fs.empty(
            MemoryBlockStore(),
        )
        .write("a/b.txt", b"hello world")
        .fs
    )
    fs = fs.mkdir("d/e").fs
    return fs.write("c.bin", bytes(range(200)) * 5).fs


def _check(fs: Fs, before: dict[str, bytes], result: FsResult) -> None:
    assert isinstance(result, FsResult)
    receipt = result.receipt
    assert set(receipt) <= set(RECEIPT_KEYS)
    for key in ("kuro.fs/type", "kuro.fs/op", "kuro.fs/path", "kuro.fs/root-cid"):
        assert key in receipt, key
    json.dumps(receipt)  # a receipt is plain data
    assert isinstance(receipt["kuro.fs/path"], str)
    receipt["kuro.fs/path"].encode("utf-8")  # no lone surrogates
    if not result.ok:
        assert receipt["kuro.fs/reason"] in DENIAL_REASONS
        assert result.value is None
        assert result.fs is fs
        assert dict(fs.store._blocks) == before, "a denied op changed the store"  # type: ignore[attr-defined]


def _apply(fs: Fs, op: str, a: Any, b: Any, c: Any) -> FsResult:
    if op == "read":
        return fs.read(a)
    if op == "read_range":
        return fs.read_range(a, b, c)
    if op == "stat":
        return fs.stat(a)
    if op == "ls":
        return fs.ls(a)
    if op == "walk":
        return fs.walk(a)
    if op == "write":
        return fs.write(a, b)
    if op == "mkdir":
        return fs.mkdir(a)
    if op == "rm":
        return fs.rm(a)
    if op == "mv":
        return fs.mv(a, b)
    if op == "link":
        return fs.link(a, fs.stat("a").value["cid"] if b is None else fs.stat("c.bin").value["cid"])
    raise AssertionError(op)


_ops = st.sampled_from(["read", "read_range", "stat", "ls", "walk", "write", "mkdir", "rm", "mv", "link"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_ops, paths, st.one_of(paths, values, counts), counts)
def test_every_op_on_hostile_input_returns_a_receipt_and_a_denial_changes_nothing(
    op: str, a: Any, b: Any, c: Any
) -> None:
    fs = _seed()
    before = dict(fs.store._blocks)  # type: ignore[attr-defined]
    _check(fs, before, _apply(fs, op, a, b, c))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paths, st.sampled_from(["a/b.txt", "c.bin"]), counts, counts)
def test_read_range_with_hostile_offsets_never_returns_more_than_the_file_holds(
    path: Any, real: str, offset: Any, length: Any
) -> None:
    fs = _seed()
    before = dict(fs.store._blocks)  # type: ignore[attr-defined]
    for target in (path, real):
        result = fs.read_range(target, offset, length)
        _check(fs, before, result)
        if result.ok:
            whole = fs.read(target).value
            assert isinstance(offset, int) and isinstance(length, int)
            assert result.value == whole[offset : offset + length]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paths, values)
def test_a_denied_write_never_changes_the_root_or_the_store(path: Any, data: Any) -> None:
    fs = _seed().with_grant(["fs/read", "fs/ls"])
    before = dict(fs.store._blocks)  # type: ignore[attr-defined]
    result = fs.write(path, data)
    assert not result.ok
    _check(fs, before, result)
    assert result.fs.root == fs.root


def test_a_write_of_a_released_memoryview_is_bytes_required() -> None:
    fs = _seed()
    before = dict(fs.store._blocks)  # type: ignore[attr-defined]
    result = fs.write("new.txt", _released(b"gone"))
    assert result.receipt["kuro.fs/reason"] == "bytes-required"
    _check(fs, before, result)


# Positions at the edges: each side of every leaf boundary of a 3-leaf file (chunks of 7, 20 bytes),
# of its end, and of the integer widths an import's offset and length pass through (i32, u32, i64, u64).
_EDGE_FILE = bytes(range(20))
_WIDTHS = [2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64]
_positions = st.one_of(
    st.sampled_from([n + d for n in (0, 7, 14, 20) for d in (-1, 0, 1) if n + d >= 0] + _WIDTHS),
    st.integers(0, 25),
)


def _edge_fs() -> Fs:
    store = MemoryBlockStore()
    return Fs(store, Fs.empty(store).root, chunk_size=7).write("f", _EDGE_FILE).fs


@settings(max_examples=200, deadline=None)
@given(_positions, _positions)
def test_read_range_at_the_edges_is_exactly_the_slice(offset: int, length: int) -> None:
    result = _edge_fs().read_range("f", offset, length)  # at most 20 bytes come back: never over the budget
    assert result.ok, result.receipt
    assert result.value == _EDGE_FILE[offset : offset + length]
    assert result.receipt["kuro.fs/size"] == len(result.value)


@settings(max_examples=200, deadline=None)
@given(_positions, st.sampled_from([0, 1, 6, 7, 8, 20, 21, 2**32 - 1]))
def test_fs_read_at_through_the_gate_at_the_edges(offset: int, cap: int) -> None:
    # What a guest's fs_read_at(offset: i64, cap: u32) reaches: the gate answers the slice or a reason, never raises.
    answer = fsgate.call(_edge_fs(), "read_at", "f", offset, cap)
    assert answer.reason is None, answer
    data, _cid = answer.value
    assert data == _EDGE_FILE[offset : offset + cap]
