"""The judge of every fixture case (:func:`kuro_wasm.model.fixture.check`) sees each way a receipt can be wrong.

A judge that let one key through would make every case stating that key pass whatever the host did —
the fixture suite, both backends and the parity runs all lean on it. So here each expected key is
taken from a bundled case that states it, the case is run once, and its true receipt (which passes) is
changed in just the field the key governs: the judge must then name the key. The fields judged on
every case, stated or not (timed-out, truncated, trap, result, fuel, denials, limits, undeclared
keys), are changed on a case that states none of them. (``fs_after`` is judged in
tests/host/test_fixture_format.py.)
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from kuro_wasm.host.fixtures import bundled_dir, case_files, load_case, run_case
from kuro_wasm.model.fixture import EXPECT_KEYS, Case, check

CASES = {p.stem: load_case(p) for p in case_files(bundled_dir())}

#: expected key → the receipt fields it governs (each changed alone must be seen).
GOVERNS: dict[str, tuple[str, ...]] = {
    "exit_code": ("kuro/exit-code",),
    "outcome": ("kuro/outcome",),
    "stdout": ("kuro/stdout", "kuro/stdout-cid"),
    "stderr": ("kuro/stderr", "kuro/stderr-cid"),
    "stdout_bytes": ("kuro/stdout-bytes",),
    "timed_out": ("kuro/timed-out?",),
    "truncated": ("kuro/truncated?",),
    "capped_by": ("kuro/capped-by",),
    "trap_kind": ("kuro/trap",),
    "error_contains": ("kuro/error",),
    "denials": ("kuro/denials",),
    "reads": ("kuro/reads",),
    "result": ("kuro/result",),
    "fuel_consumed": ("kuro/fuel-consumed",),
    "effective_capabilities": ("kuro/effective-capabilities",),
    "grant_aliases": ("kuro/grant-aliases",),
}
JUDGED_ELSEWHERE = {"fs_after", "fs_after_generated"}
STATED = sorted(k for k in GOVERNS if any(k in case.expect for case in CASES.values()))


def _changed(value: Any) -> Any:
    """``value`` made different, of the same kind (what a wrong host would have said)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, bytes):
        return value + b"?"
    if isinstance(value, list):
        return value[:-1] if value else ["bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"]
    if isinstance(value, dict):
        if "kind" in value:  # a trap: another kind, the same message
            return {**value, "kind": value["kind"] + "?"}
        return {**value, "extra": "?"}
    raise AssertionError(f"no change defined for {value!r}")


def _passing(name: str) -> tuple[Case, dict[str, Any]]:
    case = CASES[name]
    result = run_case(case, bundled_dir())
    assert result.status == "pass", result.problems
    assert result.receipt is not None
    return case, result.receipt


def _judged(case: Case, receipt: dict[str, Any]) -> list[str]:
    assert "fs_after" not in case.expect and "fs_after_generated" not in case.expect
    return check(case, receipt)


def test_every_expected_key_is_governed_here_or_judged_elsewhere() -> None:
    assert set(EXPECT_KEYS) == set(GOVERNS) | JUDGED_ELSEWHERE
    assert set(GOVERNS) - set(STATED) <= {"result"}  # the bundled cases state every key but the components' one


@pytest.mark.parametrize("key", STATED)
def test_a_receipt_wrong_in_a_stated_key_fails_its_case(key: str) -> None:
    stating = sorted(
        (name for name, case in CASES.items() if key in case.expect and "fs_after" not in case.expect),
        key=lambda name: ("deadline" in name, name),  # a deadline case costs its deadline
    )
    assert stating, f"no bundled case without fs_after states {key}"
    case, receipt = _passing(stating[0])
    assert _judged(case, receipt) == []
    for field in GOVERNS[key]:
        wrong = copy.deepcopy(receipt)
        if key == "error_contains":
            wrong[field] = ""
        else:
            assert field in receipt, (stating[0], field)
            wrong[field] = _changed(receipt[field])
        problems = _judged(case, wrong)
        assert any(p.startswith(key) for p in problems), (field, problems)


@pytest.fixture(scope="module")
def plain() -> tuple[Case, dict[str, Any]]:
    """A case stating none of the always-judged keys, and its passing receipt."""
    name = "hello-writes-stdout-and-stderr"
    case = CASES[name]
    assert not {"timed_out", "truncated", "trap_kind", "result", "fuel_consumed"} & set(case.expect)
    return _passing(name)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("kuro/timed-out?", True, "timed_out"),
        ("kuro/truncated?", True, "truncated"),
        ("kuro/trap", {"kind": "unreachable", "message": "wasm trap: unreachable"}, "trap"),
        ("kuro/result", 7, "result"),
        ("kuro/fuel-consumed", 100, "fuel_consumed"),
        ("kuro/denials", [{"kuro/import": "fs_read", "kuro/capability": "fs/read"}], "denials"),
        ("kuro/limits", {"timeout_ms": 1}, "limits"),
        ("kuro/bogus", 1, "undeclared receipt keys"),
        ("kuro/reads", "not a list", "kuro/reads and kuro/denials must be lists"),
        ("kuro/type", "kuro/denial", "no receipt"),
    ],
)
def test_a_receipt_wrong_in_an_unstated_but_always_judged_field_fails(
    plain: tuple[Case, dict[str, Any]], field: str, value: Any, named: str
) -> None:
    case, receipt = plain
    assert _judged(case, receipt) == []
    problems = _judged(case, {**receipt, field: value})
    assert any(p.startswith(named) for p in problems), problems


def test_a_stated_result_is_judged_too(plain: tuple[Case, dict[str, Any]]) -> None:
    """(No bundled core-module case states ``result``: the component cases do, so it is stated here.)"""
    case, receipt = plain
    stating = dataclasses.replace(case, expect={**case.expect, "result": {"x": [1, 2]}})
    assert _judged(stating, {**receipt, "kuro/result": {"x": [1, 2]}}) == []
    for wrong in ({"x": [1, 3]}, {"x": [1, 2], "y": 0}, None):
        problems = _judged(stating, {**receipt, "kuro/result": wrong})
        assert any(p.startswith("result") for p in problems), problems
