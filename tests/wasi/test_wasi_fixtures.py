"""Every guests/c/fixtures/*.toml is one case of a WASI command, run by the one fixture runner.

The cases use the portable format (``guests/fixtures/schema.json``), and their guests are the
committed programs of ``guests/c`` (found from the case's directory). They stay outside the bundled
portable suite because only this host runs WASI preview 1: the V8 host of the parity tests does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from wasikit import C_GUESTS

from kuro_wasm.host.fixtures import case_files, load_case, run_case

CASES = case_files(C_GUESTS / "fixtures")


def test_there_are_wasi_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_wasi_fixture(path: Path, tmp_path: Path) -> None:
    result = run_case(load_case(path), path.parent, home=tmp_path / "home")
    assert result.status == "pass", "\n".join(result.problems)
    assert result.receipt is not None and result.receipt["kuro/isolation"] == "wasmtime"
