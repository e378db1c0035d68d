"""What one call may carry across a component's boundary: ``max_value_bytes`` (``kuro/limits``).

wasmtime's component C API holds a value as one 32-byte C value per element, converted into
wasmtime's own values (another ~48 bytes each): a ``list<u8>`` costs the host ~80 bytes per byte
while it crosses (measured: a 48 MiB ``fs.read`` took the host from 77 to 3881 MiB of RSS). So no
value larger than the run's bound is ever built: a host function answers ``err(too-large)``
(the ABI's ``TOO_LARGE``), spec args are a ``load-error``, and a guest's own too-large value
(a result, a WASI write or random request) ends the run as a trap that says so.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
from hostkit import component, make_fs, make_session
from hypothesis import given, settings
from hypothesis import strategies as st
from wasmtime import _ffi as ffi

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import run
from kuro_wasm.host.component_values import Budget, ValueTooLarge, delete, read, write
from kuro_wasm.host.kinds import component as component_kind
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.limits import DEFAULT_MAX_VALUE_BYTES, Limits
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wit import INT_RANGES, WitType, value_bytes


def _run(name: str, export: str, args: list[Any], files: dict[str, bytes] | None = None, **options: Any) -> Any:
    store = MemoryBlockStore()
    fs = make_fs(store, files or {})
    stdin = options.pop("stdin", None)
    spec = guest(add_guest(store, component(name)), export, args)
    return run(make_session(fs), spec, store=store, fs=fs, home=False, stdin=stdin, **options)


def test_the_bound_is_in_every_receipts_limits() -> None:
    assert Limits().receipt_value()["max-value-bytes"] == DEFAULT_MAX_VALUE_BYTES
    receipt = _run("typed", "add", [1, 2], max_value_bytes=1000)
    assert receipt["kuro/limits"]["max-value-bytes"] == 1000


def test_a_file_larger_than_the_memory_limit_allows_is_too_large_not_built() -> None:
    # the audit's case: 48 MiB through fs.read with max_memory_bytes = 64 MiB (it took the host ~3.8 GiB)
    big = {"big.bin": bytes(48 << 20)}
    receipt = _run("py-tool", "run", ["cat", "big.bin"], big, max_memory_bytes=64 << 20, max_output_bytes=64 << 20)
    assert (receipt["kuro/exit-code"], receipt["kuro/stderr"]) == (1, b"cat: too-large\n"), receipt
    assert receipt["kuro/reads"] == []  # nothing reached the guest


def test_a_file_of_the_bound_is_read_and_one_byte_more_is_too_large() -> None:
    files = {"at.bin": b"a" * 1000, "over.bin": b"b" * 1001}
    ok = _run("py-tool", "run", ["cat", "at.bin"], files, max_value_bytes=1000)
    assert (ok["kuro/exit-code"], ok["kuro/stdout"]) == (0, b"a" * 1000), ok
    over = _run("py-tool", "run", ["cat", "over.bin"], files, max_value_bytes=1000)
    assert (over["kuro/exit-code"], over["kuro/stderr"]) == (1, b"cat: too-large\n")


def test_the_default_bound_answers_a_larger_read_too_large() -> None:
    files = {"over.bin": bytes(DEFAULT_MAX_VALUE_BYTES + 1)}
    receipt = _run("py-tool", "run", ["cat", "over.bin"], files, max_output_bytes=DEFAULT_MAX_VALUE_BYTES * 2)
    assert receipt["kuro/stderr"] == b"cat: too-large\n"


def test_read_at_is_bounded_by_what_it_returns_not_by_what_it_asks() -> None:
    files = {"f.bin": b"x" * 5000}
    small = _run("py-tool", "run", ["read-at", "f.bin", "4900", "4000000000"], files, max_value_bytes=1000)
    assert (small["kuro/exit-code"], small["kuro/stdout"]) == (0, b"x" * 100), small
    large = _run("py-tool", "run", ["read-at", "f.bin", "0", "1001"], files, max_value_bytes=1000)
    assert large["kuro/stderr"] == b"read-at: too-large\n"


def test_a_listing_larger_than_the_bound_is_too_large() -> None:
    files = {f"dir/{i:03}.txt": b"" for i in range(40)}
    assert _run("py-tool", "run", ["ls", "dir"], files, max_value_bytes=100_000)["kuro/exit-code"] == 0
    receipt = _run("py-tool", "run", ["ls", "dir"], files, max_value_bytes=1000)
    assert receipt["kuro/stderr"] == b"ls: too-large\n"


def test_values_from_the_guest_past_the_bound_are_too_large_before_they_are_used() -> None:
    assert _run("py-tool", "run", ["store", "out.txt", "1000"], max_value_bytes=1000)["kuro/exit-code"] == 0
    store = _run("py-tool", "run", ["store", "out.txt", "1001"], max_value_bytes=1000)
    assert (store["kuro/stderr"], "kuro/fs-root-after" in store) == (b"store: too-large\n", False)
    assert _run("py-tool", "run", ["emit", "1000"], max_value_bytes=1000)["kuro/stdout"] == b"z" * 1000
    emit = _run("py-tool", "run", ["emit", "1001"], max_value_bytes=1000)
    assert (emit["kuro/stdout"], emit["kuro/stderr"]) == (b"", b"emit: too-large\n")


def test_stdin_reads_are_cut_to_the_bound_and_lose_nothing() -> None:
    data = bytes(range(256)) * 40
    receipt = _run("typed", "run", ["cat"], stdin=data, max_value_bytes=100)  # asks 4096 a read, gets ≤ 100
    assert (receipt["kuro/exit-code"], receipt["kuro/stdout"]) == (0, data)


def test_an_env_and_argv_past_the_bound_are_a_load_error() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("environ"))
    spec = guest(cid, "run", ["x"], env={"A": "b"}, argv0="t")  # 2 + 2 bytes
    fits = run(make_session(fs), spec, store=store, fs=fs, max_value_bytes=5)
    assert fits["kuro/stdout"] == b"A=b\narg t\narg x\n"
    spec = guest(cid, "run", ["x"], env={"A": "bcd"}, argv0="t")
    receipt = run(make_session(fs), spec, store=store, fs=fs, max_value_bytes=5)
    assert receipt["kuro/outcome"] == "load-error"
    assert "the spec's env and argv are 6 bytes, more than max_value_bytes (5)" in receipt["kuro/error"]


def test_spec_args_past_the_bound_are_a_load_error_naming_the_parameter() -> None:
    assert _run("typed", "sum-bytes", [b"\1" * 1000], max_value_bytes=1000)["kuro/result"] == 1000
    receipt = _run("typed", "sum-bytes", [b"\1" * 1001], max_value_bytes=1000)
    assert receipt["kuro/outcome"] == "load-error"
    assert "parameter data (list<u8>): 1001 bytes, more than max_value_bytes (1000)" in receipt["kuro/error"]


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_result_past_the_bound_ends_the_run_as_a_trap_that_says_so(isolation: str) -> None:
    assert _run("typed", "fill", [1000], max_value_bytes=1000, isolation=isolation)["kuro/result"] == b"\7" * 1000
    receipt = _run("typed", "fill", [1001], max_value_bytes=1000, isolation=isolation)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (134, "trap"), receipt
    assert "kuro/result" not in receipt
    assert receipt["kuro/trap"]["message"] == (
        "kuro: export 'fill' returned more than max_value_bytes (1000) lets one call carry"
    )


def test_a_result_whose_receipt_is_past_a_frame_s_json_limit_crosses_from_a_worker_as_it_is_in_process() -> None:
    # 250 000 empty lists: 250 000 counted bytes (within the default bound), 5 MB of DAG-JSON in the receipt, past
    # the 4 MiB a frame's JSON part holds: the receipt rides as the done frame's payload, bounded by the run's limits
    n = 250_000
    alone, worker = (_run("typed", "empties", [n], isolation=isolation) for isolation in ("wasmtime", "process"))
    assert (worker["kuro/outcome"], worker["kuro/isolation"]) == ("ok", "process"), worker.get("kuro/error")
    assert worker["kuro/result"] == alone["kuro/result"] == [b""] * n
    same = ("kuro/exit-code", "kuro/outcome", "kuro/stdout-cid", "kuro/reads")
    assert {k: worker.get(k) for k in same} == {k: alone.get(k) for k in same}


def test_a_result_far_past_the_bound_is_refused_by_wasmtime_before_the_host_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # on the engine's component path: 64 MiB of list<u8> (the guest's own memory holds it): wasmtime's hostcall
    # fuel (~2.7 MiB) stops the lifting before any host value is built (measured: 1 GiB the same way, host RSS
    # only the guest's 1 GiB)
    monkeypatch.setattr(component_kind.KIND, "plain", False)
    receipt = _run("typed", "fill", [64 << 20], max_value_bytes=256 << 20)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"], "kuro/result" in receipt) == (134, "trap", False)
    assert "fuel allocated for hostcalls has been exhausted" in receipt["kuro/trap"]["message"], receipt


def test_on_the_hosts_own_canonical_abi_a_result_is_bounded_only_by_max_value_bytes_and_measured_unbuilt() -> None:
    receipt = _run("typed", "fill", [64 << 20], max_value_bytes=64 << 20)  # no hostcall fuel on this path
    assert (receipt["kuro/outcome"], len(receipt["kuro/result"])) == ("ok", 64 << 20)
    receipt = _run("typed", "fill", [64 << 20], max_value_bytes=(64 << 20) - 1)  # measured in memory, not built
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"], "kuro/result" in receipt) == (134, "trap", False)
    assert "returned more than max_value_bytes (67108863) lets one call carry" in receipt["kuro/trap"]["message"]


def test_a_wasi_random_request_past_the_cap_is_the_guests_trap_not_a_host_error() -> None:
    receipt = _run("entropy", "run", ["greedy"])  # it asks get-random-bytes(1 MiB + 1)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"], receipt["kuro/trap"]["kind"]) == (134, "trap", "trap")
    assert receipt["kuro/trap"]["message"] == (
        "kuro: wasi:random get-random-bytes(1048577): more than 1048576 bytes (max_value_bytes, 1 MiB)"
    )
    assert receipt["kuro/stdout"] == b""


def test_a_wasi_random_request_past_the_bound_is_the_guests_trap_not_a_host_error() -> None:
    receipt = _run("entropy", "run", [], max_value_bytes=8)  # it asks get-random-bytes(16)
    assert (receipt["kuro/outcome"], receipt["kuro/trap"]["kind"]) == ("trap", "trap"), receipt
    assert "get-random-bytes(16): more than" in receipt["kuro/trap"]["message"]


# ---- the count while reading from the engine is the count of the model (value_bytes)

_U8, _STR = WitType("u8"), WitType("string")
_ENUM = WitType("enum", (), ("file", "dir"))
_TYPES = [
    WitType("list", (_U8,)),
    _STR,
    WitType("list", (_STR,)),
    WitType("list", (WitType("u32"),)),
    WitType("list", (WitType("record", (_STR, _ENUM, WitType("u64"), _STR), ("name", "kind", "size", "cid")),)),
    WitType("option", (WitType("list", (_U8,)),)),
    WitType("result", (WitType("list", (_U8,)), _ENUM)),
    WitType("result", (None, None)),
    WitType("variant", (WitType("f64"), None), ("circle", "empty")),
    WitType("tuple", (WitType("s16"), WitType("char"), WitType("bool"))),
    WitType("flags", (), tuple(f"f{i}" for i in range(10))),
    WitType("list", (WitType("list", (_U8,)),)),
    WitType("list", (WitType("option", (_U8,)),)),
    WitType("list", (WitType("result", (None, None)),)),
]


def _values(t: WitType) -> st.SearchStrategy[Any]:
    k = t.kind
    if k in INT_RANGES:
        low, high = INT_RANGES[k]
        return st.integers(low, high)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "f64": st.floats(allow_nan=False),
        "char": st.characters(exclude_categories=("Cs",)),
        "string": st.text(max_size=20),
    }
    if k in simple:
        return simple[k]
    if k == "enum":
        return st.sampled_from(t.names)
    if k == "flags":
        return st.sets(st.sampled_from(t.names)).map(lambda got: tuple(n for n in t.names if n in got))
    items = [i for i in t.items if i is not None]
    if k == "list":
        return st.binary(max_size=40) if items[0].kind == "u8" else st.lists(_values(items[0]), max_size=6)
    if k in ("record", "tuple"):
        return st.tuples(*(_values(i) for i in items))
    if k == "option":
        return st.none() | _values(items[0]).map(lambda v: (v,))
    names = t.names if k == "variant" else ("ok", "err")
    return st.one_of(
        *(
            st.just((n, None)) if p is None else _values(p).map(lambda v, n=n: (n, v))
            for n, p in zip(names, t.items, strict=True)
        )
    )


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_TYPES).flatmap(lambda t: st.tuples(st.just(t), _values(t))))
def test_reading_counts_a_value_exactly_as_value_bytes_does(typed: tuple[WitType, Any]) -> None:
    t, value = typed
    raw = ffi.wasmtime_component_val_t()
    write(t, value, ctypes.pointer(raw))
    try:
        size = value_bytes(t, value)
        budget = Budget(10**9)
        assert read(t, raw, budget) == value
        assert 10**9 - budget.left == size
        if size:
            with pytest.raises(ValueTooLarge):
                read(t, raw, Budget(size - 1))
    finally:
        delete(ctypes.byref(raw))
