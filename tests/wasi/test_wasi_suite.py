"""The wasi-testsuite subset (26 programs, C and AssemblyScript) passes under every WASI runner.

Each spec is read strictly (``wasi_suite``); each program runs on a private copy of its root folder;
a runner passes a test when the exit code matches and the output starts with the expected text, and
every runner other than the reference must also leave exactly the reference's tree (same CID).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from wasi_suite import SpecError, SuiteSpec, cleanup_names, load_suite, parse_spec, verdict
from wasikit import RUNNERS, SUITE, WasiOutcome, differences, run_builtin, tree_cid

SPECS = load_suite()
BAD_SPECS = json.loads((Path(__file__).parent / "bad_specs.json").read_text(encoding="utf-8"))


def reference(spec: SuiteSpec) -> WasiOutcome:
    return _reference(spec.name)


@functools.cache
def _reference(name: str) -> WasiOutcome:
    return run_builtin(next(s for s in SPECS if s.name == name).case())


def test_the_vendored_suite_holds_the_26_programs() -> None:
    assert len(SPECS) == 26
    assert {s.name.split("/")[0] for s in SPECS} == {"c", "assemblyscript"}


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_every_suite_program_passes(runner: str, spec: SuiteSpec) -> None:
    outcome = RUNNERS[runner](spec.case())
    assert verdict(spec, outcome) == []
    assert differences(reference(spec), outcome) == []


def test_runs_never_touch_the_suite_folder() -> None:
    folder = SUITE / "c" / "fs-tests.dir"
    before = tree_cid(folder)
    for spec in SPECS:
        if spec.root is not None:
            run_builtin(spec.case())
    assert tree_cid(folder) == before
    assert cleanup_names({str(p.relative_to(folder)): None for p in folder.rglob("*")}) == []


def test_only_the_append_test_leaves_a_cleanup_file_behind() -> None:
    left = {s.name: cleanup_names(reference(s).files) for s in SPECS if s.root is not None}
    assert left.pop("c/pwrite-with-append") == ["pwrite.cleanup"]
    assert all(names == [] for names in left.values()), left


def test_the_filesystem_tests_fail_without_their_root() -> None:
    """The suite can fail: a runner that preopens nothing fails every test that needs a directory."""
    needing = [s for s in SPECS if s.root is not None]
    assert len(needing) == 7
    for spec in needing:
        outcome = run_builtin(replace(spec.case(), root=None))
        assert verdict(spec, outcome) != [], spec.name


def test_a_wrong_exit_code_or_output_is_reported() -> None:
    spec = next(s for s in SPECS if s.name == "assemblyscript/fd_write-to-stdout")
    good = reference(spec)
    assert verdict(spec, good) == []
    assert verdict(spec, replace(good, stdout=b"hell")) == [f"stdout {b'hell'!r} does not start with 'hello'"]
    assert verdict(spec, replace(good, exit_code=1)) == ["exit code 1, expected 0"]
    assert verdict(spec, replace(good, exit_code=None, trap="unreachable")) == [
        "trapped: unreachable",
        "exit code None, expected 0",
    ]


def test_a_spec_names_its_args_env_root_and_expectations() -> None:
    by_name = {s.name: s for s in SPECS}
    assert by_name["assemblyscript/args_get-multiple-arguments"].case().argv == [
        "args_get-multiple-arguments.wasm",
        "first",
        'the "second" arg',
        "3",
    ]
    assert by_name["assemblyscript/environ_get-multiple-variables"].env == {
        "a": "text",
        "b": 'escap " ing',
        "c": "new\nline",
    }
    assert by_name["assemblyscript/proc_exit-failure"].exit_code == 33
    assert by_name["c/lseek"].root == (SUITE / "c" / "fs-tests.dir").resolve()
    assert by_name["c/clock_getres-realtime"] == SuiteSpec(
        "c/clock_getres-realtime", SUITE / "c/clock_getres-realtime.wasm"
    )


@pytest.mark.parametrize("bad", BAD_SPECS, ids=[f"{i}-{b['rule']}" for i, b in enumerate(BAD_SPECS)])
def test_a_malformed_spec_is_refused_naming_the_rule(bad: dict[str, str]) -> None:
    with pytest.raises(SpecError, match=bad["rule"]) as err:
        parse_spec(SUITE / "c" / "lseek.wasm", bad["text"])
    assert str(err.value).startswith("lseek.json: ")
