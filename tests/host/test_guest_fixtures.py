"""Every file in guests/fixtures/*.toml is one case; this one parametrized test runs them all.

The format is ``guests/fixtures/schema.json`` (validated in ``tests/host/test_fixture_format.py``);
running and judging a case is :mod:`kuro_wasm.host.fixtures` — the same runner ``kuro fixtures run``
uses — so this test adds only what is particular to this checkout's engine (wasmtime 50).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kuro_wasm.host.fixtures import bundled_dir, case_files, load_case, run_case

FIXTURES = case_files(bundled_dir())


def test_the_bundled_fixtures_are_this_checkouts_guests_fixtures() -> None:
    assert bundled_dir() == Path(__file__).resolve().parents[2] / "guests" / "fixtures"
    assert len(FIXTURES) >= 50


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_guest_fixture(path: Path, home: Path) -> None:
    case = load_case(path)
    result = run_case(case, path.parent, home=home)
    if result.status == "unsupported":
        pytest.fail(f"{path.stem} is marked unsupported on wasmtime, this host's engine: {result.problems}")
    assert result.status == "pass", "\n".join(result.problems)
    receipt = result.receipt
    assert receipt is not None
    assert receipt["kuro/isolation"] == "wasmtime"
    assert receipt["kuro/engine"]["name"] == "wasmtime"
    assert receipt["kuro/engine"]["version"].split(".")[0] == "50"
