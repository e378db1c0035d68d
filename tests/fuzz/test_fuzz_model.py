"""Fuzzing the model: session, guest and receipt take anything and answer with a value or a ModelError, nothing else."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.cid import raw_cid
from kuro_fs.dagcbor import cid_of
from kuro_wasm.errors import ModelError
from kuro_wasm.model.operation import DEFAULT_LIMITS, run_limits
from kuro_wasm.model.receipt import HOST_KEYS, KEYS, OUTCOMES, receipt, receipt_cid, to_json
from kuro_wasm.model.sessions import CAPABILITIES, MODES, guest, is_guest_spec, session

CID = raw_cid(b"guest")
ROOT = "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.text(alphabet=st.characters(codec=None), max_size=4),
    st.binary(max_size=8),
    st.just(CID),
    st.just(ROOT),
    st.just(object()),
)
anything = st.recursive(
    _scalars,
    lambda c: (
        st.lists(c, max_size=3) | st.tuples(c) | st.dictionaries(st.text(max_size=4) | st.integers(), c, max_size=3)
    ),
    max_leaves=12,
)


def _typed(call: Any) -> Any:
    try:
        return call()
    except ModelError as exc:
        assert isinstance(exc.reason, str) and exc.reason
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    anything | st.text(max_size=10),
    anything | st.just(ROOT) | st.just(CID),
    anything | st.sampled_from(sorted(MODES)),
    anything | st.lists(st.sampled_from(sorted(CAPABILITIES)) | st.text(max_size=5), max_size=4),
    anything | st.just("."),
    anything,
)
def test_session_of_anything_is_a_session_or_a_model_error(
    id: Any, root: Any, mode: Any, grant: Any, cwd: Any, signed: Any
) -> None:
    _typed(lambda: session(id, root, mode, grant, cwd, signed_opt_in=signed))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    anything | st.just(CID),
    anything | st.sampled_from(["run", ""]),
    anything | st.lists(st.integers(min_value=-(1 << 65), max_value=1 << 65) | st.floats(), max_size=4),
)
def test_guest_of_anything_is_a_spec_or_a_model_error(cid: Any, export: Any, args: Any) -> None:
    spec = _typed(lambda: guest(cid, export, args))
    if spec is not None:
        _assert_canonical(spec["kuro/args"])
        assert is_guest_spec(spec)
        cid_of(spec)  # dag-cbor can encode every spec


def _assert_canonical(value: Any) -> None:
    """Spec args are plain data: no non-finite float, no whole one JavaScript writes as an int (one value, one CID)."""
    if isinstance(value, list):
        for item in value:
            _assert_canonical(item)
    elif isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        for item in value.values():
            _assert_canonical(item)
    elif isinstance(value, float):
        assert math.isfinite(value) and not (value.is_integer() and abs(value) <= 2**53 - 1)
    else:
        assert value is None or isinstance(value, (bool, int, str, bytes))


_host_keys = st.sampled_from(sorted(HOST_KEYS) + [f"kuro/{k}" for k in sorted(HOST_KEYS)] + ["bogus", "kuro/type"])
_by_kind: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=6),
    "int": st.integers(min_value=-(1 << 65), max_value=1 << 65),
    "count": st.integers(min_value=-2, max_value=1 << 65),
    "bool": st.booleans(),
    "bytes": st.binary(max_size=8),
    "cid": st.sampled_from([CID, ROOT, "bafy"]),
    "cids": st.lists(st.sampled_from([CID, ROOT, "x"]), max_size=2),
    "strs": st.lists(st.text(max_size=3), max_size=2),
    "data": anything,
}
_well_kinded = st.one_of(
    [st.tuples(st.just(k), _by_kind[spec.kind]) for k, spec in sorted(KEYS.items()) if spec.host]
).map(lambda kv: {kv[0]: kv[1]})
_results = st.one_of(
    st.dictionaries(_host_keys, anything | st.sampled_from(sorted(OUTCOMES)) | st.integers(-3, 200), max_size=8),
    st.builds(
        lambda outcome, code, extra, more: {
            **{k: v for d in extra for k, v in d.items()},
            **more,
            "outcome": outcome,
            "exit-code": OUTCOMES[outcome] if OUTCOMES[outcome] is not None and code % 4 else code,
        },
        st.sampled_from(sorted(OUTCOMES)),
        st.integers(-3, 300),
        st.lists(_well_kinded, max_size=6),
        st.dictionaries(_host_keys, anything, max_size=1),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["session", "junk"]),
    st.sampled_from(["spec", "junk"]),
    _results | anything,
    st.one_of(anything, st.just(None)),
)
def test_receipt_of_any_host_result_is_a_closed_receipt_or_a_model_error(
    sess_kind: str, command_kind: str, result: Any, junk: Any
) -> None:
    sess = session("s1", ROOT, "terminal-repo") if sess_kind == "session" else junk
    command = guest(CID, "run", [1]) if command_kind == "spec" else junk
    got = _typed(lambda: receipt(sess, command, result))
    if got is not None:
        assert got["kuro/type"] == "kuro/receipt"
        assert all(isinstance(k, str) and k.startswith("kuro/") for k in got)
        assert None not in got.values()
        receipt_cid(got)  # an accepted receipt always encodes: dag-cbor and JSON
        to_json(got)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(DEFAULT_LIMITS)), anything | st.sampled_from([2**64 - 1, 2**64, 2**70, -1, 0]))
def test_a_ledger_run_limit_outside_the_u64_range_is_an_invalid_limit(name: str, value: Any) -> None:
    try:
        limits = run_limits({name: value})
    except ModelError as exc:
        assert exc.reason == "invalid-limit"
        return
    got = limits[name]
    assert got is None or (isinstance(got, int) and not isinstance(got, bool) and 0 <= got < 2**64)
