"""Every guests/components/fixtures/*.toml is one component case, run by the one fixture runner.

The cases use the portable format (``guests/fixtures/schema.json``); their guests are
``component:NAME`` — built from ``guests/components/`` by ``tools/build_components.py``
(componentize-py output is not byte-reproducible, so the built guests are not committed
and the cases are not part of the bundled portable suite).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostkit import GUESTS, component

from kuro_wasm.host.fixtures import case_files, load_case, run_case

CASES = case_files(GUESTS / "components" / "fixtures")


def _built(name: str) -> bytes:
    kind, _, which = name.partition(":")
    assert kind == "component", name
    return component(which)


def test_there_are_component_cases() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_component_fixture(path: Path, home: Path) -> None:
    result = run_case(load_case(path), path.parent, home=home, resolve=_built)
    assert result.status == "pass", "\n".join(result.problems)
    assert result.receipt is not None and result.receipt["kuro/isolation"] == "wasmtime"
