"""Per-call costs of the host, each beside its anchor, measured interleaved (ABAB…) in one process.

Run: ``.venv/bin/python tools/bench_calls.py [--quick]`` (``tools/bench.py`` calls these functions).

Every figure is taken two ways, because this machine is often shared: wall clock
(``perf_counter``) and the calling thread's CPU time (``thread_time``, which load on
other cores barely moves). Each contender runs a batch, then the next contender runs
its batch, round after round; the figure is the best round (the least disturbed),
the median is recorded beside it.

(a) a gated ``kuro.write`` of length 0 and ``kuro.read`` of cap 0, per call (a guest
    loop of N calls minus the same guest with 0), ÷ a bare raw ctypes callback doing
    nothing but answer 0 (wasmtime-py's checked callback kind), and ÷ a bare unchecked
    callback (the kind kuro's imports use) — both in a loop of the same shape;
(b) a warm invocation of a trivial export with its full receipt (``run``) ÷ the fastest
    public wasmtime-py path (one ``InstancePre`` reused, an engine with epoch
    interruption as kuro's, ``Store`` + ``instantiate`` + call), ÷ kuro's own run without
    a receipt (the job's load + instantiate + call only), and ÷ the slower public path
    (``Linker.instantiate`` each time, no epoch interruption);
(c) start-up: ``kuro --help`` and ``kuro run`` of a trivial cached guest as processes,
    wall and CPU (children's rusage), ÷ ``python -c pass`` in the same environment;
(d) ``Ledger.run`` of a new operation id ÷ ``run()`` of the same spec, and a replay;
(e) a cached module from the disk cache (keyed BLAKE3 check + deserialize) ÷
    ``Module.deserialize_file`` of the same artifact (the floor), and ÷ compiling.
"""

from __future__ import annotations

import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuro_fs.blocks import MemoryBlockStore  # noqa: E402
from kuro_fs.fs import Fs  # noqa: E402
from kuro_wasm.host.api import run  # noqa: E402
from kuro_wasm.host.cache import ModuleCache  # noqa: E402
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key  # noqa: E402
from kuro_wasm.host.job import Job  # noqa: E402
from kuro_wasm.host.loader import add_guest  # noqa: E402
from kuro_wasm.model.limits import Limits  # noqa: E402
from kuro_wasm.model.sessions import guest, session  # noqa: E402

GUESTS = ROOT / "guests"

LOOP = """(module (import "kuro" "{name}" (func $f (param {params}) (result i32)))
  (memory (export "memory") 1)
  (func (export "run") (param $n i32) (result i32)
    (block $done (loop $l (br_if $done (i32.eqz (local.get $n)))
      (drop (call $f {args})) (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br $l)))
    (i32.const 0)))"""
WRITE0 = LOOP.format(name="write", params="i32 i32 i32", args="(i32.const 1) (i32.const 0) (i32.const 0)")
READ0 = LOOP.format(name="read", params="i32 i32", args="(i32.const 0) (i32.const 0)")


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, dict[str, float]]:
    """Seconds per call of each contender (one call of each per round, in turn): best and median, CPU and wall."""
    cpu: dict[str, list[float]] = {k: [] for k in contenders}
    wall: dict[str, list[float]] = {k: [] for k in contenders}
    for fn in contenders.values():
        fn()
    for _ in range(rounds):
        for name, fn in contenders.items():
            c0, w0 = time.thread_time(), time.perf_counter()
            fn()
            cpu[name].append(time.thread_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {
        name: {
            "cpu_best": min(cpu[name]),
            "cpu_median": statistics.median(cpu[name]),
            "wall_best": min(wall[name]),
            "wall_median": statistics.median(wall[name]),
        }
        for name in contenders
    }


def _batch(fn: Callable[[], object], n: int) -> Callable[[], None]:
    def go() -> None:
        for _ in range(n):
            fn()

    return go


def _per_call(stats: dict[str, dict[str, float]], name: str, n: int, zero: str | None = None) -> dict[str, float]:
    """Per-call seconds of ``name`` (a batch of ``n``), minus the ``zero`` batch when given."""
    out = {}
    for key in ("cpu_best", "cpu_median", "wall_best", "wall_median"):
        base = stats[zero][key] if zero else 0.0
        out[key] = max(0.0, stats[name][key] - base) / n
    return out


# ---- (a) gated calls


def bench_gated(n: int, rounds: int) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-build", grant=["guest/invoke", "stdin/read"])
    w, r = add_guest(store, WRITE0), add_guest(store, READ0)

    def kuro(cid: str, calls: int) -> Callable[[], object]:
        spec = guest(cid, "run", [calls])

        def go() -> object:
            got = run(sess, spec, store=store, fs=fs, home=False, max_output_chunks=2**40, timeout_ms=600_000)
            assert got["kuro/outcome"] == "ok", got
            return got

        return go

    engine = wasmtime.Engine()
    i32 = wasmtime.ValType.i32()
    ty = wasmtime.FuncType([i32, i32, i32], [i32])
    finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()

    @ffi.wasmtime_func_callback_t  # type: ignore[untyped-decorator]
    def checked(_env: Any, _caller: Any, _params: Any, _n: int, results: Any, _nr: int) -> int:
        results[0].kind = ffi.WASMTIME_I32.value
        results[0].of.i32 = 0
        return 0

    p = ctypes.c_void_p
    unchecked_type = ctypes.CFUNCTYPE(p, p, p, p, ctypes.c_size_t)
    view = memoryview((ctypes.c_char * (1 << 48)).from_address(0)).cast("B")

    @unchecked_type  # type: ignore[untyped-decorator]
    def unchecked(_env: Any, _caller: int, vals: int, _n: int) -> None:
        view[vals : vals + 4] = b"\0\0\0\0"

    def bare(kind: str) -> Callable[[int], Callable[[], object]]:
        linker = wasmtime.Linker(engine)
        if kind == "checked":
            ffi.wasmtime_linker_define_func(linker.ptr(), b"kuro", 4, b"write", 5, ty.ptr(), checked, None, finalizer)
        else:
            thunk = ctypes.cast(unchecked, ffi.wasmtime_func_unchecked_callback_t)
            ffi.wasmtime_linker_define_func_unchecked(
                linker.ptr(), b"kuro", 4, b"write", 5, ty.ptr(), thunk, None, finalizer
            )
        pre = linker.instantiate_pre(wasmtime.Module(engine, WRITE0))

        def make(calls: int) -> Callable[[], object]:
            def go() -> object:
                st = wasmtime.Store(engine)
                return pre.instantiate(st).exports(st)["run"](st, calls)  # type: ignore[operator]

            return go

        return make

    checked_run, unchecked_run = bare("checked"), bare("unchecked")
    stats = interleaved(
        {
            "write0": kuro(w, 0),
            "write": kuro(w, n),
            "read0": kuro(r, 0),
            "read": kuro(r, n),
            "checked0": checked_run(0),
            "checked": checked_run(n),
            "unchecked0": unchecked_run(0),
            "unchecked": unchecked_run(n),
        },
        rounds,
    )
    return {
        "calls_per_run": n,
        "write_len0": _per_call(stats, "write", n, "write0"),
        "read_cap0": _per_call(stats, "read", n, "read0"),
        "bare_checked_callback": _per_call(stats, "checked", n, "checked0"),
        "bare_unchecked_callback": _per_call(stats, "unchecked", n, "unchecked0"),
    }


# ---- (b) warm invocation


def bench_warm(n: int, rounds: int, home: Path) -> dict[str, Any]:
    wat = (GUESTS / "hello.wat").read_text(encoding="utf-8")
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo")
    spec = guest(add_guest(store, wat), "trivial")
    run(sess, spec, store=store, home=home)
    limits = Limits()

    def kuro() -> object:
        return run(sess, spec, store=store, home=home)

    def kuro_no_receipt() -> object:  # kuro's own run: load (warm) + store + limits + instantiate + call
        job = Job(sess, spec, store, None, on_chunk=None, on_exit=None, limits=limits, home=home, stdin_closed=True,
                  stdin=None)  # fmt: skip
        return job._run()

    cfg = wasmtime.Config()
    cfg.epoch_interruption = True
    epoch_engine = wasmtime.Engine(cfg)
    i32 = wasmtime.ValType.i32()
    linker = wasmtime.Linker(epoch_engine)
    linker.define_func("kuro", "write", wasmtime.FuncType([i32, i32, i32], [i32]), lambda fd, p, n: n)
    pre = linker.instantiate_pre(wasmtime.Module(epoch_engine, wat))

    def public_fastest() -> object:
        st = wasmtime.Store(epoch_engine)
        st.set_epoch_deadline(1)
        return pre.instantiate(st).exports(st)["trivial"](st)  # type: ignore[operator]

    plain = wasmtime.Engine()
    plain_linker = wasmtime.Linker(plain)
    plain_linker.define_func("kuro", "write", wasmtime.FuncType([i32, i32, i32], [i32]), lambda fd, p, n: n)
    plain_module = wasmtime.Module(plain, wat)

    def public_slow() -> object:
        st = wasmtime.Store(plain)
        return plain_linker.instantiate(st, plain_module).exports(st)["trivial"](st)  # type: ignore[operator]

    stats = interleaved(
        {
            "kuro": _batch(kuro, n),
            "kuro_no_receipt": _batch(kuro_no_receipt, n),
            "public_fastest": _batch(public_fastest, n),
            "public_slow": _batch(public_slow, n),
        },
        rounds,
    )
    return {"calls_per_batch": n, **{name: _per_call(stats, name, n) for name in stats}}


# ---- (c) start-up


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_startup(repeats: int) -> dict[str, Any]:
    python = sys.executable
    kuro = [python, "-m", "kuro_wasm"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "KURO_HOME": tmp}
        added = subprocess.run(
            [*kuro, "guest", "add", str(GUESTS / "hello.wat")], capture_output=True, text=True, env=env, check=True
        )
        cid = added.stdout.split()[0]
        commands = {
            "python_pass": [python, "-c", "pass"],
            "kuro_help": [*kuro, "--help"],
            "kuro_run_trivial": [*kuro, "run", cid, "trivial"],
        }
        subprocess.run(commands["kuro_run_trivial"], capture_output=True, env=env, check=True)  # compile + cache
        wall: dict[str, list[float]] = {k: [] for k in commands}
        cpu: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(repeats):
            for name, argv in commands.items():
                c0, w0 = _child_cpu(), time.perf_counter()
                subprocess.run(argv, capture_output=True, env=env, check=True)
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(_child_cpu() - c0)
    return {
        name: {
            "wall_best": min(wall[name]),
            "wall_median": statistics.median(wall[name]),
            "cpu_best": min(cpu[name]),
            "cpu_median": statistics.median(cpu[name]),
        }
        for name in commands
    }


# ---- (d) ledger


def bench_ledger(n: int, rounds: int) -> dict[str, Any]:
    from kuro_wasm.ledger.ledger import Ledger

    wat = (GUESTS / "hello.wat").read_text(encoding="utf-8")
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo")
    spec = guest(add_guest(store, wat), "trivial")
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.sqlite", store=store)
        counter = [0]

        def fresh() -> object:
            counter[0] += 1
            return ledger.run(f"op-{counter[0]}", sess, spec, home=False)

        ledger.run("replayed", sess, spec, home=False)
        stats = interleaved(
            {
                "ledger_new_op": _batch(fresh, n),
                "run": _batch(lambda: run(sess, spec, store=store, home=False), n),
                "ledger_replay": _batch(lambda: ledger.run("replayed", sess, spec, home=False), n),
            },
            rounds,
        )
        ledger.close()
    return {"calls_per_batch": n, **{name: _per_call(stats, name, n) for name in stats}}


# ---- (e) cached module load


def bench_cache_floor(functions: int, rounds: int) -> dict[str, Any]:
    funcs = " ".join(f'(func (export "f{i}") (result i32) (i32.const {i}))' for i in range(functions))
    wat = f"(module {funcs})"
    binary = bytes(wasmtime.wat2wasm(wat))
    store = MemoryBlockStore()
    cid = add_guest(store, binary)
    config = EngineConfig()
    engine = engine_for(config)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ModuleCache(Path(tmp) / "modules")
        ModuleCache.forget_memory()
        c0 = time.perf_counter()
        cache.get_or_compile(engine, engine_key(config), cid, lambda: binary)
        compile_s = time.perf_counter() - c0
        artifact = cache.path_for(cid, engine_key(config))
        assert artifact is not None

        def ours() -> object:
            ModuleCache.forget_memory()
            return cache.get_or_compile(engine, engine_key(config), cid, lambda: binary)

        def floor() -> object:
            return wasmtime.Module.deserialize_file(engine, str(artifact))

        stats = interleaved({"kuro_disk_cache": ours, "deserialize_file": floor}, rounds)
        ModuleCache.forget_memory()
        artifact_bytes = artifact.stat().st_size
    return {
        "wasm_bytes": len(binary),
        "artifact_bytes": artifact_bytes,
        "compile_s": compile_s,
        **stats,
    }


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv or sys.argv[1:])
    home = Path(tempfile.mkdtemp(prefix="kuro-bench-"))
    print(bench_gated(2000 if quick else 50_000, 3 if quick else 9))
    print(bench_warm(50 if quick else 300, 3 if quick else 9, home))
    print(bench_startup(2 if quick else 7))
    print(bench_ledger(5 if quick else 50, 3 if quick else 7))
    print(bench_cache_floor(200 if quick else 20_000, 3 if quick else 9))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
