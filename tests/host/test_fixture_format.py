"""The fixture format is a documented JSON Schema, and the runtime reads it exactly as the schema says.

``guests/fixtures/schema.json`` is the published format; CI validates every case file against it
with ``jsonschema`` (the reference implementation), and :func:`kuro_wasm.model.fixture.parse_case`
(what an installed ``kuro fixtures run`` uses, with no schema library) must accept and refuse the
same documents: checked here on every bundled case and on mutations of each.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.errors import FixtureError
from kuro_wasm.host.fixtures import bundled_dir, case_files, setup
from kuro_wasm.model.fixture import (
    CASE_KEYS,
    ENGINES,
    EXPECT_KEYS,
    GRANT_NAMES,
    MODE_NAMES,
    Generated,
    check,
    generated_files,
    parse_case,
)
from kuro_wasm.model.limits import LIMIT_NAMES
from kuro_wasm.model.receipt import OUTCOMES

SCHEMA_PATH = bundled_dir() / "schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
CASES = {p.stem: tomllib.loads(p.read_text(encoding="utf-8")) for p in case_files(bundled_dir())}


def _schema_accepts(data: Any) -> bool:
    return VALIDATOR.is_valid(data)


def _parser_accepts(data: Any) -> bool:
    try:
        parse_case("x", data)
    except FixtureError:
        return False
    return True


# ---- the schema itself


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_bundled_case_validates_against_the_schema(name: str) -> None:
    errors = sorted(VALIDATOR.iter_errors(CASES[name]), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


def test_the_schemas_keys_are_the_parsers_keys() -> None:
    props = SCHEMA["properties"]
    assert set(props) == set(CASE_KEYS)
    assert set(SCHEMA["required"]) == {k for k, required in CASE_KEYS.items() if required}
    assert set(props["expect"]["properties"]) == set(EXPECT_KEYS)
    assert set(props["expect"]["required"]) == {k for k, required in EXPECT_KEYS.items() if required}
    assert set(props["limits"]["properties"]) == set(LIMIT_NAMES)
    assert set(props["unsupported"]["properties"]) == set(ENGINES)


def test_the_schemas_vocabularies_are_the_hosts_tables() -> None:
    props = SCHEMA["properties"]
    assert props["mode"]["enum"] == list(MODE_NAMES)
    assert sorted(props["grant"]["items"]["enum"]) == sorted(GRANT_NAMES)
    assert props["expect"]["properties"]["outcome"]["enum"] == list(OUTCOMES)


# ---- the parser agrees with the schema


def _mutations(case: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Documents near ``case``: each differs by one edit a person could make by mistake (or on purpose)."""
    for key in list(case):
        gone = copy.deepcopy(case)
        del gone[key]
        yield f"without {key}", gone
    for key, wrong in [("description", ""), ("guest", 3), ("export", ["run"]), ("args", ["1"]), ("args", 4),
                       ("mode", "terminal-host"), ("mode", "safe"), ("grant", ["fs/everything"]), ("grant", "fs/read"),
                       ("grant", ["host/shell"]), ("stdin", 5), ("fs", {"a.txt": 1}), ("fs", ["a.txt"]),
                       ("fs_read_path", ""), ("limits", {"timeout_ms": 0}), ("limits", {"fuel": -1}),
                       ("limits", {"timeout_ms": 1.5}), ("limits", {"deadline": 5}), ("unsupported", {}),
                       ("unsupported", {"v8": ""}), ("unsupported", {"spidermonkey": "no"}),
                       ("descripton", "typo"), ("expect", []), ("fs_generated", [{"path": "f{i}", "count": 3}]),
                       ("fs_generated", [{"path": "f", "count": 3}]), ("fs_generated", [{"path": "f{i}", "count": 0}]),
                       ("fs_generated", [{"path": "f{i}", "count": 4097}]), ("fs_generated", {"path": "f{i}"}),
                       ("fs_generated", [{"path": "f{i}", "count": 2, "size": 1}]), ("fs_generated", [{"count": 2}]),
                       ("fs_generated", [{"path": "f{i}", "count": 2, "content": 7}])]:  # fmt: skip
        edited = copy.deepcopy(case)
        edited[key] = wrong
        yield f"{key} = {wrong!r}", edited
    for key, wrong in [("exit_code", "0"), ("exit_code", True), ("outcome", "fine"), ("stdout", 1),
                       ("timed_out", 1), ("truncated", "yes"), ("trap_kind", ""), ("reads", -1),
                       ("fuel_consumed", 1.0), ("denials", [{"import": "fs_read"}]),
                       ("denials", [{"import": "a", "capability": "b", "count": 1}]),
                       ("denials", [{"import": "a", "capability": "b", "why": "c"}]), ("fs_after", True),
                       ("fs_after", {"a": 1}), ("grant_aliases", {"repo/read": "fs/read"}),
                       ("stdout_byte", 1), ("fs_after_generated", [{"path": "f{i}", "count": 2}]),
                       ("fs_after_generated", [{"path": "f", "count": 2}]), ("fs_after_generated", [])]:  # fmt: skip
        edited = copy.deepcopy(case)
        edited["expect"][key] = wrong
        yield f"expect.{key} = {wrong!r}", edited
    for key in ("exit_code", "outcome"):
        edited = copy.deepcopy(case)
        del edited["expect"][key]
        yield f"expect without {key}", edited


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_parser_accepts_and_refuses_what_the_schema_does(name: str) -> None:
    assert _parser_accepts(CASES[name])
    disagreements = [
        (edit, _schema_accepts(doc), _parser_accepts(doc))
        for edit, doc in _mutations(CASES[name])
        if _schema_accepts(doc) != _parser_accepts(doc)
    ]
    assert disagreements == []


_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | st.text(max_size=3)


def test_an_env_name_that_is_empty_is_refused_by_both() -> None:
    doc = {**copy.deepcopy(CASES[sorted(CASES)[0]]), "env": {"": ""}}  # hypothesis found the parser took it
    assert not _schema_accepts(doc) and not _parser_accepts(doc)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(CASES)),
    st.sampled_from([*sorted(CASE_KEYS), "other"]),
    _scalars | st.lists(_scalars, max_size=2) | st.dictionaries(st.text(max_size=3), _scalars, max_size=2),
)
def test_any_one_value_replaced_is_judged_alike(name: str, key: str, value: Any) -> None:
    doc = copy.deepcopy(CASES[name])
    doc[key] = value
    assert _schema_accepts(doc) == _parser_accepts(doc), (key, value)


# ---- the parser's errors name the case and the key


@pytest.mark.parametrize(
    ("edit", "named"),
    [({"expect": {"exit_code": 0}}, "outcome"), ({"limits": {"deadline_ms": 5}}, "deadline_ms"),
     ({"grant": ["fs/everything"]}, "grant"), ({"descripton": "typo"}, "descripton")],
)  # fmt: skip
def test_a_bad_case_is_refused_with_its_name_and_the_key(edit: dict[str, Any], named: str) -> None:
    doc = {**copy.deepcopy(CASES["trap-unreachable"]), **edit}
    with pytest.raises(FixtureError, match=named) as info:
        parse_case("my-case", doc)
    assert "my-case" in str(info.value) and info.value.reference == "invalid-fixture"


_EXPECT_OK: dict[str, Any] = {"exit_code": 0, "outcome": "ok"}
_GENERATED_BASE: dict[str, Any] = {"description": "d", "guest": "fs-write", "export": "run", "expect": _EXPECT_OK}


@pytest.mark.parametrize(
    ("generated", "named"),
    [([{"path": "f", "count": 2}], "must contain {i}"), ([{"path": "f{i}", "count": 0}], "count"),
     ([{"path": "f{i}", "count": 4097}], "at most 4096"), ([{"path": "f{i}"}], "missing required key"),
     ([{"path": "f{i}", "count": 1, "mode": 1}], "unknown key"), ({"path": "f{i}", "count": 1}, "array"),
     ([{"path": "f{i}", "count": True}], "integer"), ([{"path": "f{i}", "count": 1, "content": 1}], "content"),
     ([{"path": f"t{t}/f{{i}}", "count": 1} for t in range(5)], "at most 4 tables"),
     ([{"path": "f{i}", "count": 1, "content": "x" * 1025}], "at most 1024 characters")],
)  # fmt: skip
def test_a_bad_generated_table_is_refused_naming_the_key(generated: Any, named: str) -> None:
    as_setup = {**_GENERATED_BASE, "fs_generated": generated}
    as_expected = {**_GENERATED_BASE, "expect": {**_EXPECT_OK, "fs_after_generated": generated}}
    for doc in (as_setup, as_expected):
        with pytest.raises(FixtureError, match=named) as info:
            parse_case("gen-case", doc)
        assert "gen-case" in str(info.value) and not _schema_accepts(doc)


def test_generated_files_replace_every_index_and_a_path_named_twice_is_refused() -> None:
    table = {"path": "d{i}/f{i}", "count": 3, "content": "{i}+{i}"}
    doc = {**_GENERATED_BASE, "fs": {"f1": "mine"}, "fs_generated": [table]}
    case = parse_case("gen", doc)
    assert generated_files("gen", "fs_generated", case.fs_generated, case.fs) == {
        "f1": b"mine", "d0/f0": b"0+0", "d1/f1": b"1+1", "d2/f2": b"2+2"
    }  # fmt: skip
    clash = parse_case("gen", {**doc, "fs_generated": [{"path": "f{i}", "count": 2}]})
    with pytest.raises(FixtureError, match="'f1' is named twice"):
        setup(clash, bundled_dir())
    with pytest.raises(FixtureError, match="named twice"):
        generated_files("gen", "fs_generated", (Generated("a{i}", 2), Generated("a{i}", 1)), {})


def test_fs_after_false_with_generated_files_after_is_a_contradiction() -> None:
    expect = {**_EXPECT_OK, "fs_after": False, "fs_after_generated": [{"path": "f{i}", "count": 1}]}
    doc = {**_GENERATED_BASE, "expect": expect}
    with pytest.raises(FixtureError, match="fs_after = false"):
        parse_case("gen", doc)
    assert not _schema_accepts(doc)
    expect["fs_after_generated"] = []
    assert _parser_accepts(doc) and _schema_accepts(doc)


def test_the_files_after_a_run_are_judged_against_the_generated_tables_too() -> None:
    expect = {**_EXPECT_OK, "fs_after": {"x": "X"}, "fs_after_generated": [{"path": "f{i}", "count": 2}]}
    case = parse_case("gen", {**_GENERATED_BASE, "expect": expect})
    wrote = {"kuro/type": "kuro/receipt", "kuro/fs-root-cid": "bafyrei-before", "kuro/fs-root-after": "bafyrei-after"}

    def problems(files: dict[str, bytes], receipt: dict[str, Any] = wrote) -> list[str]:
        return [p for p in check(case, receipt, files) if p.startswith("fs_after")]

    assert problems({"x": b"X", "f0": b"", "f1": b""}) == []
    (wrong,) = problems({"x": b"X", "f0": b"", "f1": b"?", "f2": b""})
    assert "2 path(s) differ" in wrong and "'f1': (b'', b'?')" in wrong and "'f2': (None, b'')" in wrong
    assert problems({"f0": b"", "f1": b""}) != []  # the fs_after table counts too
    no_write = {"kuro/type": "kuro/receipt", "kuro/fs-root-cid": "bafyrei-before"}
    assert problems({}, no_write) == ["fs_after: expected a new fs root, got None"]


@pytest.mark.parametrize("data", [None, [], "guest = 1", 42])
def test_a_document_that_is_not_a_table_is_refused(data: Any) -> None:
    with pytest.raises(FixtureError):
        parse_case("x", data)


def test_the_schema_ships_beside_the_cases_it_describes() -> None:
    assert SCHEMA_PATH.parent == bundled_dir()
    assert Path(SCHEMA["$id"]).name == "schema.json"


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(CASES)),
    st.sampled_from([*sorted(EXPECT_KEYS), "other"]),
    _scalars
    | st.lists(_scalars | st.dictionaries(st.text(max_size=10), _scalars, max_size=3), max_size=2)
    | st.dictionaries(st.text(max_size=3), _scalars | st.lists(st.text(max_size=3), max_size=2), max_size=2),
)
def test_any_one_expected_value_replaced_is_judged_alike(name: str, key: str, value: Any) -> None:
    doc = copy.deepcopy(CASES[name])
    doc["expect"][key] = value
    assert _schema_accepts(doc) == _parser_accepts(doc), (key, value)


def test_a_case_nested_too_deeply_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    from kuro_wasm.host.fixtures import load_case

    deep = tmp_path / "deep.toml"
    deep.write_text('guest = "component:typed"\nexport = "echo-list"\nargs = ' + "[" * 100_000 + "\n")
    with pytest.raises(FixtureError, match="deep"):
        load_case(deep)
