"""The closed receipt: declared keys, outcome table, namespacing, CID, JSON."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from model_strategies import EMPTY_CID, GUEST_CID, host_results

from kuro_fs.cid import raw_cid
from kuro_fs.dagcbor import cid_of, decode, encode
from kuro_wasm.errors import ModelError
from kuro_wasm.model.receipt import HOST_KEYS, KEYS, OUTCOMES, exit_code_for, from_json, receipt, receipt_cid, to_json
from kuro_wasm.model.sessions import Session, guest, session

DECLARED = {"kuro/" + k for k in KEYS}

# ---- bad input first


@pytest.mark.parametrize("result", [{}, {"exit-code": None}, {"exit-code": "0"}, {"exit-code": 1.5},
                                    {"exit-code": 0.0}, {"exit-code": True}, {"exit-code": [0]}])  # fmt: skip
def test_exit_code_must_be_an_int(result: dict[str, Any], sess: Session, spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        receipt(sess, spec, result)
    assert info.value.reason == "exit-code-not-int"


@pytest.mark.parametrize(
    "result",
    [{"exit-code": 0, "outcome": "crashed"}, {"exit-code": 1, "outcome": "ok"}, {"exit-code": 0, "outcome": "exit"},
     {"exit-code": 1, "outcome": "timeout"}, {"exit-code": 124, "outcome": "trap"}, {"exit-code": 0, "outcome": 3}],
)  # fmt: skip
def test_an_outcome_must_agree_with_its_exit_code(result: dict[str, Any], sess: Session, spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        receipt(sess, spec, result)
    assert info.value.reason == "invalid-outcome"


@pytest.mark.parametrize("command", [["echo", "hi"], "run", None, {"kuro/guest": GUEST_CID}])
def test_a_receipt_is_only_for_a_guest_spec(command: Any, sess: Session) -> None:
    with pytest.raises(ModelError):
        receipt(sess, command, {"exit-code": 0})


@pytest.mark.parametrize(
    ("key", "value"),
    [("stdout-bytes", -1), ("stdout-bytes", "3"), ("truncated?", "yes"), ("truncated?", 1), ("stdout-cid", "Qmfoo"),
     ("reads", [EMPTY_CID, "nope"]), ("reads", EMPTY_CID), ("stdout", 5), ("limits", {"fuel": {1, 2}}),
     ("limits", {"x": math.nan}), ("engine", object()), ("limits", {1: 2}), ("isolation", 3), ("started-at", 1.5),
     ("fuel-consumed", 2**70)],
)  # fmt: skip
def test_a_declared_key_with_a_value_of_the_wrong_kind_is_refused(
    key: str, value: Any, sess: Session, spec: dict[str, Any]
) -> None:
    with pytest.raises(ModelError):
        receipt(sess, spec, {"exit-code": 0, key: value})


def test_receipt_needs_a_session_and_a_mapping_result(sess: Session, spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError):
        receipt(sess.to_data(), spec, {"exit-code": 0})  # type: ignore[arg-type]
    with pytest.raises(ModelError):
        receipt(sess, spec, [("exit-code", 0)])  # type: ignore[arg-type]


# ---- the table


def test_the_outcome_table_is_the_documented_one() -> None:
    assert dict(OUTCOMES) == {
        "ok": 0, "exit": None, "trap": 134, "timeout": 124, "fuel-exhausted": 124, "output-capped": 125,
        "cancelled": 130, "abandoned": 129, "load-error": 126, "guest-not-found": 127, "host-error": 70,
        "worker-died": 137,
    }  # fmt: skip
    assert exit_code_for("output-capped") == 125
    with pytest.raises(ModelError):
        exit_code_for("exit")


def test_the_declared_keys_include_the_issues_list() -> None:
    wanted = """session-id mode fs-root-cid command guest export args effective-capabilities exit-code outcome stdout
    stderr stdout-cid stderr-cid stdout-bytes stderr-bytes dropped-bytes truncated? timed-out? duration-ms started-at
    finished-at error trap fs-root-after reads denials fuel-consumed limits engine isolation""".split()
    assert set(wanted) <= set(KEYS)
    assert {"session-id", "mode", "command", "guest", "effective-capabilities", "type"}.isdisjoint(HOST_KEYS)


@pytest.mark.parametrize("outcome", sorted(o for o, code in OUTCOMES.items() if code is not None))
def test_every_fixed_outcome_makes_a_receipt_with_its_exit_code(
    outcome: str, sess: Session, spec: dict[str, Any]
) -> None:
    r = receipt(sess, spec, {"exit-code": OUTCOMES[outcome], "outcome": outcome})
    assert (r["kuro/outcome"], r["kuro/exit-code"]) == (outcome, OUTCOMES[outcome])


def test_an_abandoned_run_may_state_its_real_exit_code(sess: Session, spec: dict[str, Any]) -> None:
    assert receipt(sess, spec, {"exit-code": 137, "outcome": "abandoned"})["kuro/exit-code"] == 137


def test_a_run_whose_worker_died_states_128_plus_the_signal(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 134, "outcome": "worker-died", "worker": {"signal": "SIGABRT"}})
    assert (r["kuro/exit-code"], r["kuro/worker"]) == (134, {"signal": "SIGABRT"})


def test_a_missing_outcome_is_ok_for_zero_and_exit_otherwise(sess: Session, spec: dict[str, Any]) -> None:
    assert receipt(sess, spec, {"exit-code": 0})["kuro/outcome"] == "ok"
    assert receipt(sess, spec, {"exit-code": 3})["kuro/outcome"] == "exit"
    assert receipt(sess, spec, {"exit-code": -1})["kuro/outcome"] == "exit"


# ---- shape


def test_a_receipt_carries_the_session_command_and_grant(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0})
    assert r == {
        "kuro/type": "kuro/receipt",
        "kuro/session-id": "s1",
        "kuro/mode": "terminal-repo",
        "kuro/fs-root-cid": EMPTY_CID,
        "kuro/cwd": ".",
        "kuro/command": spec,
        "kuro/guest": GUEST_CID,
        "kuro/export": "run",
        "kuro/args": [40, 2],
        "kuro/effective-capabilities": ["fs/ls", "fs/read", "guest/invoke", "stdin/read"],
        "kuro/isolation": "none",
        "kuro/exit-code": 0,
        "kuro/outcome": "ok",
    }


def test_a_grant_given_in_the_originals_names_is_in_host_names_with_the_aliases_beside_it(
    spec: dict[str, Any],
) -> None:
    sess = session("s1", EMPTY_CID, grant=["guest/invoke", "repo/read", "net/fetch"])
    r = receipt(sess, spec, {"exit-code": 0})
    assert r["kuro/effective-capabilities"] == ["fs/ls", "fs/read", "guest/invoke"]
    assert r["kuro/grant-aliases"] == {"net/fetch": [], "repo/read": ["fs/ls", "fs/read"]}
    assert decode(encode(r)) == r


def test_a_grant_in_host_names_only_has_no_alias_key(sess: Session, spec: dict[str, Any]) -> None:
    assert "kuro/grant-aliases" not in receipt(sess, spec, {"exit-code": 0})


def test_the_host_cannot_claim_aliases_the_session_did_not_use(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0, "grant-aliases": {"net/fetch": ["net/fetch"]}})
    assert "kuro/grant-aliases" not in r


def test_result_keys_are_namespaced_on_the_way_in(sess: Session, spec: dict[str, Any]) -> None:
    cid = raw_cid(b"hi\n")
    r = receipt(sess, spec, {"exit-code": 0, "stdout": b"hi\n", "stdout-cid": cid, "duration-ms": 12,
                             "timed-out?": False, "kuro/stderr": b""})  # fmt: skip
    assert (r["kuro/stdout"], r["kuro/stdout-cid"], r["kuro/duration-ms"], r["kuro/timed-out?"]) == (
        b"hi\n", cid, 12, False)  # fmt: skip
    assert r["kuro/stderr"] == b""
    assert "stdout" not in r
    assert all(k.startswith("kuro/") for k in r)


def test_undeclared_and_foreign_result_keys_are_dropped(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0, "pid": 4242, "secret-token": "hunter2", "foo/stdout": b"x",
                             "kuro/secret": 1, 7: "seven", "kuro.fs/root": EMPTY_CID})  # type: ignore[dict-item]  # fmt: skip
    assert set(r) == {"kuro/" + k for k in ("type", "session-id", "mode", "fs-root-cid", "cwd", "command", "guest",
                                            "export", "args", "effective-capabilities", "isolation", "exit-code",
                                            "outcome")}  # fmt: skip


def test_the_host_cannot_override_what_the_session_and_command_say(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0, "session-id": "evil", "kuro/mode": "terminal-host", "guest": EMPTY_CID,
                             "effective-capabilities": ["host/shell"], "type": "kuro/denial"})  # fmt: skip
    assert (r["kuro/session-id"], r["kuro/mode"], r["kuro/guest"], r["kuro/type"]) == (
        "s1", "terminal-repo", GUEST_CID, "kuro/receipt")  # fmt: skip
    assert r["kuro/effective-capabilities"] == sess.effective_capabilities


def test_isolation_is_always_present_and_a_host_value_survives(sess: Session, spec: dict[str, Any]) -> None:
    assert receipt(sess, spec, {"exit-code": 0})["kuro/isolation"] == "none"
    assert receipt(sess, spec, {"exit-code": 0, "isolation": None})["kuro/isolation"] == "none"
    assert receipt(sess, spec, {"exit-code": 0, "isolation": "wasmtime"})["kuro/isolation"] == "wasmtime"
    assert receipt(sess, spec, {"exit-code": 0, "kuro/isolation": "microvm"})["kuro/isolation"] == "microvm"


def test_a_none_result_value_leaves_the_key_out(sess: Session, spec: dict[str, Any]) -> None:
    assert "kuro/error" not in receipt(sess, spec, {"exit-code": 0, "error": None})


def test_the_namespaced_spelling_wins_over_the_bare_one(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"kuro/error": "namespaced", "error": "bare", "exit-code": 1})
    assert r["kuro/error"] == "namespaced"


def test_values_are_normalised_to_plain_canonical_data(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0, "limits": {"timeout-ms": 1000.0, "scale": (1, 2.5)},
                             "stdout": bytearray(b"ab"), "stderr": "é", "duration-ms": 3.0})  # fmt: skip
    assert r["kuro/limits"] == {"timeout-ms": 1000, "scale": [1, 2.5]}
    assert type(r["kuro/limits"]["timeout-ms"]) is int and type(r["kuro/duration-ms"]) is int
    assert (r["kuro/stdout"], r["kuro/stderr"]) == (b"ab", "é".encode())
    assert decode(encode(r)) == r


def test_a_receipt_carries_reads_denials_and_the_root_after(sess: Session, spec: dict[str, Any]) -> None:
    after = raw_cid(b"new root")
    denials = [{"kuro/import": "fs_write", "kuro/reason": "missing-capability", "kuro/path": "a.txt"}]
    r = receipt(sess, spec, {"exit-code": 0, "reads": (EMPTY_CID,), "denials": denials, "fs-root-after": after,
                             "fuel-consumed": 1234, "engine": {"name": "wasmtime", "version": "50.0.0"}})  # fmt: skip
    assert (r["kuro/reads"], r["kuro/denials"], r["kuro/fs-root-after"]) == ([EMPTY_CID], denials, after)


# ---- identity and JSON


def test_equal_receipts_have_equal_cids_and_any_change_changes_it(sess: Session, spec: dict[str, Any]) -> None:
    result = {"exit-code": 0, "stdout": b"hi", "started-at": 1, "finished-at": 13, "duration-ms": 12}
    a = receipt(sess, spec, result)
    b = receipt(session("s1", EMPTY_CID), guest(GUEST_CID, "run", [40.0, 2]), dict(reversed(result.items())))
    assert receipt_cid(a) == receipt_cid(b) == cid_of(a)
    assert receipt_cid(a).startswith("bafyrei")
    assert receipt_cid(receipt(sess, spec, {**result, "exit-code": 1})) != receipt_cid(a)


def test_json_round_trip_keeps_bytes_even_invalid_utf8(sess: Session, spec: dict[str, Any]) -> None:
    r = receipt(sess, spec, {"exit-code": 0, "stdout": b"\xff\xfe ok", "stderr": b"", "limits": {"x": 0.5}})
    text = to_json(r)
    assert json.loads(text)["kuro/stdout"] == {"/": {"bytes": "//4gb2s"}}
    assert from_json(text) == r


def test_from_json_refuses_malformed_base64() -> None:
    with pytest.raises(ValueError):
        from_json('{"a": {"/": {"bytes": "@@@"}}}')


# ---- properties


@settings(max_examples=200, deadline=None)
@given(host_results())
def test_whatever_the_host_passes_a_receipt_is_closed_or_refused(result: dict[str, Any]) -> None:
    sess = session("s1", EMPTY_CID)
    spec = guest(GUEST_CID, "run", [1])
    try:
        r = receipt(sess, spec, result)
    except ModelError:
        return
    assert set(r) <= DECLARED
    assert r["kuro/isolation"] is not None
    assert receipt_cid(r) == cid_of(decode(encode(r)))


@settings(max_examples=150, deadline=None)
@given(host_results(well_typed=True))
def test_a_well_typed_host_result_always_makes_an_encodable_receipt(result: dict[str, Any]) -> None:
    r = receipt(session("s1", EMPTY_CID), guest(GUEST_CID, "run"), result)
    assert set(r) <= DECLARED and "kuro/isolation" in r and "kuro/outcome" in r
    assert decode(encode(r)) == r
    assert from_json(to_json(r)) == r


def test_a_host_value_nested_past_any_encoding_is_a_model_error_not_a_recursion_error(
    sess: Session, spec: dict[str, Any]
) -> None:
    from kuro_wasm.model.receipt import host_value, receipt_measured

    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for build in (
        lambda: receipt(sess, spec, {"exit-code": 0, "trap": deep}),
        lambda: receipt_measured(sess, spec, {"kuro/exit-code": 0, "kuro/result": deep}, {}),
        lambda: host_value("kuro/engine", deep),
    ):
        with pytest.raises(ModelError) as info:
            build()
        assert info.value.reason == "unencodable-value"
