"""The stream's receipt path (measured values taken as given) builds exactly what the strict path builds.

:func:`kuro_wasm.model.stream.finish` hands its own measurements (kept bytes, their
raw CIDs, byte counts, truncation) to :func:`kuro_wasm.model.receipt.receipt_measured`
without re-checking them; everything else still goes through the strict checks.
These properties compare that path with the public, strict
:func:`kuro_wasm.model.receipt.receipt` fed the same merged result.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import EMPTY_CID, GUEST_CID, caps, cids, host_results, plain_values, write_lists

from kuro_fs.cid import raw_cid
from kuro_wasm.errors import ModelError
from kuro_wasm.model import stream
from kuro_wasm.model.outcome import STOPS, decide
from kuro_wasm.model.receipt import (  # _plain/_typed: the fast paths, _general: the rules they must match
    HOST_KEYS,
    KEYS,
    _plain,
    _plain_general,
    _typed,
    _typed_general,
    namespace,
    receipt,
    receipt_measured,
)
from kuro_wasm.model.sessions import Session, guest, session

_SESS = session("s1", EMPTY_CID, grant=["guest/invoke", "fs/read"])
_SPEC = guest(GUEST_CID, "run", [40, 2])


def _strict(s: stream.Stream, sess: Session, spec: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """What finish must equal: the strict receipt of the host's keys with the stream's measurements on top."""
    merged = namespace(result)
    merged.pop("kuro/truncated?", None)
    merged.pop("kuro/dropped-bytes", None)
    merged.pop("kuro/capped-by", None)
    out, err = stream.kept_bytes(s, "stdout"), stream.kept_bytes(s, "stderr")
    merged.update(
        {
            "kuro/stdout": out,
            "kuro/stderr": err,
            "kuro/stdout-cid": raw_cid(out),
            "kuro/stderr-cid": raw_cid(err),
            "kuro/stdout-bytes": s.stdout_bytes,
            "kuro/stderr-bytes": s.stderr_bytes,
        }
    )
    if s.truncated:
        merged["kuro/truncated?"] = True
        merged["kuro/dropped-bytes"] = s.dropped_bytes
        merged["kuro/capped-by"] = s.capped_by
    return receipt(sess, spec, merged)


def _outcome(build: Any) -> tuple[str, Any]:
    """("ok", receipt with its key order) or ("refused", (reason, message))."""
    try:
        built = build()
    except ModelError as exc:
        return "refused", (exc.reason, str(exc))
    return "ok", (list(built), built)


def _fed(cap: int, writes: list[tuple[str, bytes]]) -> stream.Stream:
    s = stream.new(cap)
    for name, data in writes:
        s, _ = stream.append(s, name, data)
    return s


# The results the host itself builds (kuro_wasm.host.job): decide() plus its extras.
_trap_codes = st.sampled_from([None, "UNREACHABLE_CODE_REACHED", "STACK_OVERFLOW", "OUT_OF_FUEL", "INTERRUPT"])
_decided = st.one_of(
    st.builds(
        lambda stop, err: decide(stop=stop, host_error=err), st.sampled_from(sorted(STOPS)), st.none() | st.text()
    ),
    st.builds(lambda code, msg: decide(stop=None, trap_code=code, trap_message=msg), _trap_codes, st.text(max_size=30)),
    st.builds(lambda e, i: decide(stop=None, error=e, instantiating=i), st.text(max_size=30), st.booleans()),
    st.builds(lambda v: decide(stop=None, values=v), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=1)),
)
_limits = st.fixed_dictionaries(
    {"timeout-ms": st.integers(1, 10**6), "max-output-bytes": st.integers(0, 2**20)},
    optional={"max-memory-bytes": st.integers(0, 2**32), "fuel": st.integers(0, 2**40)},
)
_denial = st.fixed_dictionaries(
    {"import": st.sampled_from(["fs_read", "fs_write", "read"]), "path": st.text(max_size=8), "missing": st.text()}
)


@st.composite
def _host_built(draw: st.DrawFn) -> dict[str, Any]:
    result = dict(draw(_decided))
    started = draw(st.integers(0, 2**45))
    result.update(
        {
            "isolation": "wasmtime",
            "limits": draw(_limits),
            "engine": {"name": "wasmtime", "version": "50.0.1", "config": "wasmtime-50.0.1;epoch", "identity": "x"},
            "reads": draw(st.lists(cids, max_size=3)),
            "denials": draw(st.lists(_denial, max_size=2)),
            "started-at": started,
            "finished-at": started + draw(st.integers(0, 10**6)),
            "duration-ms": draw(st.integers(0, 10**6)),
        }
    )
    if draw(st.booleans()):
        result["fs-root-after"] = draw(cids)
    if draw(st.booleans()):
        result["fuel-consumed"] = draw(st.integers(0, 2**40))
    return result


@settings(max_examples=150, deadline=None)
@given(result=_host_built(), cap=caps, writes=write_lists)
def test_the_hosts_own_results_give_the_same_receipt_on_both_paths(
    result: dict[str, Any], cap: int, writes: list[tuple[str, bytes]]
) -> None:
    s = _fed(cap, writes)
    fast = _outcome(lambda: stream.finish(s, _SESS, _SPEC, result))
    assert fast == _outcome(lambda: _strict(s, _SESS, _SPEC, result))
    assert fast[0] == "ok"


@settings(max_examples=200, deadline=None)
@given(result=st.one_of(host_results(), host_results(well_typed=True)), cap=caps, writes=write_lists)
def test_any_host_result_is_accepted_or_refused_alike_on_both_paths(
    result: dict[str, Any], cap: int, writes: list[tuple[str, bytes]]
) -> None:
    s = _fed(cap, writes)
    assert _outcome(lambda: stream.finish(s, _SESS, _SPEC, result)) == _outcome(
        lambda: _strict(s, _SESS, _SPEC, result)
    )


@settings(max_examples=150, deadline=None)
@given(result=st.one_of(host_results(), host_results(well_typed=True), _host_built()))
def test_with_nothing_measured_the_measured_path_is_the_strict_path(result: dict[str, Any]) -> None:
    assert _outcome(lambda: receipt_measured(_SESS, _SPEC, namespace(result), {})) == _outcome(
        lambda: receipt(_SESS, _SPEC, result)
    )


def test_a_wrong_value_from_the_host_is_still_refused_on_the_measured_path() -> None:
    with pytest.raises(ModelError) as info:
        receipt_measured(_SESS, _SPEC, {"kuro/exit-code": 0, "kuro/reads": ["nope"]}, {"kuro/stdout": b""})
    assert info.value.reason == "invalid-receipt-value"


def test_undeclared_keys_are_dropped_from_the_measured_part_too() -> None:
    built = receipt_measured(
        _SESS, _SPEC, {"kuro/exit-code": 0}, {"kuro/stdout": b"hi", "kuro/pid": 7, "stdout": b"x", "kuro/type": "no"}
    )
    assert built["kuro/stdout"] == b"hi"
    assert built["kuro/type"] == "kuro/receipt"
    assert set(built) <= {"kuro/" + k for k in KEYS}
    assert "kuro/pid" not in built and "stdout" not in built


@pytest.mark.parametrize("sess", [None, "s1", {"kuro/session-id": "s1"}])
def test_the_measured_path_still_needs_a_session(sess: Any) -> None:
    with pytest.raises(ModelError) as info:
        receipt_measured(sess, _SPEC, {"kuro/exit-code": 0}, {})
    assert info.value.reason == "invalid-session"


@pytest.mark.parametrize("command", [["echo", "hi"], None, {"kuro/guest": GUEST_CID}, {**_SPEC, "kuro/args": [1.0]}])
def test_the_measured_path_still_needs_a_guest_spec(command: Any) -> None:
    with pytest.raises(ModelError) as info:
        receipt_measured(_SESS, command, {"kuro/exit-code": 0}, {})
    assert info.value.reason == "invalid-guest-spec"


def test_a_repeated_output_gets_the_same_cid_as_a_fresh_hash() -> None:
    for data in (b"", b"hello\n", b"x" * 1024, b"y" * 1025):
        s = _fed(1 << 20, [("stdout", data), ("stderr", data)])
        for _ in range(2):
            built = stream.finish(s, _SESS, _SPEC, {"exit-code": 0})
            assert built["kuro/stdout-cid"] == built["kuro/stderr-cid"] == raw_cid(data)


# ---- the value checks: the fast dispatch decides as the general rules do

_values = st.one_of(
    plain_values,
    st.integers(-(2**65), 2**65),
    st.lists(st.one_of(cids, st.text(max_size=3)), max_size=3),
    st.just(EMPTY_CID),
    st.binary(max_size=4).map(bytearray),
)


def _decision(check: Any) -> tuple[str, Any]:
    try:
        value = check()
    except ModelError as exc:
        return "refused", (exc.reason, str(exc))
    return "ok", (type(value), value)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(HOST_KEYS)), value=_values)
def test_a_host_value_is_decided_alike_by_the_fast_and_the_general_check(name: str, value: Any) -> None:
    key = "kuro/" + name
    expected = _decision(lambda: None if value is None else _typed_general(key, KEYS[name].kind, value))
    assert _decision(lambda: _typed(key, value)) == expected


@settings(max_examples=300, deadline=None)
@given(value=_values)
def test_plain_data_is_decided_alike_by_the_fast_and_the_general_path(value: Any) -> None:
    assert _decision(lambda: _plain(value, "kuro/x")) == _decision(lambda: _plain_general(value, "kuro/x"))


@pytest.mark.parametrize(("host", "measured"), [([("kuro/exit-code", 0)], {}), ({"kuro/exit-code": 0}, None)])
def test_the_measured_path_takes_only_mappings(host: Any, measured: Any) -> None:
    with pytest.raises(ModelError) as info:
        receipt_measured(_SESS, _SPEC, host, measured)
    assert info.value.reason == "invalid-receipt-value"


@settings(max_examples=150, deadline=None)
@given(result=_host_built(), cap=caps, writes=write_lists, chunk_bound=st.integers(0, 6))
def test_the_trusted_paths_give_the_checked_receipt_for_the_hosts_own_results(
    result: dict[str, Any], cap: int, writes: list[tuple[str, bytes]], chunk_bound: int
) -> None:
    # finish_trusted (and a Writer's receipt_namespaced, which never builds a Stream) skip re-checking the host's
    # values: for values the host builds, the receipt must be exactly finish()'s.
    s = stream.new(cap, max_chunks=chunk_bound)
    writer = stream.Writer(max_output_bytes=cap, max_chunks=chunk_bound)
    for name, data in writes:
        s, kept = stream.append(s, name, data)
        assert writer.append(name, data) is (kept is not None)
    assert writer.value() == s
    checked = _outcome(lambda: stream.finish(s, _SESS, _SPEC, result))
    assert checked == _outcome(lambda: stream.finish_trusted(s, _SESS, _SPEC, result))
    assert checked == _outcome(lambda: stream.finish_trusted(writer.value("exited"), _SESS, _SPEC, result))
    # the host's own run hands its keys over namespaced already (Job._finish): the same receipt, key order too
    assert checked == _outcome(lambda: writer.receipt_namespaced(_SESS, _SPEC, namespace(result)))
