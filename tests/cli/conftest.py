"""Fixtures for the CLI suite: a fresh home per test and a runner bound to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Kuro, kuro_runner


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh kuro home for one test."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def kuro(home: Path, tmp_path: Path) -> Kuro:
    """Run the CLI in a subprocess with ``KURO_HOME`` set to this test's home, cwd = tmp_path."""
    return kuro_runner(home, tmp_path)
