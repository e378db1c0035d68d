"""A batch line as a value: every field checked, every refusal names its field, never anything but ModelError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuro_wasm.errors import ModelError
from kuro_wasm.model.invocation import FIELDS, Invocation, invocation
from kuro_wasm.model.limits import Limits

CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
ROOT = "bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def _line(**extra: Any) -> dict[str, Any]:
    return {"guest": CID, "export": "run", **extra}


def _parse(data: Any) -> Invocation:
    return invocation(data, session_id="b-1", default_fs=CID)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2], "is a JSON object"),
        ({"export": "run"}, "missing guest"),
        ({"guest": CID}, "missing export"),
        ({}, "missing guest and export"),
        (_line(timeout=5), "did you mean 'timeout_ms'"),
        (_line(max_output=5), "did you mean 'max_output_bytes'"),
        (_line(env={"A=B": "1"}), "env name 'A=B'"),
        (_line(argv0=7), "argv0 must be a string"),
        (_line(env=["x"]), "env must be an object"),
        (_line(fs=7), "fs must be a root CID string"),
        (_line(grant="fs/read"), "grant must be a list of strings"),
        (_line(stdin=5), "stdin must be text"),
        (_line(op_id="  "), "operation id"),
        (_line(op_id="a\nb"), "control characters"),
        (_line(guest="not-a-cid"), "guest is not a CID"),
        (_line(args="1 2"), "args must be a list"),
        (_line(timeout_ms=0), "timeout_ms must be an int"),
        (_line(fuel=-1), "fuel must be an int"),
        (_line(mode="root"), "unknown terminal mode"),
        (_line(grant=["fs/everything"]), "unknown capability"),
        (_line(mode="terminal-host"), "signed opt-in"),
    ],
)
def test_a_bad_line_is_refused_naming_what_is_wrong(data: Any, says: str) -> None:
    with pytest.raises(ModelError, match=says):
        _parse(data)


def test_a_full_line_is_read_with_the_command_lines_option_names() -> None:
    inv = _parse(
        _line(
            args=[1, 2.0],
            mode="terminal-repo",
            grant=["guest/invoke", "fs/read"],
            fs=ROOT,
            stdin="hi",
            timeout_ms=50,
            max_output_bytes=10,
            max_memory_bytes=65536,
            fuel=1000,
            op_id="job-1",
            env={},
        )
    )
    assert inv.session.fs_root_cid == ROOT and inv.session.grant == {"guest/invoke", "fs/read"}
    assert inv.command["kuro/args"] == [1, 2] and inv.stdin == b"hi" and inv.op_id == "job-1"
    assert inv.limits == Limits(timeout_ms=50, max_output_bytes=10, max_memory_bytes=65536, fuel=1000)
    assert inv.run_options()["fs"] == ROOT and inv.run_options()["timeout_ms"] == 50


def test_stdin_may_be_bytes_the_dag_json_way_and_defaults_are_the_hosts() -> None:
    inv = _parse(_line(stdin=b"\xff\x00"))
    assert inv.stdin == b"\xff\x00" and inv.limits == Limits() and inv.session.fs_root_cid == CID
    assert set(FIELDS) >= {"guest", "export", "args", "env", "mode", "grant", "fs", "stdin", "timeout_ms", "op_id"}


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from([*FIELDS, "timeout", "x"]), _values, max_size=6))
def test_any_line_is_an_invocation_or_a_model_error(data: dict[str, Any]) -> None:
    try:
        _parse({"guest": CID, "export": "run", **data} if len(data) % 2 else data)
    except ModelError:
        pass
