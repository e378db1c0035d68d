"""Every file in guests/fixtures/*.toml is one case; this one parametrized test runs them all, on both
backends (in-process ``"wasmtime"`` and the worker-process ``"process"``), judges each receipt against
the case and checks that the two receipts agree on everything but the facts of how they ran
(:data:`BACKEND_FACTS`).

The format is ``guests/fixtures/schema.json`` (validated in ``tests/host/test_fixture_format.py``);
running and judging a case is :mod:`kuro_wasm.host.fixtures` — the same runner ``kuro fixtures run``
uses — so this test adds only what is particular to this checkout's engine (wasmtime 50) and backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kuro_wasm.host.fixtures import bundled_dir, case_files, load_case, run_case, setup

FIXTURES = case_files(bundled_dir())

#: Receipt keys that differ between the backends by design: the clock, the backend and its worker, the
#: engine's memory profile (a worker bounds its memory reservation; see kuro_wasm.host.worker.hardening).
BACKEND_FACTS = {
    "kuro/started-at",
    "kuro/finished-at",
    "kuro/duration-ms",
    "kuro/isolation",
    "kuro/worker",
    "kuro/engine",
}


def test_the_bundled_fixtures_are_this_checkouts_guests_fixtures() -> None:
    assert bundled_dir() == Path(__file__).resolve().parents[2] / "guests" / "fixtures"
    assert len(FIXTURES) >= 50


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_guest_fixture(path: Path, home: Path) -> None:
    case = load_case(path)
    ready = setup(case, path.parent)  # the same blocks, fs and spec for both backends
    receipts = {}
    for isolation in ("wasmtime", "process"):
        result = run_case(case, path.parent, home=home, ready=ready, isolation=isolation)
        if result.status == "unsupported":
            pytest.fail(f"{path.stem} is marked unsupported on wasmtime, this host's engine: {result.problems}")
        assert result.status == "pass", f"{isolation}: " + "\n".join(result.problems)
        receipt = result.receipt
        assert receipt is not None
        assert receipt["kuro/isolation"] == isolation
        assert receipt["kuro/engine"]["name"] == "wasmtime"
        assert receipt["kuro/engine"]["version"].split(".")[0] == "50"
        receipts[isolation] = receipt
    inprocess, worker = ({k: v for k, v in r.items() if k not in BACKEND_FACTS} for r in receipts.values())
    assert inprocess == worker
    assert receipts["process"]["kuro/worker"]["hardening"]
