"""Every guests/c/fixtures/*.toml is one case of a WASI command, run by the one fixture runner on both
backends (in-process and a worker process), whose receipts must agree but for how they ran.

The cases use the portable format (``guests/fixtures/schema.json``), and their guests are the
committed programs of ``guests/c`` (found from the case's directory). They stay outside the bundled
portable suite because only this host runs WASI preview 1: the V8 host of the parity tests does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from wasikit import C_GUESTS

from kuro_wasm.host.fixtures import case_files, load_case, run_case, setup

CASES = case_files(C_GUESTS / "fixtures")
#: Receipt keys that differ between the backends by design (as tests/host/test_guest_fixtures.py says).
BACKEND_FACTS = {
    "kuro/started-at", "kuro/finished-at", "kuro/duration-ms", "kuro/isolation", "kuro/worker", "kuro/engine",
}  # fmt: skip


def test_there_are_wasi_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_wasi_fixture(path: Path, tmp_path: Path) -> None:
    case = load_case(path)
    ready = setup(case, path.parent)
    receipts = {}
    for isolation in ("wasmtime", "process"):
        result = run_case(case, path.parent, home=tmp_path / "home", ready=ready, isolation=isolation)
        assert result.status == "pass", f"{isolation}: " + "\n".join(result.problems)
        assert result.receipt is not None and result.receipt["kuro/isolation"] == isolation
        receipts[isolation] = {k: v for k, v in result.receipt.items() if k not in BACKEND_FACTS}
    assert receipts["wasmtime"] == receipts["process"]
