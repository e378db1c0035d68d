"""Fuzzing guests: add_guest refuses bad bytes with LoadError; running a stored bad guest is a 126 load-error receipt.

``add_guest`` raises :class:`~kuro_wasm.errors.LoadError` (a HostError, reference ``load-error``) for text that is
not WAT and bytes that are not a valid module; it is the only exception hostile guest bytes produce.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.unixfs import write_file
from kuro_wasm.errors import LoadError, ModelError
from kuro_wasm.host.api import Handle, run, start
from kuro_wasm.host.engine import EngineConfig, engine_for
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

_ROOT = Path(__file__).resolve().parents[2]
HELLO_WAT = (_ROOT / "guests" / "hello.wat").read_text(encoding="utf-8")
HELLO = bytes(wasmtime.wat2wasm(HELLO_WAT))
_HOME = Path(tempfile.mkdtemp(prefix="kuro-fuzz-home-"))
_CAPS = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]

_edits = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate"]), st.integers(0, 1 << 16), st.integers(1, 255)),
    min_size=1,
    max_size=3,
)


def _mutate(data: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, at, value in edits:
        at %= max(len(buf), 1)
        if kind == "flip" and buf:
            buf[at] ^= value
        elif kind == "insert":
            buf[at:at] = bytes([value])
        elif kind == "delete":
            del buf[at : at + value % 8 + 1]
        else:
            del buf[at:]
    return bytes(buf)


def _add(store: MemoryBlockStore, data: bytes | str) -> str | None:
    try:
        return add_guest(store, data)
    except LoadError:
        assert store._blocks == {}, "a refused guest was stored"
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edits)
def test_a_mutated_module_is_stored_valid_or_refused_with_a_load_error(edits: list[tuple[str, int, int]]) -> None:
    store = MemoryBlockStore()
    mutated = _mutate(HELLO, edits)
    cid = _add(store, mutated)
    if cid is not None:  # stored as given (one raw block), and it validates under kuro's engine
        assert store.get(cid) == mutated
        wasmtime.Module.validate(engine_for(EngineConfig()), mutated)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=200), st.binary(max_size=200), st.builds(lambda e: _mutate(HELLO_WAT.encode(), e), _edits)
    )
)
def test_text_that_is_not_wat_and_bytes_that_are_not_wasm_are_a_load_error(data: str | bytes) -> None:
    _add(MemoryBlockStore(), data)


def _run(store: MemoryBlockStore, cid: str) -> dict[str, object]:
    fs = Fs.empty(store)
    sess = session("s-fuzz", fs.root, "terminal-repo", grant=_CAPS)
    return run(sess, guest(cid, "run"), store=store, fs=fs, home=_HOME, timeout_ms=2000, fuel=1_000_000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edits, st.booleans())
def test_running_a_stored_bad_guest_is_a_load_error_receipt(edits: list[tuple[str, int, int]], as_dag: bool) -> None:
    bad = _mutate(HELLO, edits)
    store = MemoryBlockStore()
    cid = write_file(store.put, bad, chunk_size=64).cid if as_dag else store.put(bad, "raw")
    receipt = _run(store, cid)
    assert isinstance(receipt, dict)
    try:
        wasmtime.Module.validate(engine_for(EngineConfig()), bad)
    except wasmtime.WasmtimeError:
        assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (126, "load-error"), receipt


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.sampled_from(["raw", "dag-pb", "dag-cbor"]))
def test_running_arbitrary_stored_bytes_as_a_guest_is_a_load_error_receipt(data: bytes, codec: str) -> None:
    store = MemoryBlockStore()
    receipt = _run(store, store.put(data, codec))
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (126, "load-error"), receipt


_LIMITS = ["timeout_ms", "max_output_bytes", "max_memory_bytes", "fuel"]
_limit_values = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.sampled_from([2**64 - 1, 2**64, 0, 1]),
    st.none(),
    st.booleans(),
    st.floats(),
    st.text(max_size=3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_LIMITS), _limit_values)
def test_a_limit_out_of_range_is_refused_before_the_guest_runs(name: str, value: object) -> None:
    store = MemoryBlockStore()
    cid = add_guest(store, HELLO)
    fs = Fs.empty(store)
    sess = session("s-fuzz", fs.root, "terminal-repo", grant=_CAPS)
    limits: dict[str, object] = {"timeout_ms": 2000, "fuel": 1_000_000, name: value}
    in_range = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64
    if value is None and name in ("max_memory_bytes", "fuel"):
        in_range = True
    if name == "timeout_ms" and value == 0:
        in_range = False
    try:
        receipt = run(sess, guest(cid, "run"), store=store, fs=fs, home=_HOME, **limits)  # type: ignore[arg-type]
    except ModelError as exc:
        assert exc.reason == "invalid-limit" and not in_range, exc
        return
    assert in_range, f"{name}={value!r} was accepted"
    assert receipt["kuro/type"] == "kuro/receipt"


_options: st.SearchStrategy[tuple[str, object]] = st.one_of(
    st.tuples(st.just("home"), st.one_of(st.integers(), st.binary(max_size=4), st.just("bad\0home"), st.just(True))),
    st.tuples(st.just("on_chunk"), st.one_of(st.integers(), st.text(max_size=3), st.just(b"x"))),
    st.tuples(st.just("on_exit"), st.one_of(st.integers(), st.text(max_size=3), st.just([]))),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_options)
def test_a_bad_run_option_is_refused_before_the_guest_runs(option: tuple[str, object]) -> None:
    store = MemoryBlockStore()
    cid = add_guest(store, HELLO)
    fs = Fs.empty(store)
    sess = session("s-fuzz", fs.root, "terminal-repo", grant=_CAPS)
    kwargs: dict[str, Any] = {"home": _HOME, option[0]: option[1]}
    try:
        handle = start(sess, guest(cid, "run"), store=store, fs=fs, **kwargs)
    except ModelError as exc:
        assert exc.reason == "invalid-run-option"
        return
    assert isinstance(handle, Handle)
    handle.close()
    raise AssertionError(f"{option!r} started the guest")


def _released(data: bytes) -> memoryview:
    view = memoryview(data)
    view.release()
    return view


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=st.characters(codec=None), max_size=20),
        st.integers(min_value=-5, max_value=10**12),
        st.none(),
        st.floats(),
        st.lists(st.integers(0, 255), max_size=8),
        st.binary(max_size=8).map(_released),
    )
)
def test_a_guest_that_is_not_bytes_or_text_is_a_load_error(value: object) -> None:
    _add(MemoryBlockStore(), value)  # type: ignore[arg-type]
