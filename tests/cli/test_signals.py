"""Signals end ``kuro`` the way a person expects: the guest is cancelled, its receipt is stored, one line, 128 + N.

Each test waits until the guest has *started* (it prints ``ready`` first) before
signalling — an ordering wait on the guest's own output, never a sleep racing the
command's imports — so a loaded machine cannot turn these into tests of the loader.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT

READY_THEN_SPIN = """(module
  (import "kuro" "write" (func $w (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "ready\\n")
  (func (export "run") (result i32)
    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 6)))
    (loop $l (br $l))
    (i32.const 0)))"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "KURO_HOME": str(home)}


def _kuro(home: Path, *args: str, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kuro_wasm", *args],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=ROOT,
        timeout=120,
        stdin=stdin,
    )


@pytest.fixture
def spinner(home: Path, tmp_path: Path) -> str:
    source = tmp_path / "ready-spin.wat"
    source.write_text(READY_THEN_SPIN)
    added = _kuro(home, "guest", "add", str(source))
    assert added.returncode == 0, added.stderr
    return added.stdout.split()[0]


def _signal_when_ready(home: Path, signum: int | tuple[int, ...], *args: str) -> tuple[int, str]:
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(home),
        cwd=ROOT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"  # the guest runs: everything is loaded
        for each in signum if isinstance(signum, tuple) else (signum,):
            proc.send_signal(each)
        _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_cancels_the_guest_prints_its_receipt_and_exits_128_plus_n(
    home: Path, spinner: str, signum: int, status: int
) -> None:
    code, err = _signal_when_ready(home, signum, "run", spinner, "run", "--timeout-ms", "120000")
    assert code == status, err
    assert "cancelled · exit code 130" in err and "Traceback" not in err


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_with_an_op_id_the_cancelled_receipt_is_stored_not_left_unknown(
    home: Path, spinner: str, signum: int, status: int
) -> None:
    code, err = _signal_when_ready(home, signum, "run", spinner, "run", "--timeout-ms", "120000", "--op-id", "op-1")
    assert code == status, err
    assert "Traceback" not in err and "internal error" not in err
    shown = _kuro(home, "receipt", "show", "op-1", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout).get("kuro/outcome") == "cancelled", (err, shown.stdout)
    listed = _kuro(home, "ledger", "list", "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [row.get("kuro/status") for row in rows] == ["done"]
    again = _kuro(home, "run", spinner, "run", "--timeout-ms", "120000", "--op-id", "op-1")
    assert again.returncode == 130  # replayed from the ledger, not run again (it would spin for two minutes)


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
@pytest.mark.parametrize("op_id", [[], ["--op-id", "op-twice"]], ids=["plain", "op-id"])
def test_more_signals_during_the_cancel_still_store_the_receipt_and_exit_as_the_first_says(
    home: Path, spinner: str, isolation: str, op_id: list[str]
) -> None:
    # Ctrl-C, then SIGTERM and Ctrl-C again on its heels: the later ones land while the kill is
    # under way (or are pending when the first is handled, which Python does in signal-number
    # order: SIGINT first). The cancel finishes: receipt stored and printed, 130, never a crash.
    args = ["run", spinner, "run", "--timeout-ms", "120000", "--isolation", isolation, *op_id]
    code, err = _signal_when_ready(home, (signal.SIGINT, signal.SIGTERM, signal.SIGINT), *args)
    assert code == 130, err
    assert "cancelled · exit code 130" in err
    assert "Traceback" not in err and "internal error" not in err
    if op_id:
        shown = _kuro(home, "receipt", "show", "op-twice", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["kuro/outcome"] == "cancelled"


def test_stdin_dash_with_our_stdin_closed_is_one_line_and_exit_2(home: Path, spinner: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.close(0); from kuro_wasm.cli.launch import main; main()",
         "run", spinner, "run", "--stdin", "-"],
        capture_output=True, text=True, env=_env(home), cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "stdin" in result.stderr and "Traceback" not in result.stderr


def test_stdin_dash_with_our_stdin_closed_under_an_op_id_is_the_same(home: Path, spinner: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.close(0); from kuro_wasm.cli.launch import main; main()",
         "run", spinner, "run", "--stdin", "-", "--op-id", "op-closed"],
        capture_output=True, text=True, env=_env(home), cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_the_command_is_still_loading_is_one_line_never_a_traceback(signum: int, status: int) -> None:
    # What `kuro` does first (kuro_wasm.cli.launch.main), then a long import stands in for a slow one.
    loading = (
        "import sys, time\n"
        "from kuro_wasm.cli import launch\n"
        "launch.guard_loading()\n"
        "print('loading', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", loading], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "loading\n"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (status, "kuro: interrupted\n")


@pytest.mark.parametrize("where", ["build_parser", "resolve_home"])
def test_a_signal_after_loading_but_before_the_command_runs_is_one_line(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # launch.main has installed the raising handler; the parser is still being built (or the home resolved)
    from kuro_wasm.cli import kuro
    from kuro_wasm.cli.context import Interrupted

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(kuro, where, interrupted)
    out, err = io.StringIO(), io.StringIO()
    assert kuro.main(["fs", "ls"], out=out, err=err) == 143
    assert (out.getvalue(), err.getvalue()) == ("", "kuro: interrupted\n")


def test_kuro_names_an_unknown_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "--bogus"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 2
    assert "--bogus" in result.stderr and result.stderr.count("\n") == 1


def _run_signalled_as_it_starts(home: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """``kuro run`` in this process, with the handler the executable installs (kuro_wasm.cli.launch) called the
    moment the guest has started — before the command holds its handle — as a real signal would run it."""
    from kuro_wasm.cli import context
    from kuro_wasm.cli.kuro import main
    from kuro_wasm.host import api

    real_start = api.start

    def start_then_signal(*a: object, **kw: object) -> object:
        handle = real_start(*a, **kw)  # type: ignore[arg-type]
        context.on_signal(signal.SIGTERM)
        return handle

    monkeypatch.setattr(api, "start", start_then_signal)
    err = io.StringIO()
    code = main(["--home", str(home), "run", *args, "--timeout-ms", "120000"], out=io.StringIO(), err=err)
    return code, err.getvalue()


def test_a_signal_landing_while_the_guest_starts_is_a_cancel_with_its_receipt(
    home: Path, spinner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window a loaded machine hits: the guest already runs (it may have written) but the command
    # has not yet reached the code that cancels on a signal.
    code, err = _run_signalled_as_it_starts(home, monkeypatch, spinner, "run")
    assert code == 143, err
    assert "cancelled · exit code 130" in err and "interrupted" not in err


def test_under_an_op_id_a_signal_landing_while_the_guest_starts_is_recorded_cancelled(
    home: Path, spinner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger's own window: between its start of the run and its holding the run's handle. The run is
    # cancelled with its receipt, and the operation is recorded cancelled — never abandoned as unknown.
    from kuro_wasm.ledger.ledger import Ledger

    code, err = _run_signalled_as_it_starts(home, monkeypatch, spinner, "run", "--op-id", "op-start")
    assert code == 143, err
    assert "cancelled · exit code 130" in err and "interrupted" not in err
    with Ledger(home=home) as ledger:
        recorded = ledger.result("op-start")
    assert (recorded["kuro/status"], recorded["kuro/outcome"]) == ("done", "cancelled")


def test_a_signal_as_a_denied_command_is_refused_exits_as_the_signal_says(
    home: Path, spinner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = _run_signalled_as_it_starts(home, monkeypatch, spinner, "run", "--grant", "stdin/read")
    assert code == 143, err
    assert "missing-capabilities" in err or "guest/invoke" in err
