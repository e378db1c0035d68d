"""The guest kinds this host runs, in the order they are asked — and the one place a guest's kind is decided.

## The one decision
A guest's kind is decided from its verified shape alone (imports, exports,
component or core module), by asking the kinds in :data:`KINDS` in order; the
first that claims it runs it. Only kinds that provide *every* module the guest
imports from are asked, so a guest is never bound half by one kind and half by
none. A guest no kind claims is a ``load-error`` that names what was found —
the first import nobody provides (``imports wasi_unstable.fd_write:
no WASI (pre-preview-1) support in this host``), that it is a component, or the first asked
kind's own reason (a wrong signature, a missing export). Adding a kind is one
module here plus one line in :data:`KINDS`.

Order matters where two kinds share an import module: a narrow *profile* is
asked before the general kind, claims only its exact shape, and answers ``""``
(no opinion) for anything else, so the general kind's reason is the one a
guest meant for it sees. ``kuro-browser-v0`` (the original kuro's browser
guests: no imports, or only the two-parameter ``kuro.fs_read``) is asked
before ``kuro-abi-v1`` (every other module on the ``kuro`` imports, including
import-free ones of any other shape).

## Pure
A decision over values; the kinds themselves bind wasmtime.
"""

from __future__ import annotations

from typing import Final

from kuro_wasm.host.kind import GuestKind
from kuro_wasm.host.kinds.browser_v0 import KIND as KURO_BROWSER_V0
from kuro_wasm.host.kinds.component import KIND as KURO_COMPONENT
from kuro_wasm.host.kinds.kuro_v1 import KIND as KURO_ABI_V1
from kuro_wasm.host.kinds.wasi_p1 import KIND as WASI_PREVIEW1
from kuro_wasm.model.wasm_shape import WasmShape

__all__ = ["KINDS", "KNOWN_FAMILIES", "KURO_ABI_V1", "KURO_BROWSER_V0", "by_name", "classify"]

#: Every guest kind, in the order they are asked (a narrow profile before the general kind of its module).
KINDS: Final[tuple[GuestKind, ...]] = (KURO_BROWSER_V0, KURO_ABI_V1, WASI_PREVIEW1, KURO_COMPONENT)

#: Import modules of well-known host interfaces, named in the load error when no kind provides them.
KNOWN_FAMILIES: Final[dict[str, str]] = {
    "wasi_snapshot_preview1": "WASI",
    "wasi_unstable": "WASI (pre-preview-1)",
    "env": "Emscripten or C runtime",
}


def by_name(name: str) -> GuestKind | None:
    """The kind called ``name`` in :data:`KINDS`, or None."""
    return next((k for k in KINDS if k.name == name), None)


def classify(shape: WasmShape, kinds: tuple[GuestKind, ...] | None = None) -> GuestKind | str:
    """The kind that runs a guest of ``shape``, or the load-error text saying why none does.

    ``kinds`` defaults to :data:`KINDS` as it is at the time of the call.

    >>> from kuro_wasm.model.wasm_shape import Import
    >>> classify(WasmShape(imports=(Import("wasi_unstable", "fd_write", "func"),)))
    'imports wasi_unstable.fd_write: no WASI (pre-preview-1) support in this host'
    >>> classify(WasmShape()).name
    'kuro-abi-v1'
    >>> from kuro_wasm.model.wasm_shape import FuncSig
    >>> sig = FuncSig(("i32",), ())
    >>> classify(WasmShape(imports=(Import("wasi_snapshot_preview1", "proc_exit", "func", sig),))).name
    'wasi-preview1'
    """
    if kinds is None:
        kinds = KINDS
    asked = [k for k in kinds if k.components == shape.component and shape.import_modules() <= k.import_modules]
    first_reason = ""
    for kind in asked:
        reason = kind.claim(shape)
        if reason is None:
            return kind
        first_reason = first_reason or reason  # "" is "not my shape, no opinion": a later kind explains
    if first_reason:
        return first_reason
    if shape.component:
        return _component_reason(shape, [k for k in kinds if k.components])
    provided = sorted({m for k in kinds for m in k.import_modules})
    for imp in shape.imports:
        if not any(imp.module in k.import_modules for k in kinds):
            family = KNOWN_FAMILIES.get(imp.module)
            if family is not None:
                return f"imports {imp.where}: no {family} support in this host"
            return f"imports {imp.where}: module {imp.module!r} is not provided by this host (provided: {provided})"
    modules = sorted(shape.import_modules())
    return f"imports from {modules}: no one guest kind provides all of them"


def _component_reason(shape: WasmShape, kinds: list[GuestKind]) -> str:
    """Why no kind runs a component: every imported instance that no component kind provides, by name."""
    if not kinds:
        return "the guest is a component (component-model binary); no component support in this host"
    provided = sorted({m for k in kinds for m in k.import_modules})
    missing = sorted(m for m in shape.import_modules() if not any(m in k.import_modules for k in kinds))
    if not missing:
        return f"imports from {sorted(shape.import_modules())}: no one guest kind provides all of them"
    kuro = ", ".join(m for m in provided if not m.startswith("wasi:"))
    wasi = "; and WASI 0.2: wasi:cli, wasi:io, wasi:clocks, wasi:random, wasi:filesystem, wasi:sockets"
    extra = wasi if any(m.startswith("wasi:") for m in provided) else ""
    return f"imports {', '.join(missing)}: outside what this host provides ({kuro}{extra})"
