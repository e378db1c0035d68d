"""Floors under the gated-call figures of ``tools/bench.py`` (``calls``, ``wasi``): what Python over ctypes costs
before any of kuro's rules run. Figures, not tests: ``.venv/bin/python tools/bench_floor.py [--quick]``.

Each contender is a raw unchecked host function (the kind kuro's imports are) called by a wasm loop N times,
minus the same loop run 0 times, CPU time of the calling thread, best of interleaved rounds (ABAB…):

* ``bare``: answers 0 (bench.py's anchor for the gated calls);
* ``write0 floor``: a ``kuro.write(1, 0, 0)`` doing only what no gate can skip — find the run (a
  context-variable read, as kuro's), unpack the three arguments, check the range against the memory size last read,
  append the chunk to the run's stream (:class:`kuro_wasm.model.stream.Writer`), answer;
* ``fd_write floor``: a 1-byte ``fd_write`` doing only the bytes' work — unpack four arguments, read the
  iovec at the memory's kept base (a run keeps it: memories never move under the default profile), copy
  the byte (one ``struct`` read, :data:`kuro_wasm.host.calls.COPY_SMALL`, as kuro copies short writes),
  append it to two lists, write ``nwritten``, answer (no run lookup past the context variable, no fd table,
  no bounds, no stream rules);
* ``one ctypes call``: the same loop whose host function makes one ``wasmtime_memory_data`` call (the
  memory-base lookup) and answers 0 — the price of any C call from a host function.
"""

from __future__ import annotations

import argparse
import ctypes
import struct
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kuro_wasm.host import calls, engine
from kuro_wasm.model.stream import Writer

LOOP = """(module
  (import "f" "call" (func $f (param {params}) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\\10\\00\\00\\00\\01\\00\\00\\00")
  (data (i32.const 16) "x")
  (func (export "run") (param $n i32)
    (block $done (loop $again (br_if $done (i32.eqz (local.get $n)))
      (drop (call $f {args}))
      (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br $again)))))"""
WRITE = ("i32 i32 i32", "(i32.const 1) (i32.const 0) (i32.const 0)")
FD_WRITE = ("i32 i32 i32 i32", "(i32.const 1) (i32.const 0) (i32.const 1) (i32.const 32)")

SPACE = calls.ADDRESS_SPACE
ANSWER = struct.Struct("<i").pack_into
ARGS3 = struct.Struct("<i12xi12xi12x").unpack_from
ARGS4 = struct.Struct("<i12xi12xi12xi12x").unpack_from
IOVEC = struct.Struct("<II").unpack_from
U32 = struct.Struct("<I").pack_into
memory_data = engine.foreign("wasmtime_memory_data", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, keep_gil=True)


class _Run:
    """What a host function reaches per store here (stands in for a run's context)."""

    def __init__(self) -> None:
        self.context = self.memory = self.base = 0
        self.size = 65536
        self.writer = Writer(max_output_bytes=1 << 40, max_chunks=1 << 40)
        self.datas: list[bytes] = []
        self.names: list[str] = []


CURRENT: ContextVar[_Run] = ContextVar("floor_run")


def bare(_env: Any, _caller: int, vals: int, _n: int) -> None:
    ANSWER(SPACE, vals, 0)


def write0_floor(_env: Any, _caller: int, vals: int, _n: int) -> None:
    run = CURRENT.get()
    _fd, ptr, length = ARGS3(SPACE, vals)
    start, n = ptr % 2**32, length % 2**32
    if start + n > run.size:
        ANSWER(SPACE, vals, -5)
        return
    data = SPACE[run.base + start : run.base + start + n].tobytes() if n else b""
    run.writer.append("stdout", data)
    ANSWER(SPACE, vals, n)


def fd_write_floor(_env: Any, _caller: int, vals: int, _n: int) -> None:
    run = CURRENT.get()
    _fd, iovs, _count, out = ARGS4(SPACE, vals)
    base = run.base
    buf, n = IOVEC(SPACE, base + iovs)
    run.datas.append(calls.COPY_SMALL[n](SPACE, base + buf)[0])
    run.names.append("stdout")
    U32(SPACE, base + out, n)
    ANSWER(SPACE, vals, 0)


def one_ctypes_call(_env: Any, _caller: int, vals: int, _n: int) -> None:
    run = CURRENT.get()
    memory_data(run.context, run.memory)
    ANSWER(SPACE, vals, 0)


_Unchecked = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_NO_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()
_KEEP: list[Any] = []


def contender(eng: wasmtime.Engine, fn: Callable[..., None], shape: tuple[str, str]) -> Callable[[int], int]:
    """A callable running the loop ``n`` times with ``fn`` as its import: CPU ns of the calling thread."""
    thunk = _Unchecked(fn)
    _KEEP.append(thunk)
    params, args = shape
    i32 = wasmtime.ValType.i32()
    ty = wasmtime.FuncType([i32] * len(params.split()), [i32])
    linker = wasmtime.Linker(eng)
    raw = ctypes.cast(thunk, ffi.wasmtime_func_unchecked_callback_t)
    ffi.wasmtime_linker_define_func_unchecked(linker.ptr(), b"f", 1, b"call", 4, ty.ptr(), raw, None, _NO_FINALIZER)
    pre = linker.instantiate_pre(wasmtime.Module(eng, LOOP.format(params=params, args=args)))

    def go(n: int) -> int:
        store = wasmtime.Store(eng)
        store.set_epoch_deadline(1 << 40)
        instance = pre.instantiate(store)
        memory = instance.exports(store)["memory"]
        assert isinstance(memory, wasmtime.Memory)
        run = _Run()
        CURRENT.set(run)
        run.context = engine.context_address(store)
        run.memory = ctypes.addressof(memory._memory)
        run.base = memory_data(run.context, run.memory)
        loop = instance.exports(store)["run"]
        assert isinstance(loop, wasmtime.Func)
        t = time.thread_time_ns()
        loop(store, n)
        return time.thread_time_ns() - t

    return go


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few calls and rounds (a smoke run)")
    args = parser.parse_args(argv)
    n, rounds = (2000, 2) if args.quick else (200_000, 7)
    eng = engine.engine_for(engine.EngineConfig())
    contenders = {
        "bare callback answering 0": contender(eng, bare, WRITE),
        "write0 floor (run, args, bound, stream append)": contender(eng, write0_floor, WRITE),
        "fd_write floor (args, kept base, iovec, byte, list append)": contender(eng, fd_write_floor, FD_WRITE),
        "one ctypes call (wasmtime_memory_data)": contender(eng, one_ctypes_call, WRITE),
    }
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, go in contenders.items():
            best[name] = min(best[name], (go(n) - go(0)) / n / 1000)
    for name, us in best.items():
        print(f"{name:60s} {us:.3f} µs a call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
