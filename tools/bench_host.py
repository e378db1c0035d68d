"""Benchmarks of the wasmtime host (figures for the README; not timed tests).

Run: ``.venv/bin/python tools/bench_host.py [--quick] [--json out.json]``

Measured side by side in one process:

(a) a warm invocation of a trivial export with a full receipt (``kuro_wasm.host.api.run``)
    vs raw wasmtime-py doing Store + instantiate + call (no receipt), vs Extism's
    Python SDK creating a plugin and calling it (if ``extism`` is installed);
(b) guest ``fs_read`` of a 64 MiB file through the gate (GB/s);
(c) deadline accuracy: an infinite loop with ``timeout_ms=50`` (overshoot in ms);
(d) loading a cached ~1 MB guest from the disk cache vs compiling it;
(e) invocations per second on 2 threads vs 1, and whether CPU-bound wasm overlaps
    (with raw wasmtime-py on the same loop as a control for a busy machine);
(f) kill latency: a guest in a pure wasm loop, and one blocked in ``read``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuro_fs.blocks import MemoryBlockStore  # noqa: E402
from kuro_fs.fs import Fs  # noqa: E402
from kuro_wasm.host.api import run  # noqa: E402
from kuro_wasm.host.cache import ModuleCache  # noqa: E402
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key  # noqa: E402
from kuro_wasm.host.loader import add_guest, forget_prepared  # noqa: E402
from kuro_wasm.model.sessions import guest, session  # noqa: E402

GUESTS = ROOT / "guests"
CAPS = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]


def _wat(name: str) -> str:
    return (GUESTS / f"{name}.wat").read_text(encoding="utf-8")


def _per_call(fn: Callable[[], object], n: int) -> float:
    """Median of 5 batches, seconds per call."""
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t0) / n)
    return statistics.median(batches)


def bench_trivial(n: int, home: Path) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo", grant=CAPS)
    cmd = guest(add_guest(store, _wat("hello")), "trivial")
    receipt = run(sess, cmd, store=store, home=home)
    assert receipt["kuro/outcome"] == "ok", receipt
    ours = _per_call(lambda: run(sess, cmd, store=store, home=home), n)

    engine = wasmtime.Engine()
    module = wasmtime.Module(engine, _wat("hello"))
    linker = wasmtime.Linker(engine)
    i32 = wasmtime.ValType.i32()
    linker.define_func("kuro", "write", wasmtime.FuncType([i32, i32, i32], [i32]), lambda fd, p, n: n)

    def raw() -> object:
        st = wasmtime.Store(engine)
        inst = linker.instantiate(st, module)
        return inst.exports(st)["trivial"](st)  # type: ignore[operator]

    raw_s = _per_call(raw, n)
    out: dict[str, Any] = {
        "kuro_run_us": ours * 1e6,
        "raw_wasmtime_us": raw_s * 1e6,
        "ratio_kuro_over_raw": ours / raw_s,
    }
    try:
        import extism

        plain = wasmtime.wat2wasm(
            '(module (memory (export "memory") 1) (func (export "trivial") (result i32) (i32.const 0)))'
        )

        def ext() -> object:
            plugin = extism.Plugin(bytes(plain), wasi=False)
            return plugin.call("trivial", b"")

        ext()
        ext_s = _per_call(ext, max(10, n // 10))
        out["extism_plugin_and_call_us"] = ext_s * 1e6
        out["ratio_kuro_over_extism"] = ours / ext_s
    except Exception as exc:
        out["extism"] = f"skipped: {type(exc).__name__}: {exc}"
    return out


def bench_fs_read(size: int, home: Path) -> dict[str, Any]:
    """Whole runs of read_big (one 64 MiB fs_read into fresh memory) and read_big_twice (two reads).

    The difference is one gated read into memory the guest already touched: the gate's own cost.
    """
    store = MemoryBlockStore()
    data = bytes(range(256)) * (size // 256)
    fs = Fs.empty(store).write("big.bin", data).fs
    sess = session("bench", fs.root, "terminal-repo", grant=CAPS)
    cid = add_guest(store, _wat("fs-sum"))
    once, twice = guest(cid, "read_big", [size]), guest(cid, "read_big_twice", [size])

    def best(cmd: dict[str, Any]) -> float:
        first = run(sess, cmd, store=store, home=home)
        assert first["kuro/exit-code"] == 0, first
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            r = run(sess, cmd, store=store, home=home)
            times.append(time.perf_counter() - t0)
            assert r["kuro/exit-code"] == 0
        return min(times)

    one, two = best(once), best(twice)
    return {
        "bytes": size,
        "run_s_one_read": one,
        "run_s_two_reads": two,
        "gb_per_s_whole_run": size / one / 1e9,
        "gb_per_s_gated_read": size / max(two - one, 1e-9) / 1e9,
    }


def bench_deadline(repeats: int, home: Path) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo", grant=CAPS)
    cmd = guest(add_guest(store, _wat("spin")), "run")
    run(sess, cmd, store=store, home=home, timeout_ms=5)
    over = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = run(sess, cmd, store=store, home=home, timeout_ms=50)
        elapsed = (time.perf_counter() - t0) * 1000
        assert r["kuro/outcome"] == "timeout"
        over.append(elapsed - 50)
    return {
        "timeout_ms": 50,
        "overshoot_ms_median": statistics.median(over),
        "overshoot_ms_max": max(over),
    }


def _big_code_wat(functions: int) -> str:
    """A module of about ``functions`` × 290 bytes of code (not data): what compiling costs."""
    body = " ".join(f"i32.const {100_000_000 + k * 7919} i32.xor i32.const {k + 3} i32.mul" for k in range(40))
    funcs = "\n".join(f'(func (export "f{i}") (param i32) (result i32) local.get 0 {body})' for i in range(functions))
    return f"(module {funcs})"


def bench_cache(functions: int, tmp: Path) -> dict[str, Any]:
    binary = bytes(wasmtime.wat2wasm(_big_code_wat(functions)))
    store = MemoryBlockStore()
    cid = add_guest(store, binary)
    config = EngineConfig()
    engine = engine_for(config)
    cache = ModuleCache(tmp / "modules")
    ModuleCache.forget_memory()
    t0 = time.perf_counter()
    cache.get_or_compile(engine, engine_key(config), cid, lambda: binary)
    compile_s = time.perf_counter() - t0
    loads = []
    for _ in range(5):
        ModuleCache.forget_memory()
        t0 = time.perf_counter()
        cache.get_or_compile(engine, engine_key(config), cid, lambda: binary)
        loads.append(time.perf_counter() - t0)
    assert cache.stats.compiles == 1 and cache.stats.disk_hits == 5
    t0 = time.perf_counter()
    cache.get_or_compile(engine, engine_key(config), cid, lambda: binary)
    memory_s = time.perf_counter() - t0
    ModuleCache.forget_memory()
    forget_prepared()
    return {
        "wasm_bytes": len(binary),
        "compile_ms": compile_s * 1000,
        "disk_load_ms_median": statistics.median(loads) * 1000,
        "memory_hit_us": memory_s * 1e6,
    }


def bench_kill(repeats: int, home: Path) -> dict[str, Any]:
    """Latency from ``kill()`` to the receipt: a guest in a pure wasm loop, and one blocked in ``read``."""
    from kuro_wasm.host.api import Handle, start

    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo", grant=CAPS)
    spin = guest(add_guest(store, _wat("spin")), "run")
    cat = guest(add_guest(store, _wat("cat")), "run")
    out: dict[str, Any] = {}
    for label, cmd in (("loop", spin), ("blocked_in_read", cat)):
        lat = []
        for _ in range(repeats):
            h = start(sess, cmd, store=store, home=home)
            assert isinstance(h, Handle)
            time.sleep(0.01)
            t0 = time.perf_counter()
            h.kill()
            r = h.wait(10)
            lat.append((time.perf_counter() - t0) * 1000)
            assert r["kuro/outcome"] == "cancelled"
        out[f"kill_{label}_ms_median"] = statistics.median(lat)
        out[f"kill_{label}_ms_max"] = max(lat)
    return out


def _rate(threads: int, per_thread: int, job: Callable[[], object]) -> float:
    """Completed jobs per second with ``threads`` threads each doing ``per_thread`` jobs, started together."""
    barrier = threading.Barrier(threads + 1)

    def worker() -> None:
        barrier.wait()
        for _ in range(per_thread):
            job()

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return threads * per_thread / (time.perf_counter() - t0)


def bench_threads(n: int, spin_count: int, home: Path) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    sess = session("bench", fs.root, "terminal-repo", grant=CAPS)
    trivial = guest(add_guest(store, _wat("hello")), "trivial")
    counting = guest(add_guest(store, _wat("spin")), "count", [spin_count])
    run(sess, trivial, store=store, home=home)
    run(sess, counting, store=store, home=home)
    one = _rate(1, n, lambda: run(sess, trivial, store=store, home=home))
    two = _rate(2, n, lambda: run(sess, trivial, store=store, home=home))
    cpu_one = _rate(1, 4, lambda: run(sess, counting, store=store, home=home))
    cpu_two = _rate(2, 4, lambda: run(sess, counting, store=store, home=home))

    # control: the same CPU-bound export through raw wasmtime-py (no kuro), same machine, same moment, with
    # epoch interruption compiled in as kuro's engines have it (its checks cost the loop time too)
    cfg = wasmtime.Config()
    cfg.epoch_interruption = True
    engine = wasmtime.Engine(cfg)
    module = wasmtime.Module(engine, _wat("spin"))

    def raw_count() -> object:
        st = wasmtime.Store(engine)
        st.set_epoch_deadline(2**62)
        inst = wasmtime.Instance(st, module, [])
        return inst.exports(st)["count"](st, spin_count)  # type: ignore[operator]

    raw_one = _rate(1, 4, raw_count)
    raw_two = _rate(2, 4, raw_count)
    return {
        "trivial_runs_per_s_1_thread": one,
        "trivial_runs_per_s_2_threads": two,
        "trivial_speedup": two / one,
        "cpu_bound_runs_per_s_1_thread": cpu_one,
        "cpu_bound_runs_per_s_2_threads": cpu_two,
        "cpu_bound_speedup": cpu_two / cpu_one,
        "raw_cpu_bound_speedup": raw_two / raw_one,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    quick = args.quick
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "home"
        results["a_trivial"] = bench_trivial(200 if quick else 2000, home)
        results["b_fs_read"] = bench_fs_read((4 if quick else 64) * 2**20, home)
        results["c_deadline"] = bench_deadline(3 if quick else 20, home)
        results["d_cache"] = bench_cache(300 if quick else 3000, tmp)
        results["f_kill"] = bench_kill(5 if quick else 20, home)
        results["e_threads"] = bench_threads(200 if quick else 2000, 20_000_000 if quick else 200_000_000, home)
    results["wasmtime"] = wasmtime.__name__ and __import__("importlib.metadata").metadata.version("wasmtime")
    text = json.dumps(results, indent=2, sort_keys=True)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
