"""Why a run ended → exit code and outcome: every wasmtime trap code and every stop reason has one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hostkit import make_fs, make_session
from wasmtime import TrapCode

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.host.job import Job
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.outcome import STOPS, TRAP_OUTCOMES, cause, decide, trap_kind
from kuro_wasm.model.receipt import OUTCOMES
from kuro_wasm.model.sessions import guest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("code", list(TrapCode), ids=[c.name for c in TrapCode])
def test_every_wasmtime_trap_code_maps_to_an_outcome_with_its_exit_code(code: TrapCode) -> None:
    result = decide(stop=None, trap_code=code.name, trap_message="wasm trap: something")
    assert OUTCOMES[result["outcome"]] == result["exit-code"]
    if result["outcome"] == "trap":
        assert result["trap"]["kind"] == trap_kind(code.name)


def test_fuel_exhaustion_is_124_not_a_trap() -> None:
    result = decide(stop=None, trap_code="OUT_OF_FUEL", trap_message="wasm trap: all fuel consumed")
    assert (result["exit-code"], result["outcome"]) == (124, "fuel-exhausted")
    assert "kuro/trap" not in result and "trap" not in result


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_every_stop_reason_maps_to_an_outcome_with_its_exit_code(stop: str) -> None:
    result = decide(stop=stop, trap_code="UNREACHABLE", trap_message="ignored: the stop wins", values=(0,))
    assert OUTCOMES[result["outcome"]] == result["exit-code"] == STOPS[stop][0]
    assert result.get("timed-out?", False) is (stop == "timeout")


def test_a_stop_wins_over_what_the_guest_returned() -> None:
    assert decide(stop="cancelled", values=(0,))["exit-code"] == 130


def test_a_host_error_names_its_cause_and_is_not_a_guest_trap() -> None:
    result = decide(stop="host-error", host_error="fs_ls: RuntimeError: boom")
    assert (result["exit-code"], result["outcome"]) == (70, "host-error")
    assert "trap" not in result
    assert result["error"] == "host error: fs_ls: RuntimeError: boom"


@pytest.mark.parametrize("instantiating", [True, False])
def test_the_host_out_of_memory_is_a_host_error_not_the_guests_fault(instantiating: bool) -> None:
    result = decide(stop=None, error="Cannot allocate memory (os error 12)", instantiating=instantiating)
    assert (result["exit-code"], result["outcome"]) == (70, "host-error")


def test_an_instantiation_error_is_a_load_error_and_a_call_error_is_a_trap() -> None:
    text = "memory minimum size of 2 pages exceeds memory limits"
    assert decide(stop=None, error=text, instantiating=True)["outcome"] == "load-error"
    assert decide(stop=None, error=text)["trap"]["kind"] == "error"


@pytest.mark.parametrize(
    ("values", "code", "outcome"), [((), 0, "ok"), ((0,), 0, "ok"), ((3,), 3, "exit"), ((-1,), -1, "exit")]
)
def test_the_export_result_is_the_exit_code(values: tuple[int, ...], code: int, outcome: str) -> None:
    assert decide(stop=None, values=values) == {"exit-code": code, "outcome": outcome}


def test_cause_picks_the_line_that_says_what_happened() -> None:
    assert cause("error while executing at wasm backtrace:\n  0: f\n\nCaused by:\n    kuro: stopped (timeout)\n") == (
        "kuro: stopped (timeout)"
    )
    assert cause("just one line") == "just one line"


def test_special_trap_kinds_are_real_wasmtime_codes() -> None:
    assert set(TRAP_OUTCOMES) <= {trap_kind(c.name) for c in TrapCode}


def test_the_outcome_module_is_pure() -> None:
    tree = ast.parse((ROOT / "kuro_wasm" / "model" / "outcome.py").read_text(encoding="utf-8"))
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert roots & {"wasmtime", "threading", "os", "time", "sqlite3"} == set()


def test_a_kill_that_arrives_after_the_guest_returned_does_not_relabel_it() -> None:
    blocks = MemoryBlockStore()
    sess = make_session(make_fs(blocks))
    job = Job(
        sess,
        guest(blocks.put(b"x"), "run"),
        blocks,
        None,
        on_chunk=None,
        on_exit=None,
        limits=Limits(1000, 10, None, None),
        home=False,
        stdin_closed=True,
        stdin=None,
    )
    job.ctx.stop("cancelled")  # too late: the export already returned
    assert job._classify(CallOutcome(values=(0,)), instantiating=False) == {"exit-code": 0, "outcome": "ok"}
    stopped = job._classify(CallOutcome(error="kuro: stopped (cancelled)"), instantiating=False)
    assert stopped["outcome"] == "cancelled"
