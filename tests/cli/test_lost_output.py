"""Output ``kuro`` could not write is never success: one line, status 1 — and the receipt stays the guest's truth.

stdout is ``/dev/full`` (every write fails: ENOSPC) or closed (``>&-``: Python has no ``sys.stdout``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import GUESTS, ROOT, Kuro, add_guest

_CLOSED = "closed"
_FULL = "/dev/full"


def _kuro_to(home: Path, stdout: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kuro ARGS`` with stdout ``/dev/full`` or closed; stderr captured."""
    env = {**os.environ, "KURO_HOME": str(home)}
    env.pop("KURO_DEBUG", None)
    with open(_FULL if stdout == _FULL else os.devnull, "wb") as sink:
        return subprocess.run(
            [sys.executable, "-m", "kuro_wasm", *args],
            stdout=sink,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            preexec_fn=(lambda: os.close(1)) if stdout == _CLOSED else None,  # `kuro … >&-`
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result.stderr.splitlines()[-1]


needs_dev_full = pytest.mark.skipif(not Path(_FULL).exists(), reason="no /dev/full here")
WHERE = [pytest.param(_FULL, marks=needs_dev_full, id="full"), pytest.param(_CLOSED, id="closed")]


@pytest.mark.parametrize("stdout", WHERE)
@pytest.mark.parametrize("extra", [[], ["--json"], ["--op-id", "op-lost"]], ids=["stream", "json", "op-id"])
def test_a_run_whose_output_cannot_be_written_exits_1_and_its_receipt_stays_ok(
    kuro: Kuro, home: Path, stdout: str, extra: list[str]
) -> None:
    hello = add_guest(kuro, "hello.wat")
    result = _kuro_to(home, stdout, "run", hello, "run", *extra)
    assert result.returncode == 1, result.stderr
    line = _last_line(result)
    why = "No space left on device" if stdout == _FULL else "stdout is closed"
    assert line.startswith("kuro: error: could not write stdout") and why in line and "[output-lost]" in line
    receipt_cid = line.split("receipt ", 1)[1].split()[0]
    shown = kuro("receipt", "show", receipt_cid, "--json")
    assert shown.returncode == 0, shown.stderr
    receipt = json.loads(shown.stdout)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("ok", 0)  # the guest did nothing wrong
    assert "kuro/error" not in receipt


@needs_dev_full
def test_a_replay_whose_output_cannot_be_written_exits_1_too(kuro: Kuro, home: Path) -> None:
    hello = add_guest(kuro, "hello.wat")
    assert kuro("run", hello, "run", "--op-id", "op-1").returncode == 0
    result = _kuro_to(home, _FULL, "run", hello, "run", "--op-id", "op-1")
    assert result.returncode == 1, result.stderr
    assert "replayed" in result.stderr and "[output-lost]" in _last_line(result)


def test_any_command_with_stdout_closed_is_one_line_and_exit_1(kuro: Kuro, home: Path, tmp_path: Path) -> None:
    (tmp_path / "hi.txt").write_text("hi\n")
    assert kuro("fs", "put", str(tmp_path / "hi.txt"), "hi.txt").returncode == 0
    result = _kuro_to(home, _CLOSED, "fs", "cat", "hi.txt")
    assert result.returncode == 1
    assert result.stderr == "kuro: error: stdout is closed\n"


def test_a_stderr_that_cannot_be_written_still_advances_the_named_fs(home: Path) -> None:
    # The receipt's summary goes to stderr; a full or closed stderr must not undo what the run did:
    # the named fs advances (it was skipped, the guest's writes unreachable by name), and the exit says 1.
    from kuro_wasm.cli.context import ClosedStream
    from kuro_wasm.cli.kuro import main

    added = io.StringIO()
    assert main(["--home", str(home), "guest", "add", str(GUESTS / "fs-write.wat")], out=added) == 0
    cid = added.getvalue().split()[0]
    out = io.StringIO()
    code = main(
        ["--home", str(home), "run", cid, "run", "--mode", "terminal-build"], out=out, err=ClosedStream("stderr")
    )  # type: ignore[arg-type]
    assert code == 1
    shown = io.StringIO()
    assert main(["--home", str(home), "fs", "cat", "out/hello.txt"], out=shown) == 0
    assert shown.getvalue() == "written by a guest"


def test_output_lost_before_the_guest_is_attached_does_not_cancel_it(home: Path) -> None:
    # Only a reader that left (a broken pipe) stops the guest, as SIGPIPE would; a full or closed stdout
    # loses output but the guest runs on — also when it wrote before the command attached its kill.
    from kuro_wasm.cli.context import ClosedStream, Context
    from kuro_wasm.cli.run import _Live
    from kuro_wasm.model.stream import Chunk

    live = _Live(Context(home=home, out=ClosedStream("stdout"), err=io.StringIO()))  # type: ignore[arg-type]
    live(None, Chunk("stdout", b"early\n", 0))
    killed: list[bool] = []
    live.attach(lambda: killed.append(True))
    assert killed == [] and "stdout" in live.lost
