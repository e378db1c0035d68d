"""A virtual WASI 0.2 for components: stdio on the kuro stream, clocks and randomness, no files, no network.

## The one decision
A component that imports WASI 0.2 (every ``componentize-py`` guest does) gets
a *virtual* WASI whose effects are the kuro run's and nothing else's:

============================  =====================================================
interface                     what the guest gets
============================  =====================================================
wasi:cli/stdout, stderr       an output stream onto the run's stream (same cap)
wasi:cli/stdin                an input stream on the run's stdin (``stdin/read``;
                              without it reads end at once and are recorded in
                              ``kuro/denials``)
wasi:cli/environment          the spec's ``kuro/env`` (sorted by name), arguments
                              ``argv0`` then the spec's string args, no cwd
wasi:cli/exit                 ends the run with exit code 0 (ok) or 1 (err)
wasi:cli/terminal-*           no terminal (``none``)
wasi:io/poll, streams, error  the streams above; pollables on stdin and the clocks
wasi:clocks/*                 the run's clocks (:mod:`kuro_wasm.host.clocks`: the host's,
                              readings counted; virtual in a deterministic run)
wasi:random/*                 the run's random bytes (the host's, counted; the
                              seeded stream in a deterministic run)
wasi:filesystem/preopens      no preopened directory (kuro.fs is ``kuro:host/fs``)
wasi:filesystem/types         linked, unreachable: without a preopen no descriptor
                              exists; every function traps if called
wasi:sockets/*                linked as traps: no network; calling one traps
============================  =====================================================

Only these interfaces, at any 0.2.x version, are accepted; any other import is
still a ``load-error`` naming it. Functions of the accepted interfaces that are
not implemented here (the filesystem's and the sockets') are linked as traps
(``define_unknown_imports_as_traps``), so a guest that merely imports them runs,
and one that calls them stops with a trap that names the function.

Clock readings and random bytes are the run's nondeterminism: their counts go
into the receipt as ``kuro/nondeterminism`` (``{"monotonic-clock": n,
"wall-clock": n, "random-bytes": n}``, only the ones that happened), so a run
that read neither says so by its absence. A deterministic run (``deterministic=True``)
reads neither from the world: its clocks and random bytes are those of a WASI
preview 1 run with the same seed (:class:`~kuro_wasm.host.clocks.RunClocks`), a
timer pollable is due when the virtual clock is moved to it (a sleep takes no
time), and nothing is counted.

The environment and arguments are what the component kind put in
``kind_state["wasi-cli"]`` from the spec (``kuro/env``, ``kuro/argv0``, the args).

Values are bounded by the run's ``max_value_bytes`` as the kuro world's are:
``check-write`` grants at most that (and 1 MiB), a read returns at most that, and
a guest that writes more than ``check-write`` last permitted it (less what it wrote
since: the permit is kept per output stream), more than 4096 bytes in one
``blocking-write-and-flush`` (WASI 0.2's contract, which wasmtime's WASI enforces
too), or asks for more random bytes than fit (WASI gives none of these calls an
error to answer) traps with a message saying so (:func:`fault`) — the guest's
fault, not the host's.

## Effects
Host resources through wasmtime's component C API; the run's stream, stdin and
condition variable; the run's clocks (the host's, unless deterministic).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_wasm.host.clocks import RunClocks
from kuro_wasm.host.component_values import bytes_of, write
from kuro_wasm.host.context import RunContext
from kuro_wasm.model.wit import WitType

__all__ = ["FUNCTIONS", "INTERFACES", "RESOURCES", "SIGNATURES", "clocks_of", "dropped", "fault", "provides"]

_RESOURCE_KIND: Final = ffi.WASMTIME_COMPONENT_RESOURCE.value
_MAX_RANDOM: Final = 1 << 20
_WRITE_BUDGET: Final = 1 << 20  # what check-write grants (below wasmtime's per-call copy limit)
_BLOCKING_WRITE: Final = 4096  # what one blocking-write-and-flush may carry (WASI 0.2: "up to 4096 bytes")

#: resource name → (defining interface, host type id)
RESOURCES: Final[dict[str, tuple[str, int]]] = {
    "pollable": ("wasi:io/poll", 1),
    "error": ("wasi:io/error", 2),
    "input-stream": ("wasi:io/streams", 3),
    "output-stream": ("wasi:io/streams", 4),
    "terminal-input": ("wasi:cli/terminal-input", 5),
    "terminal-output": ("wasi:cli/terminal-output", 6),
    "descriptor": ("wasi:filesystem/types", 7),
    "directory-entry-stream": ("wasi:filesystem/types", 8),
    "network": ("wasi:sockets/network", 9),
    "tcp-socket": ("wasi:sockets/tcp", 10),
    "udp-socket": ("wasi:sockets/udp", 11),
    "incoming-datagram-stream": ("wasi:sockets/udp", 12),
    "outgoing-datagram-stream": ("wasi:sockets/udp", 13),
    "resolve-address-stream": ("wasi:sockets/ip-name-lookup", 14),
}
_TYPE_ID: Final = {name: tid for name, (_, tid) in RESOURCES.items()}

#: Every WASI interface a component may import (without its version).
INTERFACES: Final = frozenset(
    {
        *(f"wasi:cli/{i}" for i in ("environment", "exit", "stdin", "stdout", "stderr")),
        *(f"wasi:cli/terminal-{i}" for i in ("input", "output", "stdin", "stdout", "stderr")),
        "wasi:io/poll",
        "wasi:io/error",
        "wasi:io/streams",
        "wasi:clocks/monotonic-clock",
        "wasi:clocks/wall-clock",
        "wasi:random/random",
        "wasi:random/insecure",
        "wasi:random/insecure-seed",
        "wasi:filesystem/types",
        "wasi:filesystem/preopens",
        *(
            f"wasi:sockets/{i}"
            for i in ("network", "instance-network", "tcp", "tcp-create-socket", "udp", "udp-create-socket")
        ),
        "wasi:sockets/ip-name-lookup",
    }
)


def provides(instance: str) -> bool:
    """True for an imported instance name this virtual WASI provides (any 0.2.x version).

    >>> provides("wasi:cli/stdout@0.2.0"), provides("wasi:http/types@0.2.0"), provides("wasi:cli/stdout@0.3.0")
    (True, False, False)
    """
    name, _, version = instance.partition("@")
    return name in INTERFACES and version.startswith("0.2.")


# ---- the run's resource table

_Val = Any


class _Pollable:
    __slots__ = ("deadline_ns", "stdin")

    def __init__(self, *, stdin: bool = False, deadline_ns: int | None = None) -> None:
        self.stdin, self.deadline_ns = stdin, deadline_ns


def _table(run: RunContext) -> dict[int, Any]:
    table: dict[int, Any] | None = run.kind_state.get("wasi-resources")
    if table is None:
        table = run.kind_state["wasi-resources"] = {}
    return table


def dropped(run: RunContext, rep: int) -> None:
    """The guest dropped the handle of ``rep``: its object goes, and ``rep`` may stand for a new one."""
    if _table(run).pop(rep, None) is not None:
        run.kind_state.setdefault("wasi-free-reps", []).append(rep)


def _rep(run: RunContext) -> int:
    """A rep no live handle has: a dropped one, else the next (every rep in 1..N is live or dropped)."""
    free: list[int] = run.kind_state.get("wasi-free-reps", [])
    return free.pop() if free else len(_table(run)) + 1


def fault(run: RunContext, message: str) -> None:
    """Trap the guest for breaking a rule of the call it made: the component kind ends the run as a ``trap``
    whose message is ``message``. Returns None (a handler's "trap" answer)."""
    run.kind_state["fault"] = message


def clocks_of(run: RunContext) -> RunClocks:
    """The run's clocks and random stream (made on first use, seeded when the run is deterministic)."""
    clocks: RunClocks | None = run.kind_state.get("clocks")
    if clocks is None:
        clocks = run.kind_state["clocks"] = RunClocks(run.seed)
    return clocks


def _new_resource(run: RunContext, cctx: Any, val: _Val, kind: str, obj: Any) -> bool | None:
    """Make ``*val`` an owned handle of resource ``kind`` standing for ``obj``: True, or None (a handler's
    "trap") when wasmtime refuses one more handle — the guest holds its store's limit of them (the guest's
    fault, like any other limit it meets)."""
    rep = _rep(run)
    host = ffi.wasmtime_component_resource_host_new(True, rep, _TYPE_ID[kind])
    any_ = ctypes.POINTER(ffi.wasmtime_component_resource_any_t)()
    err = ffi.wasmtime_component_resource_host_to_any(cctx, host, ctypes.byref(any_))
    ffi.wasmtime_component_resource_host_delete(host)
    if err:
        run.kind_state.setdefault("wasi-free-reps", []).append(rep)
        fault(run, f"kuro: a new {kind} handle: {_first_line(wasmtime.WasmtimeError._from_ptr(err))}")
        return None
    _table(run)[rep] = obj
    val.contents.kind = _RESOURCE_KIND
    val.contents.of.resource = any_
    return True


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _resource(run: RunContext, cctx: Any, val: Any) -> Any:
    """The object behind the resource handle in ``val``.

    Every borrow a host function receives must be taken this way before the call ends: turning the
    handle into a host resource is what gives the borrow back (a call that ends with one outstanding traps).
    """
    handle = val.of.resource
    host = ctypes.POINTER(ffi.wasmtime_component_resource_host_t)()
    err = ffi.wasmtime_component_resource_any_to_host(cctx, handle, ctypes.byref(host))
    if err:
        raise RuntimeError("not a host resource")
    rep = int(ffi.wasmtime_component_resource_host_rep(host))
    ffi.wasmtime_component_resource_host_delete(host)
    return _table(run).get(rep)


# ---- results

_U64: Final = WitType("u64")
_U64_MAX: Final = 2**64 - 1
_BYTES: Final = WitType("list", (WitType("u8"),))
_STRINGS: Final = WitType("list", (WitType("string"),))
_ENV: Final = WitType("list", (WitType("tuple", (WitType("string"), WitType("string"))),))
_DATETIME: Final = WitType("record", (WitType("u64"), WitType("u32")), ("seconds", "nanoseconds"))
_OPTION_STRING: Final = WitType("option", (WitType("string"),))
_INDEXES: Final = WitType("list", (WitType("u32"),))


def _result(results: _Val, ok: bool, payload: Callable[[_Val], None] | None = None) -> bool:
    """``result<…, stream-error>``: ok with ``payload`` writing the value, or err ``closed``."""
    c = results[0]
    c.kind = ffi.WASMTIME_COMPONENT_RESULT.value
    c.of.result.is_ok = ok
    raw = ffi.wasmtime_component_val_t()
    if ok and payload is None:
        c.of.result.val = None
        return True
    if ok:
        assert payload is not None
        payload(ctypes.pointer(raw))
    else:  # stream-error::closed
        raw.kind = ffi.WASMTIME_COMPONENT_VARIANT.value
        raw.of.variant.discriminant = _name("closed")
        raw.of.variant.val = None
    c.of.result.val = ffi.wasmtime_component_val_new(ctypes.byref(raw))
    return True


def _name(text: str) -> Any:
    from kuro_wasm.host.component_values import new_name

    return new_name(text)


# ---- streams


class _Out:
    """An output stream: the run's stream it writes to, and what the last ``check-write`` still permits."""

    __slots__ = ("permit", "stream")

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.permit = 0


class _In:
    __slots__ = ()


def _get_stream(kind: str, obj_of: Callable[[], Any]) -> Any:
    def get(run: RunContext, cctx: Any, _args: _Val, results: _Val) -> bool | None:
        return _new_resource(run, cctx, results, kind, obj_of())

    return get


def _write_budget(run: RunContext) -> int:
    return min(_WRITE_BUDGET, run.max_value_bytes)


def _emit(run: RunContext, cctx: Any, args: _Val, results: _Val, *, blocking: bool) -> bool | None:
    """``write`` (within what ``check-write`` permitted) or ``blocking-write-and-flush`` (at most 4096 bytes):
    past either, the guest's trap, as WASI 0.2 says (and wasmtime's WASI does for the 4096)."""
    out = _resource(run, cctx, args[0])
    if not isinstance(out, _Out):
        return _result(results, False)
    n = int(args[1].of.list.size)
    if blocking and n > _BLOCKING_WRITE:
        fault(run, f"kuro: wasi:io/streams blocking-write-and-flush of {n} bytes: more than {_BLOCKING_WRITE}")
        return None
    if not blocking and n > out.permit:
        fault(run, f"kuro: wasi:io/streams write of {n} bytes: more than check-write permitted ({out.permit})")
        return None
    if n > run.max_value_bytes:
        fault(run, f"kuro: wasi:io/streams write of {n} bytes: more than max_value_bytes ({run.max_value_bytes})")
        return None
    if not blocking:
        out.permit -= n
    if not run.emit(out.stream, bytes_of(args[1].of.list)):
        run.stop("output-capped")
        return None
    return _result(results, True)


def _check_write(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    out = _resource(run, cctx, args[0])  # every method's self is a borrow, given back before the call ends
    if isinstance(out, _Out):  # written at once: the whole budget is free again
        out.permit = _write_budget(run)
    return _result(results, True, lambda v: write(_U64, _write_budget(run), v))


def _flush(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    _resource(run, cctx, args[0])
    return _result(results, True)


def _subscribe_out(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    _resource(run, cctx, args[0])
    return _new_resource(run, cctx, results, "pollable", _Pollable())


def _subscribe_in(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    _resource(run, cctx, args[0])
    return _new_resource(run, cctx, results, "pollable", _Pollable(stdin=True))


def _stdin_denied(run: RunContext) -> bool:
    if "stdin/read" in run.grant:
        return False
    run.deny("wasi:io/streams#[method]input-stream.read", "stdin/read", None)
    return True


def _read(run: RunContext, cctx: Any, args: _Val, results: _Val, *, blocking: bool) -> bool | None:
    _resource(run, cctx, args[0])
    if _stdin_denied(run):
        return _result(results, False)
    cap = min(int(args[1].of.u64), _write_budget(run))
    assert run.stdin is not None
    with run.cond:
        while True:
            if run.should_stop() is not None:
                return None
            chunk = run.stdin.take(cap) if cap else b""
            if chunk is None and blocking:
                run.cond.wait(timeout=max(0.0, min(run.deadline - time.monotonic(), 0.05)))
                continue
            break
    run.stdin.report()
    if chunk == b"" and cap:
        return _result(results, False)  # end of input: closed
    data = chunk or b""
    return _result(results, True, lambda v: write(_BYTES, data, v))


# ---- poll and clocks


def _ready(run: RunContext, p: Any) -> bool:
    if isinstance(p, _Pollable):
        if p.stdin:
            assert run.stdin is not None
            return run.stdin.ready()
        if p.deadline_ns is not None:
            return clocks_of(run).monotonic_now_ns() >= p.deadline_ns
    return True


def _wait(run: RunContext, pollables: list[Any]) -> list[int] | None:
    """Indexes of the ready pollables, waiting until one is; None if the run must stop.

    In a deterministic run a timer is never waited for: when nothing is ready the virtual clock
    moves to the earliest timer (stdin, input the caller gave, is still waited for).
    """
    clocks = clocks_of(run)
    with run.cond:
        while True:
            if run.should_stop() is not None:
                return None
            ready = [i for i, p in enumerate(pollables) if _ready(run, p)]
            if ready:
                return ready
            waits = [p.deadline_ns for p in pollables if isinstance(p, _Pollable) and p.deadline_ns is not None]
            if waits and clocks.virtual:
                clocks.advance(min(waits) - clocks.monotonic_now_ns())
                continue
            until = (min(waits) - time.monotonic_ns()) / 1e9 if waits else 0.05
            run.cond.wait(timeout=max(0.0, min(until, run.deadline - time.monotonic(), 0.05)))


def _block(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    return None if _wait(run, [_resource(run, cctx, args[0])]) is None else True


def _ready_method(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    results[0].kind = ffi.WASMTIME_COMPONENT_BOOL.value
    results[0].of.boolean = _ready(run, _resource(run, cctx, args[0]))
    return True


def _poll(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    lst = args[0].of.list
    if not lst.size:  # WASI: at least one (wasmtime traps too); waiting for none of nothing never ends
        fault(run, "kuro: wasi:io/poll poll of no pollable would never return")
        return None
    base = int(ctypes.cast(lst.data, ctypes.c_void_p).value or 0)
    size = ctypes.sizeof(ffi.wasmtime_component_val_t)
    items = [_resource(run, cctx, ffi.wasmtime_component_val_t.from_address(base + i * size)) for i in range(lst.size)]
    ready = _wait(run, items)
    if ready is None:
        return None
    write(_INDEXES, ready, results)
    return True


def _mono_now(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    # a deterministic run's virtual clock moved by a sleep to the end of time stays there: an instant is a u64
    write(_U64, min(clocks_of(run).monotonic_ns(run), _U64_MAX), results)
    return True


def _mono_resolution(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    write(_U64, 1000, results)
    return True


def _subscribe_instant(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    return _new_resource(run, cctx, results, "pollable", _Pollable(deadline_ns=int(args[0].of.u64)))


def _subscribe_duration(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    deadline = min(clocks_of(run).monotonic_now_ns() + int(args[0].of.u64), _U64_MAX)
    return _new_resource(run, cctx, results, "pollable", _Pollable(deadline_ns=deadline))


def _wall_now(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    ns = clocks_of(run).realtime_ns(run)
    write(_DATETIME, (ns // 1_000_000_000, ns % 1_000_000_000), results)
    return True


def _wall_resolution(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    write(_DATETIME, (0, 1000), results)
    return True


def _random_bytes(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool | None:
    n = int(args[0].of.u64)
    most = min(_MAX_RANDOM, run.max_value_bytes)
    if n > most:
        fault(run, f"kuro: wasi:random get-random-bytes({n}): more than {most} bytes (max_value_bytes, 1 MiB)")
        return None
    write(_BYTES, clocks_of(run).random(run, n), results)
    return True


def _random_u64(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    write(_U64, int.from_bytes(clocks_of(run).random(run, 8), "little"), results)
    return True


def _insecure_seed(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    seed = clocks_of(run).random(run, 16)
    write(
        WitType("tuple", (_U64, _U64)),
        (int.from_bytes(seed[:8], "little"), int.from_bytes(seed[8:], "little")),
        results,
    )
    return True


# ---- cli


def _cli(run: RunContext) -> tuple[list[tuple[str, str]], list[str]]:
    """The environment pairs and the arguments the component kind set for this run (none if it set none)."""
    env, argv = run.kind_state.get("wasi-cli", ((), ()))
    return list(env), list(argv)


def _environment(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    write(_ENV, _cli(run)[0], results)
    return True


def _arguments(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    write(_STRINGS, _cli(run)[1], results)
    return True


def _empty(t: WitType) -> Callable[[RunContext, Any, _Val, _Val], bool]:
    def answer(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
        write(t, [] if t.kind == "list" else None, results)
        return True

    return answer


def _exit(run: RunContext, cctx: Any, args: _Val, results: _Val) -> None:
    run.kind_state["exit-code"] = 0 if args[0].of.result.is_ok else 1
    return None  # a trap ends the guest; the kind reads the exit code (no stop reason: it is not a stop)


def _no_terminal(run: RunContext, cctx: Any, args: _Val, results: _Val) -> bool:
    results[0].kind = ffi.WASMTIME_COMPONENT_OPTION.value
    results[0].of.option = None
    return True


_Handler = Callable[[RunContext, Any, _Val, _Val], "bool | None"]

#: interface (without version) → function → handler; anything else of INTERFACES is linked as a trap.
FUNCTIONS: Final[dict[str, dict[str, _Handler]]] = {
    "wasi:cli/stdout": {"get-stdout": _get_stream("output-stream", lambda: _Out("stdout"))},
    "wasi:cli/stderr": {"get-stderr": _get_stream("output-stream", lambda: _Out("stderr"))},
    "wasi:cli/stdin": {"get-stdin": _get_stream("input-stream", _In)},
    "wasi:cli/environment": {
        "get-environment": _environment,
        "get-arguments": _arguments,
        "initial-cwd": _empty(_OPTION_STRING),
    },
    "wasi:cli/exit": {"exit": _exit},
    "wasi:cli/terminal-stdin": {"get-terminal-stdin": _no_terminal},
    "wasi:cli/terminal-stdout": {"get-terminal-stdout": _no_terminal},
    "wasi:cli/terminal-stderr": {"get-terminal-stderr": _no_terminal},
    "wasi:io/poll": {"[method]pollable.block": _block, "[method]pollable.ready": _ready_method, "poll": _poll},
    "wasi:io/streams": {
        "[method]output-stream.check-write": _check_write,
        "[method]output-stream.write": lambda run, c, a, r: _emit(run, c, a, r, blocking=False),
        "[method]output-stream.blocking-write-and-flush": lambda run, c, a, r: _emit(run, c, a, r, blocking=True),
        "[method]output-stream.flush": _flush,
        "[method]output-stream.blocking-flush": _flush,
        "[method]output-stream.subscribe": _subscribe_out,
        "[method]input-stream.read": lambda run, c, a, r: _read(run, c, a, r, blocking=False),
        "[method]input-stream.blocking-read": lambda run, c, a, r: _read(run, c, a, r, blocking=True),
        "[method]input-stream.subscribe": _subscribe_in,
    },
    "wasi:clocks/monotonic-clock": {
        "now": _mono_now,
        "resolution": _mono_resolution,
        "subscribe-instant": _subscribe_instant,
        "subscribe-duration": _subscribe_duration,
    },
    "wasi:clocks/wall-clock": {"now": _wall_now, "resolution": _wall_resolution},
    "wasi:random/random": {"get-random-bytes": _random_bytes, "get-random-u64": _random_u64},
    "wasi:random/insecure": {"get-insecure-random-bytes": _random_bytes, "get-insecure-random-u64": _random_u64},
    "wasi:random/insecure-seed": {"insecure-seed": _insecure_seed},
    "wasi:filesystem/preopens": {
        "get-directories": _empty(WitType("list", (WitType("tuple", (WitType("string"), WitType("string"))),)))
    },
}

_BORROW: Final = WitType("borrow", (), ("resource",))
_OWN: Final = WitType("own", (), ("resource",))
_STREAM_ERROR: Final = WitType("variant", (_OWN, None), ("last-operation-failed", "closed"))
_STREAM_RESULT: Final = WitType("result", (None, _STREAM_ERROR))
_Sig = tuple[tuple[WitType, ...], WitType | None]
_RANDOM_BYTES: Final[_Sig] = ((_U64,), _BYTES)


def _none(result: WitType) -> _Sig:
    return ((), result)


def _self(result: WitType | None) -> _Sig:
    return ((_BORROW,), result)


#: interface → function → (its parameter types, its result type) as WASI 0.2 declares them (a resource as
#: ``own``/``borrow`` of any resource): what a guest's import of it is compared with when it is linked, and each
#: call's arguments are checked against before a handler reads them
#: (:func:`~kuro_wasm.host.component_values.fits`; the C API links a host function untyped).
SIGNATURES: Final[dict[str, dict[str, _Sig]]] = {
    "wasi:cli/stdout": {"get-stdout": _none(_OWN)},
    "wasi:cli/stderr": {"get-stderr": _none(_OWN)},
    "wasi:cli/stdin": {"get-stdin": _none(_OWN)},
    "wasi:cli/environment": {
        "get-environment": _none(WitType("list", (WitType("tuple", (WitType("string"), WitType("string"))),))),
        "get-arguments": _none(WitType("list", (WitType("string"),))),
        "initial-cwd": _none(_OPTION_STRING),
    },
    "wasi:cli/exit": {"exit": ((WitType("result", (None, None)),), None)},
    "wasi:cli/terminal-stdin": {"get-terminal-stdin": _none(WitType("option", (_OWN,)))},
    "wasi:cli/terminal-stdout": {"get-terminal-stdout": _none(WitType("option", (_OWN,)))},
    "wasi:cli/terminal-stderr": {"get-terminal-stderr": _none(WitType("option", (_OWN,)))},
    "wasi:io/poll": {
        "[method]pollable.block": _self(None),
        "[method]pollable.ready": _self(WitType("bool")),
        "poll": ((WitType("list", (_BORROW,)),), WitType("list", (WitType("u32"),))),
    },
    "wasi:io/streams": {
        "[method]output-stream.check-write": _self(WitType("result", (_U64, _STREAM_ERROR))),
        "[method]output-stream.write": ((_BORROW, _BYTES), _STREAM_RESULT),
        "[method]output-stream.blocking-write-and-flush": ((_BORROW, _BYTES), _STREAM_RESULT),
        "[method]output-stream.flush": _self(_STREAM_RESULT),
        "[method]output-stream.blocking-flush": _self(_STREAM_RESULT),
        "[method]output-stream.subscribe": _self(_OWN),
        "[method]input-stream.read": ((_BORROW, _U64), WitType("result", (_BYTES, _STREAM_ERROR))),
        "[method]input-stream.blocking-read": ((_BORROW, _U64), WitType("result", (_BYTES, _STREAM_ERROR))),
        "[method]input-stream.subscribe": _self(_OWN),
    },
    "wasi:clocks/monotonic-clock": {
        "now": _none(_U64),
        "resolution": _none(_U64),
        "subscribe-instant": ((_U64,), _OWN),
        "subscribe-duration": ((_U64,), _OWN),
    },
    "wasi:clocks/wall-clock": {"now": _none(_DATETIME), "resolution": _none(_DATETIME)},
    "wasi:random/random": {"get-random-bytes": _RANDOM_BYTES, "get-random-u64": _none(_U64)},
    "wasi:random/insecure": {"get-insecure-random-bytes": _RANDOM_BYTES, "get-insecure-random-u64": _none(_U64)},
    "wasi:random/insecure-seed": {"insecure-seed": _none(WitType("tuple", (_U64, _U64)))},
    "wasi:filesystem/preopens": {
        "get-directories": _none(WitType("list", (WitType("tuple", (_OWN, WitType("string"))),)))
    },
}
