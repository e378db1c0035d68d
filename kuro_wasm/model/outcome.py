"""How a guest run ended: the host's facts → the receipt's exit code, outcome and trap.

## The one decision
*Why* a run ended is decided in one order, and the first applicable rule wins:

1. a stop the host asked for (:data:`STOPS`): ``cancelled`` 130 (kill),
   ``timeout`` 124 (deadline, ``timed-out?``), ``output-capped`` 125, or
   ``host-error`` 70 (a host bug inside an import). The first stop
   recorded is final, so a capped run that then misses its deadline stays 125;
2. a wasm trap: kind from the trap code (``STACK_OVERFLOW`` → ``stack-overflow``),
   with the exceptions in :data:`TRAP_OUTCOMES` (``out-of-fuel`` →
   ``fuel-exhausted`` 124); every other kind → ``trap`` 134;
3. a wasmtime error that is not a trap: ``host-error`` 70 when it says the
   *host* ran out of a resource (:data:`HOST_RESOURCE_FAILURES`: out of memory,
   ``os error 12``) — a host failure is never blamed on the guest; otherwise
   ``load-error`` 126 while instantiating (e.g. a memory limit below the module's
   minimum), else ``trap`` 134;
4. the export's ``i32`` result: 0 → ``ok``, anything else → ``exit``.

The wasmtime error text is reduced to the line that says what happened
(:func:`cause`), so receipts carry ``"wasm trap: call stack exhausted"``, not a
backtrace.

## Pure
Strings and ints in, a result mapping (the host keys of
:func:`kuro_wasm.model.receipt.receipt`) out. No wasmtime import: the host passes
the trap code's *name*.

## Not done here
No receipt assembly (:mod:`kuro_wasm.model.stream`), no load failures
(:mod:`kuro_wasm.host.loader` decides ``load-error``/``guest-not-found``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["HOST_RESOURCE_FAILURES", "STOPS", "TRAP_OUTCOMES", "cause", "decide", "host_failure", "trap_kind"]

#: stop reason → (exit code, outcome). The host records at most one (the first).
STOPS: Final[Mapping[str, tuple[int, str]]] = {
    "cancelled": (130, "cancelled"),
    "timeout": (124, "timeout"),
    "output-capped": (125, "output-capped"),
    "host-error": (70, "host-error"),
}

#: Fragments of a wasmtime error that mean the host (not the guest) lacked a resource.
HOST_RESOURCE_FAILURES: Final[tuple[str, ...]] = (
    "cannot allocate memory",
    "os error 12",
    "out of memory",
    "failed to allocate",
    "resource temporarily unavailable",
)


def host_failure(text: str) -> bool:
    """True if a wasmtime error's text says the host ran out of a resource.

    >>> host_failure("Cannot allocate memory (os error 12)"), host_failure("memory minimum exceeds limits")
    (True, False)
    """
    lowered = text.lower()
    return any(fragment in lowered for fragment in HOST_RESOURCE_FAILURES)


#: trap kinds that are not ``trap`` 134: kind → (exit code, outcome, error text).
TRAP_OUTCOMES: Final[Mapping[str, tuple[int, str, str]]] = {
    "out-of-fuel": (124, "fuel-exhausted", "the guest ran out of fuel"),
    "interrupt": (124, "timeout", "the guest was interrupted"),
}


def trap_kind(code_name: str | None) -> str:
    """The receipt's trap kind for a wasmtime ``TrapCode`` name (``None``: a trap without a code).

    >>> trap_kind("STACK_OVERFLOW"), trap_kind(None)
    ('stack-overflow', 'trap')
    """
    return code_name.lower().replace("_", "-") if code_name else "trap"


def cause(text: str) -> str:
    """The line of a wasmtime error that says what happened: the last after "Caused by:", else the first.

    Several causes are numbered (``0: memory fault at …``, ``1: wasm trap: …``); the number is not
    part of what happened, and whether a fault is listed depends on how the engine bounds memory (a
    worker process's engine checks bounds explicitly), so it is dropped.

    >>> cause("error while executing at wasm backtrace:\\n    0: f\\n\\nCaused by:\\n    wasm trap: unreachable\\n")
    'wasm trap: unreachable'
    >>> cause("Caused by:\\n    0: memory fault at 0x7f00\\n    1: wasm trap: out of bounds memory access")
    'wasm trap: out of bounds memory access'
    >>> cause("")
    ''
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if "Caused by:" in lines:
        after = lines[lines.index("Caused by:") + 1 :]
        if after:
            last = after[-1]
            number, colon, rest = last.partition(": ")
            return rest if colon and number.isdigit() and rest else last
    return lines[0] if lines else ""


def decide(
    *,
    stop: str | None,
    host_error: str | None = None,
    trap_code: str | None = None,
    trap_message: str | None = None,
    error: str | None = None,
    instantiating: bool = False,
    values: Sequence[int | float] = (),
) -> dict[str, Any]:
    """The host result keys (``exit-code``, ``outcome`` and maybe ``timed-out?``/``trap``/``error``).

    ``stop`` is the run's first stop reason (a key of :data:`STOPS`) or None;
    ``trap_code``/``trap_message`` describe a wasm trap (``trap_message`` not
    None means there was one); ``error`` is a non-trap wasmtime error's text.

    >>> decide(stop="output-capped", trap_message="kuro: stopped")
    {'exit-code': 125, 'outcome': 'output-capped'}
    >>> decide(stop=None, values=(0,))
    {'exit-code': 0, 'outcome': 'ok'}
    """
    if stop is not None:
        code, outcome = STOPS.get(stop, STOPS["host-error"])
        result: dict[str, Any] = {"exit-code": code, "outcome": outcome}
        if outcome == "timeout":
            result["timed-out?"] = True
        if outcome == "host-error":
            result["error"] = f"host error: {host_error or stop}"
        return result
    if trap_message is not None:
        kind = trap_kind(trap_code)
        special = TRAP_OUTCOMES.get(kind)
        if special is not None:
            code, outcome, text = special
            out: dict[str, Any] = {"exit-code": code, "outcome": outcome, "error": text}
            if outcome == "timeout":
                out["timed-out?"] = True
            return out
        return {"exit-code": 134, "outcome": "trap", "trap": {"kind": kind, "message": cause(trap_message) or kind}}
    if error is not None:
        message = cause(error) or "error"
        if host_failure(error):
            return {"exit-code": 70, "outcome": "host-error", "error": f"host error: {message}"}
        if instantiating:
            return {"exit-code": 126, "outcome": "load-error", "error": f"instantiation failed: {message}"}
        return {"exit-code": 134, "outcome": "trap", "trap": {"kind": "error", "message": message}}
    code = int(values[0]) if values else 0
    return {"exit-code": code, "outcome": "ok" if code == 0 else "exit"}
