"""Fuzzing component calls: any plain-data args to any export are a receipt (ok, exit or load-error), never a raise.

The args are converted by the export's WIT types before the guest runs
(:func:`kuro_wasm.model.wit.lower`), so hostile args must end as a ``load-error``
naming the parameter — or, when they fit, as the export's own answer.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import ModelError
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

_ROOT = Path(__file__).resolve().parents[2]
_EXPORTS = ["add", "echo-point", "echo-shape", "echo-opt", "echo-perms", "echo-color", "echo-list", "halve"]
_EXPORTS += ["sum-bytes", "nothing"]


def _typed() -> bytes:
    spec = importlib.util.spec_from_file_location("build_components", _ROOT / "tools" / "build_components.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.build(_ROOT / "build" / "components", ["typed"])["typed"]
    return path.read_bytes()


_STORE = MemoryBlockStore()
_FS = Fs.empty(_STORE)
_CID = add_guest(_STORE, _typed())
_SESSION = session("s-fuzz", _FS.root)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.sampled_from(["red", "blue", "empty", "circle", "read", "ok", "err", "x", "label"]),
)
_plain = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_EXPORTS), st.lists(_plain, max_size=3))
def test_any_args_to_any_export_end_in_a_receipt(export: str, args: list[Any]) -> None:
    try:
        command = guest(_CID, export, args)
    except ModelError:
        return  # not a spec at all (e.g. an integral float past u64): the spec model refuses it, fuzzed elsewhere
    receipt = run(_SESSION, command, store=_STORE, fs=_FS, home=False, timeout_ms=10_000)
    assert receipt["kuro/type"] == "kuro/receipt"
    assert receipt["kuro/outcome"] in ("ok", "exit", "load-error"), receipt
    if receipt["kuro/outcome"] == "load-error":
        assert receipt["kuro/error"] and "kuro/result" not in receipt
