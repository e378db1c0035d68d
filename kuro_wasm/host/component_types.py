"""A compiled component's imports and exported functions, as plain data (the component's :class:`WasmShape`).

## The one decision
A component's types are read once, from wasmtime's own view of the compiled
component (``Component.type``), and turned into plain data
(:class:`~kuro_wasm.model.wit.WitType`, :class:`~kuro_wasm.model.wit.WitFunc`)
that the module cache keeps beside the artifact — so the guest kind, the
argument conversion and the receipt decide from values, and a warm load asks
wasmtime nothing. Why not from the bytes, as core modules are read
(:mod:`kuro_wasm.model.wasm_shape`): a component's exported function types are
only known after resolving aliases, outer aliases and nested components
instantiated with type substitution — a type checker — and wasmtime's
component type API, unlike the core ``FuncType``, represents every type there is.

Imports become :class:`~kuro_wasm.model.wasm_shape.Import` values whose
``module`` is the imported instance's name (``kuro:host/fs@1.0.0``) and whose
``name`` is the item (a function, a type, a resource); an instance that exports
nothing still appears once (kind ``instance``). Exported functions are named
``run`` (world level) or ``interface#func`` (inside an exported instance).

## Effects
Calls wasmtime-py's component type reflection.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import wasmtime
import wasmtime.component as wc

from kuro_wasm.host.canonical_abi import CanonicalTrap
from kuro_wasm.host.component_core import link_program
from kuro_wasm.model.component_binary import NotPlain, Plan, read_plan
from kuro_wasm.model.wasm_shape import Export, Import, ShapeError, WasmShape, with_module_imports
from kuro_wasm.model.wit import WitFunc, WitType

__all__ = ["component_shape", "imported_funcs", "wit_type"]

_PRIMITIVE_CLASSES: dict[type, str] = {
    wc.Bool: "bool",
    wc.S8: "s8",
    wc.S16: "s16",
    wc.S32: "s32",
    wc.S64: "s64",
    wc.U8: "u8",
    wc.U16: "u16",
    wc.U32: "u32",
    wc.U64: "u64",
    wc.F32: "f32",
    wc.F64: "f64",
    wc.Char: "char",
    wc.String: "string",
}


def wit_type(ty: Any) -> WitType:
    """The plain :class:`WitType` of a wasmtime-py component value type.

    Raises ValueError: a type this host does not know (a newer wasmtime-py).
    """
    name = _PRIMITIVE_CLASSES.get(type(ty))
    if name is not None:
        return WitType(name)
    if isinstance(ty, wc.ListType):
        return WitType("list", (wit_type(ty.element),))
    if isinstance(ty, wc.RecordType):
        fields = ty.fields
        return WitType("record", tuple(wit_type(t) for _, t in fields), tuple(n for n, _ in fields))
    if isinstance(ty, wc.TupleType):
        return WitType("tuple", tuple(wit_type(t) for t in ty.elements))
    if isinstance(ty, wc.VariantType):
        cases = ty.cases
        return WitType(
            "variant", tuple(None if t is None else wit_type(t) for _, t in cases), tuple(n for n, _ in cases)
        )
    if isinstance(ty, wc.EnumType):
        return WitType("enum", (), tuple(ty.names))
    if isinstance(ty, wc.FlagsType):
        return WitType("flags", (), tuple(ty.names))
    if isinstance(ty, wc.OptionType):
        return WitType("option", (wit_type(ty.payload),))
    if isinstance(ty, wc.ResultType):
        ok, err = ty.ok, ty.err
        return WitType("result", (None if ok is None else wit_type(ok), None if err is None else wit_type(err)))
    if isinstance(ty, wc.OwnType):
        return WitType("own", (), ("resource",))
    if isinstance(ty, wc.BorrowType):
        return WitType("borrow", (), ("resource",))
    if isinstance(ty, wc.FutureType):
        return WitType("future")
    if isinstance(ty, wc.StreamType):
        return WitType("stream")
    if isinstance(ty, wc.ErrorContext):
        return WitType("error-context")
    raise ValueError(f"unknown component value type {type(ty).__name__}")


def _func(name: str, fty: wc.FuncType) -> WitFunc:
    result = fty.result
    return WitFunc(name, tuple((n, wit_type(t)) for n, t in fty.params), None if result is None else wit_type(result))


def imported_funcs(engine: wasmtime.Engine, component: wc.Component, instances: frozenset[str]) -> dict[str, WitFunc]:
    """The functions the component imports from the named ``instances``, by ``instance#func``, as it types them.

    Raises ValueError: a type this host does not know.
    """
    funcs: dict[str, WitFunc] = {}
    for name, ext in component.type.imports(engine).items():
        if name in instances and isinstance(ext.ty, wc.ComponentInstanceType):
            for item, iext in ext.ty.exports(engine).items():
                if isinstance(iext.ty, wc.FuncType):
                    funcs[f"{name}#{item}"] = _func(item, iext.ty)
    return funcs


def component_shape(engine: wasmtime.Engine, component: wc.Component, data: bytes | None = None) -> WasmShape:
    """The shape of a compiled component: its imports, and its exported functions with their WIT types — and,
    given its bytes ``data``, its plan (:func:`~kuro_wasm.model.component_binary.read_plan`) or why it has none.

    Raises ValueError: a type this host does not know.
    """
    ctype = component.type
    imports: list[Import] = []
    for name, ext in ctype.imports(engine).items():
        ty = ext.ty
        if isinstance(ty, wc.ComponentInstanceType):
            items = ty.exports(engine)
            for item, iext in items.items():
                ity = iext.ty
                kind = (
                    "func"
                    if isinstance(ity, wc.FuncType)
                    else "resource"
                    if isinstance(ity, wc.ResourceType)
                    else "type"
                )
                imports.append(Import(name, item, kind))
            if not items:
                imports.append(Import(name, "", "instance"))
        else:
            kind = "func" if isinstance(ty, wc.FuncType) else type(ty).__name__.lower()
            imports.append(Import(name, "", kind))
    typed: list[WitFunc] = []
    for name, ext in ctype.exports(engine).items():
        ty = ext.ty
        if isinstance(ty, wc.FuncType):
            typed.append(_func(name, ty))
        elif isinstance(ty, wc.ComponentInstanceType):
            for item, iext in ty.exports(engine).items():
                if isinstance(iext.ty, wc.FuncType):
                    typed.append(_func(f"{name}#{item}", iext.ty))
    plan, not_plain = None, "its bytes were not read"
    if data is not None:
        try:
            plan, not_plain = with_module_imports(read_plan(data)), ""
        except (NotPlain, ShapeError) as exc:
            not_plain = str(exc)
        if plan is not None and {name for name, _ in plan.exports} != {f.name for f in typed}:
            plan, not_plain = None, "its exported functions are not all lifted core functions"
    imported: tuple[WitFunc, ...] = ()
    if plan is not None:
        imported = tuple(
            dataclasses.replace(f, name=name)
            for name, f in sorted(imported_funcs(engine, component, frozenset(plan.imports)).items())
        )
        plan = _linked(plan, {f.name: f for f in imported})
    return WasmShape(
        component=True,
        imports=tuple(imports),
        exports=tuple(Export(f.name, "func") for f in typed),
        typed=tuple(typed),
        plan=None if plan is None else dataclasses.replace(plan, modules=()),
        not_plain=not_plain,
        imported=imported,
    )


def _linked(plan: Plan, imported: dict[str, WitFunc]) -> Plan:
    """``plan`` with its link program (:func:`~kuro_wasm.host.component_core.link_program`, typed by the guest's
    imported functions — which the kind requires to be the host's), kept in the cache so a new process links
    nothing again; ``plan`` as it is when it does not link (a type without a flat form — a WASI resource's — or
    a wiring to nothing: the kind then takes the engine's path, or its link says why, as before)."""
    try:
        program = link_program(plan, imported)
    except (wasmtime.WasmtimeError, KeyError, CanonicalTrap):
        return plan
    return dataclasses.replace(plan, program=program.to_data())
