"""Helpers for driving the ``kuro`` CLI as a user would: a subprocess with its own home."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUESTS = ROOT / "guests"

Kuro = Callable[..., subprocess.CompletedProcess[str]]


def kuro_runner(home: Path, cwd: Path) -> Kuro:
    """``run(*args, input=None, env=None, cwd=None)``: ``python -m kuro_wasm ARGS...`` with ``KURO_HOME=home``."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd_: Path | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        environ = {**os.environ, "KURO_HOME": str(home), **(env or {})}
        environ.pop("KURO_DEBUG", None)
        return subprocess.run(
            [sys.executable, "-m", "kuro_wasm", *args],
            input=input,
            capture_output=True,
            text=True,
            env=environ,
            cwd=cwd_ or cwd,
            timeout=timeout,
        )

    return run


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (asserts there is exactly one, and no traceback)."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def add_guest(kuro: Kuro, name: str) -> str:
    """``kuro guest add guests/NAME``; returns the CID."""
    result = kuro("guest", "add", str(GUESTS / name))
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[0]


def crashed_run(home: Path, tmp_path: Path, argv: list[str], op_id: str) -> None:
    """Start ``kuro ARGV`` (a long run under ``op_id``), kill -9 it once its op id is claimed."""
    from kuro_wasm.ledger.ledger import Ledger

    env = {**os.environ, "KURO_HOME": str(home)}
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", *argv], env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) as proc:  # fmt: skip
        try:
            for _ in range(1200):  # a hang guard (60 s), not a measure
                if (home / "ledger.sqlite").exists():
                    with Ledger(home=home) as ledger:
                        if ledger.result(op_id)["kuro/status"] == "running":
                            break
                assert proc.poll() is None, "the run ended before it could be killed"
                time.sleep(0.05)
            else:
                raise AssertionError(f"{op_id} was never claimed")
        finally:
            proc.kill()
            proc.wait()
