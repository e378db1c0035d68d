"""ruff and mypy are part of the test suite, so a lint regression fails CI like any other."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = BIN / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if which is None:
        pytest.fail(f"{name} is not installed; install the test extras: pip install -e '.[test]'")
    return which


def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "kuro_fs", "kuro_wasm", "tests", "tools"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean_on_the_packages() -> None:
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
