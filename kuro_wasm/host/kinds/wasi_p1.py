"""Guest kind ``wasi-preview1``: WASI preview 1 commands (C/wasi-libc, Rust, Zig, TinyGo, AssemblyScript …).

## The one decision
A module whose imports are all ``wasi_snapshot_preview1`` functions of
:data:`kuro_wasm.model.wasi.FUNCTIONS`, with their exact signatures, is a WASI command, and
everything it can reach is virtual: its argv is the spec's string args after ``argv[0]`` (the
spec's ``argv0``, by default the guest's CID — the name kuro knows a program by), its environment
is the spec's ``env`` and nothing of the host's, its stdin is the run's stdin, fds 1 and 2 are the
kuro output stream, and fd 3, preopened as ``/``, is the session's kuro.fs root seen through a
copy-on-write overlay (:mod:`kuro_wasm.host.wasi_state`). There is one preopen, not also ``.``:
wasi-libc (and so C, C++, Rust's std and Zig's libc target) resolves relative paths against its own
cwd, ``/``, so ``/`` serves both, as ``wasmtime --dir /::/`` does; a second preopen of the same
tree would give one directory two descriptors.

The entry is any exported function taking no parameters and returning nothing or one ``i32``
(``_start`` for a command; for a reactor's export, ``_initialize`` runs first). A run ends ``ok``
or ``exit`` by returning or by ``proc_exit(n)`` (0 → ``ok``, n → ``exit`` with that code, a u32 as the
witx says, so C's ``exit(-1)`` is 4294967295; an entry's ``i32`` result is read the same way), and then
— only then — every pending change is committed (the end-of-run commit point). A trap, kill,
deadline or output cap ends it without that commit: what earlier commit points (``fd_close``,
``fd_sync``) made stays in ``kuro/fs-root-after``, the rest is dropped; a deadline or kill that
falls *during* the end-of-run commit ends the run as that stop too. A call given an argument that is no
value of its witx type traps the guest (:mod:`kuro_wasm.model.wasi_args`): the receipt's trap says
which call and which rule (outcome ``trap``, the guest's, never a host error).

The run's WASI state exists before the module is instantiated, so a start function (which runs
inside instantiation) may call any WASI function, as under wasmtime's WASI; a ``proc_exit`` there
ends the run with its code — the entry is not called, the end-of-run commit is made.

A module that imports from ``wasi_snapshot_preview1`` *and* from ``kuro`` is no kind's (the
two would disagree about the files: ``kuro.fs_write`` replaces whole files at once, WASI writes
through the overlay); ``wasi_unstable`` (preview 0) is not provided.

## Effects
Instantiates and calls through :mod:`kuro_wasm.host.engine`; host functions are raw callbacks
(:mod:`kuro_wasm.host.calls`) over :mod:`kuro_wasm.host.wasi_calls`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import wasmtime

from kuro_wasm.host import engine as _engine
from kuro_wasm.host.calls import define, run_of
from kuro_wasm.host.context import RunContext, Stopped
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.host.kind import CoreModuleKind, Entry
from kuro_wasm.model import wasi
from kuro_wasm.model.wasm_shape import WasmShape

if TYPE_CHECKING:  # the WASI implementation (the overlay, ~5 ms to import) loads with the first WASI guest
    from kuro_wasm.host.wasi_state import WasiState

__all__ = ["KIND", "WasiPreview1"]

_FAULT: Final = int(wasi.Errno.FAULT)


class WasiPreview1(CoreModuleKind):
    """Core modules importing only ``wasi_snapshot_preview1`` functions (see the module docstring)."""

    name = "wasi-preview1"
    import_modules = frozenset({wasi.MODULE})

    def define_functions(self, linker: wasmtime.Linker) -> None:
        from kuro_wasm.host.wasi_calls import HANDLERS

        for spec in wasi.FUNCTIONS.values():
            define(linker, wasi.MODULE, spec.name, spec.params, spec.results, HANDLERS[spec.name], fault=_FAULT)

    def claim(self, shape: WasmShape) -> str | None:
        if shape.component:
            return "the guest is a component, not a core module"
        for imp in shape.imports:
            sig = imp.sig
            params, results = (sig.params, sig.results) if sig is not None else ((), ())
            reason = wasi.check_import(imp.name, params, results, imp.kind)
            if reason is not None:
                return reason
        return None

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        found = shape.export(export)
        if found is None or found.kind != "func" or found.sig is None:
            return f"guest has no function export {export!r}" + (
                " (a WASI command's entry is _start)" if shape.export("_start") is not None else ""
            )
        sig = found.sig
        if sig.params or len(sig.results) > 1 or any(r != "i32" for r in sig.results):
            return f"export {export!r} is {sig.text()}; a WASI entry takes nothing and returns nothing or an i32"
        reason = wasi.check_arg_strings(list(args))
        if reason is not None:
            return reason
        return Entry(export, sig, tuple(args), takes=_TAKES)

    def args_from_words(self, shape: WasmShape, export: str, words: Sequence[str]) -> list[object] | str:
        """A command's argv[1:]: the words as they are."""
        return list(words)

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        """Instantiate with the run's WASI state already made: the module's start function runs inside
        instantiation and may call WASI, as under wasmtime's WASI (``proc_exit`` there ends the run with its
        code, and :meth:`call` then commits and calls no entry)."""
        run = run_of(store._context())
        if run is None:
            return super().instantiate(store, linked)
        st = run.kind_state["wasi"] = _new_state(run)
        instance, failed = super().instantiate(store, linked)
        if failed is not None:
            if st.exit_code is not None and run.stop_reason is None:  # proc_exit in the start function
                return _EXITED, None
            st.record_reads(run)
            failed = _why_trapped(st, run, failed)
        return instance, failed

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        from kuro_wasm.host.wasi_state import WasiState

        st = run.kind_state.get("wasi")
        if not isinstance(st, WasiState):  # instantiated outside a registered run (a test's or bench's own store)
            st = run.kind_state["wasi"] = _new_state(run)
        try:
            outcome = CallOutcome()
            if instance is _EXITED:
                assert st.exit_code is not None
                outcome = CallOutcome(values=(st.exit_code,))
            else:
                run.memory = _engine.lookup_memory(store, instance)
                if entry.export != "_start":  # a reactor: its _initialize (wasi-libc's constructors) runs first
                    init = _engine.lookup_func(store, instance, "_initialize")
                    if init is not None:
                        outcome = _engine.call_export(store, init, (), (), ())
                if outcome.trap is None and outcome.error is None:
                    func = _engine.lookup_func(store, instance, entry.export)
                    outcome = _engine.call_export(store, func, (), (), entry.sig.results)
            if (outcome.trap is not None or outcome.error is not None) and st.exit_code is not None:
                if run.stop_reason is None:  # proc_exit: the guest chose its code; nothing stopped it
                    outcome = CallOutcome(values=(st.exit_code,))
            elif outcome.trap is not None or outcome.error is not None:
                outcome = _why_trapped(st, run, outcome)
            elif outcome.values:  # an entry's i32 result is an exit code as proc_exit's: a u32
                outcome = replace(outcome, values=(int(outcome.values[0]) % 2**32,))
            if outcome.trap is None and outcome.error is None:
                outcome = _commit(st, run, outcome)
        finally:
            st.record_reads(run)
        return outcome


def _why_trapped(st: WasiState, run: RunContext, outcome: CallOutcome) -> CallOutcome:
    """``outcome``, or — when a WASI call trapped the guest for an argument no value of its witx type, and nothing
    stopped the run — that trap, with the call's reason as its message (the trampoline's text says none)."""
    if st.trap is None or run.stop_reason is not None:
        return outcome
    return CallOutcome(trap=_engine.TrapInfo(None, st.trap))


def _new_state(run: RunContext) -> WasiState:
    """A WASI run's state from its spec: argv (``argv0``, then the spec's args), environment, fds, seed."""
    from kuro_wasm.host.wasi_state import WasiState, initial_fds

    spec = run.command
    argv0: str = spec.get("kuro/argv0", spec.get("kuro/guest", ""))
    argv = tuple(str(a).encode("utf-8") for a in (argv0, *spec.get("kuro/args", ())))
    environ = tuple(wasi.environ_strings(spec.get("kuro/env", {})))
    return WasiState(argv, environ, initial_fds(run.grant), seed=run.seed)


def _commit(st: WasiState, run: RunContext, outcome: CallOutcome) -> CallOutcome:
    """The end-of-run commit point. The deadline (or a kill) found part-way through it ends the run as that
    stop, exactly as in the guest's own code — never as a host error."""
    try:
        if not st.commit(run):
            run.kind_state.setdefault("receipt", {})["error"] = st.commit_error
    except Stopped as stop:
        return CallOutcome(error=f"kuro: stopped ({stop.reason})")
    return outcome


#: The instance :meth:`WasiPreview1.instantiate` answers when the start function called ``proc_exit``.
_EXITED: Final = object()

#: The optional spec keys a WASI command uses (checked, then read from the spec when it runs).
_TAKES: Final = frozenset({"kuro/env", "kuro/argv0"})
KIND: Final = WasiPreview1()
