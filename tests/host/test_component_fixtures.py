"""Every guests/components/fixtures/*.toml is one component case, run by the one fixture runner.

The cases use the portable format (``guests/fixtures/schema.json``); their guests are
``component:NAME`` — built from ``guests/components/`` by ``tools/build_components.py``
(componentize-py output is not byte-reproducible, so the built guests are not committed
and the cases are not part of the bundled portable suite).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hostkit import GUESTS, component

from kuro_wasm.host.fixtures import case_files, load_case, run_case
from kuro_wasm.host.kinds import component as component_kind
from kuro_wasm.model.component_binary import NotPlain, read_plan
from kuro_wasm.model.wasm_shape import WasmShape

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


#: What may differ between two runs of one case on the two component paths: the clock, and the engine's own words
#: around a trap (its backtrace) — the trap's kind is compared.
_NOT_COMPARED = frozenset({"kuro/started-at", "kuro/finished-at", "kuro/duration-ms", "kuro/trap"})


@functools.cache
def _plain(name: str) -> bool:
    """Whether the guest of a case runs through the host's own canonical ABI (a plain component of the world)."""
    try:
        plan = read_plan(component(name.partition(":")[2]))
    except NotPlain:
        return False
    return component_kind.KIND.links_from_parts(WasmShape(component=True, plan=plan))


_GUESTS = {p: load_case(p).guest for p in CASES}
PLAIN = [p for p in CASES if _GUESTS[p].startswith("component:") and _plain(_GUESTS[p])]


@pytest.mark.parametrize("path", PLAIN, ids=[p.stem for p in PLAIN])
def test_a_plain_components_case_gives_the_same_receipt_on_both_paths(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = load_case(path)
    ours = run_case(case, path.parent, home=False, resolve=_built).receipt
    monkeypatch.setattr(component_kind.KIND, "plain", False)
    engine = run_case(case, path.parent, home=False, resolve=_built).receipt
    assert ours is not None and engine is not None
    assert {k: v for k, v in ours.items() if k not in _NOT_COMPARED} == {
        k: v for k, v in engine.items() if k not in _NOT_COMPARED
    }
    if "kuro/trap" in engine:
        assert ours["kuro/trap"]["kind"] == engine["kuro/trap"]["kind"]


def test_the_plain_path_claims_the_kuro_world_components_and_not_the_wasi_ones() -> None:
    assert len(PLAIN) >= 40
    assert {_plain(f"component:{n}") for n in ("typed", "py-tool")} == {True}
    assert {_plain(f"component:{n}") for n in ("py-wasi", "exiting", "environ", "entropy")} == {False}


def test_with_the_switch_off_a_plain_component_links_the_engines_way_and_compiles_no_core_module() -> None:
    # A worker process runs with the switch off (it is sent the compiled component, not its core modules):
    # linking there must not compile the core modules, which for a componentize-py guest takes seconds.
    import wasmtime
    import wasmtime.component as wc

    from kuro_wasm.host.component_types import component_shape
    from kuro_wasm.host.kind import GuestParts

    engine = wasmtime.Engine()
    data = component("typed")
    compiled = wc.Component(engine, data)
    shape = component_shape(engine, compiled, data)
    kind = component_kind.ComponentKind()
    assert kind.links_from_parts(shape)  # a plain component: the host's own path when the switch is on

    def no_core_module(name: str, piece: object) -> wasmtime.Module:
        raise AssertionError(f"core module {name} compiled with the switch off")

    kind.plain = False
    assert not kind.links_from_parts(shape)
    linked = kind.link(engine, compiled, GuestParts(shape, no_core_module))
    assert isinstance(linked, tuple) and linked[1] is compiled  # the engine's component path
