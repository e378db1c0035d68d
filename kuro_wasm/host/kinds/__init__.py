"""The guest kinds this host runs, in the order they are asked — and the one place a guest's kind is decided.

## The one decision
A guest's kind is decided from its verified shape alone (imports, exports,
component or core module), by asking the kinds in :data:`KINDS` in order; the
first that claims it runs it. Only kinds that provide *every* module the guest
imports from are asked, so a guest is never bound half by one kind and half by
none. A guest no kind claims is a ``load-error`` that names what was found —
the first import nobody provides (``imports wasi_unstable.fd_write:
no WASI (pre-preview-1) support in this host``), that it is a component, or the asked kind's
own reason (a wrong signature, a missing export). Adding a kind is one module
here plus one line in :data:`KINDS`.

## Pure
A decision over values; the kinds themselves bind wasmtime.
"""

from __future__ import annotations

from typing import Final

from kuro_wasm.host.kind import GuestKind
from kuro_wasm.host.kinds.kuro_v1 import KIND as KURO_ABI_V1
from kuro_wasm.host.kinds.wasi_p1 import KIND as WASI_PREVIEW1
from kuro_wasm.model.wasm_shape import WasmShape

__all__ = ["KINDS", "KNOWN_FAMILIES", "by_name", "classify"]

#: Every guest kind, in the order they are asked.
KINDS: Final[tuple[GuestKind, ...]] = (KURO_ABI_V1, WASI_PREVIEW1)

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
    first_reason: str | None = None
    for kind in asked:
        reason = kind.claim(shape)
        if reason is None:
            return kind
        first_reason = first_reason or reason
    if first_reason is not None:
        return first_reason
    if shape.component:
        return "the guest is a component (component-model binary); no component support in this host"
    provided = sorted({m for k in kinds for m in k.import_modules})
    for imp in shape.imports:
        if not any(imp.module in k.import_modules for k in kinds):
            family = KNOWN_FAMILIES.get(imp.module)
            if family is not None:
                return f"imports {imp.where}: no {family} support in this host"
            return f"imports {imp.where}: module {imp.module!r} is not provided by this host (provided: {provided})"
    modules = sorted(shape.import_modules())
    return f"imports from {modules}: no one guest kind provides all of them"
