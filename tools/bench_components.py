"""Benchmarks of component guests, each beside wasmtime-py's public component API in the same run.

Called by ``tools/bench.py`` (section ``components``); every function returns plain numbers.

(a) one component call that makes two host calls (``run`` → ``output.write`` twice), on an
    instantiated component, through this host's own canonical ABI (the component's core modules) vs
    wasmtime-py's public ``Func.__call__`` with ``LinkerInstance.add_func`` host functions (no receipt
    either side); this host's engine component path (raw C API) is measured beside them;
(b) bytes across the boundary: ``fs.read`` of a file then ``output.write`` of it (``list<u8>`` both
    ways) in a full run with a receipt, vs the same component on the public API with Python host
    functions returning/taking ``bytes`` (its per-element conversion), MB/s of file size, run in
    alternating rounds (kuro, kuro's engine path, public, kuro …), the best of each taken. **Each side's
    timed run follows an untimed run of its own**: a kuro run timed right after the public API's — whose
    ~0.25 s of per-element conversion leaves the CPU's caches cold — measured ~0.9 ms for 64 KiB against
    ~0.5 ms after a run of its own, a penalty the anchor (tens of ms a run) never pays; the cold figure
    (a kuro run right after the public API's, best and median) is kept beside it.
    ``max_value_bytes`` is raised to the size (its default, 4 MiB, would answer a 16 MiB read
    ``too-large``);
(c) what a new process must load from the on-disk module cache before the first run of the cached
    componentize-py guest (~18 MB, ~35 MB compiled; a plain component: its shape and its 38 core modules, each
    under its keyed tag), in a child process, vs compiling it; beside it, in alternating rounds, a new process
    loading the compiled component and its shape alone (all the loader read before the plain path) and
    ``python -c pass``, and the in-process load of the compiled component alone (this row's figure before).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import wasmtime
import wasmtime.component as wc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import build_components  # noqa: E402

from kuro_fs.blocks import MemoryBlockStore  # noqa: E402
from kuro_fs.fs import Fs  # noqa: E402
from kuro_fs.unixfs import write_file  # noqa: E402
from kuro_wasm.host.api import run  # noqa: E402
from kuro_wasm.host.cache import COMPONENT, ModuleCache  # noqa: E402
from kuro_wasm.host.calls import register_run, unregister_run  # noqa: E402
from kuro_wasm.host.context import RunContext  # noqa: E402
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key  # noqa: E402
from kuro_wasm.host.kind import GuestParts  # noqa: E402
from kuro_wasm.host.kinds.component import KIND  # noqa: E402
from kuro_wasm.host.loader import _describe_with, add_guest  # noqa: E402
from kuro_wasm.model.component_binary import read_plan  # noqa: E402
from kuro_wasm.model.sessions import guest, session  # noqa: E402

CAPS = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]
_TYPES, _OUTPUT, _STDIN, _FS = (f"kuro:host/{i}@1.0.0" for i in ("types", "output", "stdin", "fs"))


def built(names: list[str]) -> dict[str, bytes]:
    """The component guests ``names``, built (or reused) under build/components/."""
    return {n: p.read_bytes() for n, p in build_components.build(ROOT / "build" / "components", names).items()}


def _public_linker(engine: wasmtime.Engine, files: dict[str, bytes], sink: list[bytes]) -> wc.Linker:
    """wasmtime-py's public API: the same world's functions as Python callables (the anchor)."""
    linker = wc.Linker(engine)
    with linker.root() as root:
        with root.add_instance(_TYPES):
            pass
        with root.add_instance(_OUTPUT) as output:
            output.add_func("write", lambda _store, _s, data: sink.append(data))
        with root.add_instance(_STDIN) as stdin:
            stdin.add_func("read", lambda _store, _max: b"")  # untagged result: the ok value itself
        with root.add_instance(_FS) as fs:
            fs.add_func("read", lambda _store, path: files[path])
    return linker


def _interleaved(a: Any, b: Any, n: int, batches: int = 7) -> tuple[float, float]:
    """Median seconds per call of ``a`` and of ``b``, measured in alternating batches (ABAB…)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(batches):
        for fn, out in ((a, times[0]), (b, times[1])):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t0) / n)
    return statistics.median(times[0]), statistics.median(times[1])


def bench_call(n: int) -> dict[str, float]:
    """(a): µs per call of ``run(["x"])`` (two host calls each) on one instance, kuro's path vs the public API."""
    wasm = built(["typed"])["typed"]
    engine = engine_for(EngineConfig())
    component = wc.Component(engine, wasm)
    shape = _shape(engine, wasm, component)
    entry = KIND.entry(shape, "run", ["x"])
    assert not isinstance(entry, str), entry
    # kuro: the kind's linker and call path, with a run context that accepts every chunk
    parts = GuestParts(shape, lambda _name, piece: wasmtime.Module(engine, piece(wasm)))
    linked = KIND.link(engine, component, parts)
    ctx = RunContext(grant=frozenset(CAPS), emit=lambda _s, _d: True)
    stores: list[wasmtime.Store] = []

    def instance_of(plain: bool) -> Any:
        store = wasmtime.Store(engine)
        store.set_epoch_deadline(2**62)  # the engine interrupts by epoch; no ticker runs here
        register_run(store, ctx)
        stores.append(store)
        KIND.plain = plain
        try:
            instance, failed = KIND.instantiate(store, linked)
        finally:
            KIND.plain = True
        assert failed is None, failed
        return store, instance

    (store, instance), (estore, einstance) = instance_of(True), instance_of(False)
    # anchor: the public API on the same component
    sink: list[bytes] = []
    pstore = wasmtime.Store(engine)
    pstore.set_epoch_deadline(2**62)
    pinstance = _public_linker(engine, {}, sink).instantiate(pstore, component)
    func = pinstance.get_func(pstore, "run")
    assert func is not None

    def public_call() -> None:
        func(pstore, ["x"])
        func.post_return(pstore)

    try:
        ours, public = _interleaved(lambda: KIND.call(store, instance, entry, ctx), public_call, n)
        engine_path, _ = _interleaved(lambda: KIND.call(estore, einstance, entry, ctx), public_call, n)
    finally:
        for s in stores:
            unregister_run(s)
    return {"kuro_us": ours * 1e6, "public_us": public * 1e6, "kuro_engine_path_us": engine_path * 1e6}


def _shape(engine: wasmtime.Engine, wasm: bytes, component: wc.Component) -> Any:
    from kuro_wasm.model.wasm_shape import WasmShape

    return WasmShape.from_bytes(_describe_with(engine)(wasm, component))


def bench_bytes(size: int, rounds: int, both_ways: bool = True) -> dict[str, float]:
    """(b): MB/s of a ``size``-byte file through ``fs.read`` (``len``), and back out through ``output.write``
    when ``both_ways`` (``read``), in a full run, kuro vs the public API, in ``rounds`` alternating rounds
    (ABAB), each side's timed run right after an untimed one of its own (the best of each is kept); and
    kuro's cold run — timed right after the public API's run — best and median.

    wasmtime's component API limits what one host call may copy out of the guest ("hostcall fuel",
    ~2.7 MiB of ``list<u8>`` in wasmtime 50), so ``both_ways`` stays below that.
    """
    behaviour = "read" if both_ways else "len"
    wasm = built(["typed"])["typed"]
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    store = MemoryBlockStore()
    fs = Fs.empty(store).write("data.bin", data).fs
    cid = add_guest(store, wasm)
    sess = session("bench", fs.root, grant=CAPS)
    home = False

    def ours() -> None:
        spec = guest(cid, "run", [behaviour, "data.bin"])
        r = run(sess, spec, store=store, fs=fs, max_output_bytes=size, max_value_bytes=size, home=home)
        assert r["kuro/exit-code"] == (0 if both_ways else size), r.get("kuro/trap") or r.get("kuro/error")

    ours()
    engine = engine_for(EngineConfig())
    component = wc.Component(engine, wasm)
    sink: list[bytes] = []
    linker = _public_linker(engine, {"data.bin": data}, sink)

    def public() -> None:
        pstore = wasmtime.Store(engine)
        pstore.set_epoch_deadline(2**62)
        func = linker.instantiate(pstore, component).get_func(pstore, "run")
        assert func is not None and func(pstore, [behaviour, "data.bin"]) == (0 if both_ways else size)
        if both_ways:
            assert len(sink.pop()) == size

    def engine_path() -> None:  # kuro's run on the engine's component path (the C API's value vectors)
        KIND.plain = False
        try:
            ours()
        finally:
            KIND.plain = True

    ours_s: list[float] = []
    cold_s: list[float] = []
    public_s: list[float] = []
    engine_s: list[float] = []
    public()  # (so that every cold run follows one of the public API's)
    for _ in range(rounds):
        cold_s.append(_timed(ours))  # right after the public API's run
        ours_s.append(_timed(ours))
        engine_path()
        engine_s.append(_timed(engine_path))
        public()
        public_s.append(_timed(public))
    return {
        "kuro_mb_s": size / min(ours_s) / 1e6,
        "public_mb_s": size / min(public_s) / 1e6,
        "kuro_engine_path_mb_s": size / min(engine_s) / 1e6,
        "kuro_cold_mb_s": size / min(cold_s) / 1e6,
        "kuro_cold_median_mb_s": size / statistics.median(cold_s) / 1e6,
        "size": size,
        "rounds": rounds,
    }


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


#: A new process's load of a cached guest (argv: repo root, cache directory, guest file, "plain"|"whole"): prints
#: JSON — the ms ``prepare`` takes ("whole": the ms of loading the compiled component and its shape alone, all the
#: loader read before the plain path) (everything read from the disk cache before the first run: the guest's shape,
#: its compiled form or its core modules, each under its keyed tag), the ms of the imports before it, and what the
#: cache counted. The guest's bytes are put in a memory store first (not timed: a real store holds them already).
_FRESH = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.unixfs import write_file
from kuro_wasm.host import loader
from kuro_wasm.host.cache import ModuleCache
from kuro_wasm.host.engine import EngineConfig, engine_for
store = MemoryBlockStore()
cid = write_file(store.put, Path(sys.argv[3]).read_bytes()).cid
engine_for(EngineConfig())
imports = time.perf_counter() - t0
cache = ModuleCache(Path(sys.argv[2]))
t1 = time.perf_counter()
if sys.argv[4] == "plain":
    ready = loader.prepare(store, cid, EngineConfig(), cache)
    assert not isinstance(ready, loader.LoadFailure), ready
else:  # what the loader read before the plain path: the compiled component and its shape (then the shared linker)
    from kuro_wasm.host.engine import engine_key
    from kuro_wasm.model.wasm_shape import WasmShape
    engine = engine_for(EngineConfig())
    meta = cache.load(engine, engine_key(EngineConfig()), cid, lambda: 1 / 0, loader._describe_with(engine))[1]
    WasmShape.from_bytes(meta)
load = time.perf_counter() - t1
print(json.dumps({"load_ms": load * 1e3, "imports_ms": imports * 1e3, **cache.stats.as_dict()}))
"""


_FLOOR = """
import json, mmap, os, sys, time
sys.path.insert(0, sys.argv[1])
from blake3 import blake3
import wasmtime
from wasmtime.component import Component
from kuro_wasm.host.engine import EngineConfig, engine_for
engine = engine_for(EngineConfig())  # the same config as the load's (created before its clock starts, as there)
paths = json.loads(sys.argv[3])
t0 = time.perf_counter()
if sys.argv[2] == "modules":
    kept = [wasmtime.Module.deserialize_file(engine, p) for p in paths]
elif sys.argv[2] == "component":
    kept = [Component.deserialize_file(engine, p) for p in paths]
else:  # the cache's check, made as there: keyed BLAKE3 over a populated read-only map of each artifact, on every
    # core only past _THREADED while the load average leaves a core free (cache._hash_threads, asked per artifact)
    from kuro_wasm.host import cache
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        size = os.fstat(fd).st_size
        with mmap.mmap(fd, size, flags=cache._MAP_FLAGS, prot=mmap.PROT_READ) as view:
            threads = cache._hash_threads(size, cache._load_average(), cache._CPUS)
            mac = blake3(b"key", key=bytes(32), max_threads=threads)
            mac.update(view)
            mac.digest()
        os.close(fd)
print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3}))
"""


def _floor(what: str, paths: list[Path]) -> float:
    """ms a new process (engine made, as for the load) takes to deserialize the artifacts at ``paths`` (``what``:
    ``modules`` or ``component``), or to compute the cache's keyed BLAKE3 over them (``mac``)."""
    out = subprocess.run(
        [sys.executable, "-c", _FLOOR, str(ROOT), what, json.dumps([str(p) for p in paths])],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout)["ms"])


def _fresh(cache_dir: Path, guest: Path, path: str) -> tuple[dict[str, float], float]:
    """One new process loading ``guest`` from ``cache_dir`` on ``path``: its report, and its wall seconds."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _FRESH, str(ROOT), str(cache_dir), str(guest), path],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout), time.perf_counter() - t0


def bench_cached_load(tmp: Path, repeat: int, name: str = "py-tool") -> dict[str, float]:
    """(c): ms a new process needs to load a cached component (default the componentize-py guest) before its
    first run, on the path it takes (the host's canonical ABI for a plain component) and on the engine's component
    path, and loading the compiled component and its shape alone (all a new process loaded before the plain path),
    in ``repeat`` alternating rounds (plain, whole, ``python -c pass``); with the in-process load of the compiled
    component alone beside them (this row's definition before the plain path: a fresh memory layer's
    ``ModuleCache.load``)."""
    guest = build_components.build(ROOT / "build" / "components", [name])[name]
    wasm = guest.read_bytes()
    engine = engine_for(EngineConfig())
    key = engine_key(EngineConfig())
    cache_dir = tmp / "component-cache"
    cache = ModuleCache(cache_dir)
    store = MemoryBlockStore()
    cid = write_file(store.put, wasm).cid
    describe = _describe_with(engine)
    ModuleCache.forget_memory()
    t0 = time.perf_counter()
    cache.load(engine, key, cid, lambda: wasm, describe)
    compile_s = time.perf_counter() - t0
    first, _ = _fresh(cache_dir, guest, "plain")  # compiles and caches the core modules (a first run would)
    assert first["compiles"] > 0 or first["disk_hits"] > 0, first
    modules = [cache.path_for(f"{cid}#core-module-{i}", key) for i in range(read_plan(wasm).module_count)]
    whole_path = cache.path_for(cid, key, COMPONENT)
    artifacts = [p for p in modules if p is not None]
    assert whole_path is not None and len(artifacts) == len(modules) and all(p.exists() for p in artifacts)
    plain: list[dict[str, float]] = []
    whole: list[dict[str, float]] = []
    bare: list[float] = []
    floor: dict[str, list[float]] = {"modules": [], "component": [], "mac": []}
    for _ in range(repeat):
        plain.append(_fresh(cache_dir, guest, "plain")[0])
        whole.append(_fresh(cache_dir, guest, "whole")[0])
        for what in floor:
            floor[what].append(_floor(what, [whole_path] if what == "component" else artifacts))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
    assert all(r["compiles"] == 0 for r in plain + whole), (plain, whole)  # every load from disk
    loads = []
    for _ in range(repeat):
        ModuleCache.forget_memory()
        t0 = time.perf_counter()
        compiled, _meta = cache.load(engine, key, cid, lambda: wasm, describe)
        loads.append(time.perf_counter() - t0)
        assert isinstance(compiled, wc.Component)
    ModuleCache.forget_memory()
    return {
        "wasm_bytes": float(len(wasm)),
        "compile_s": compile_s,
        "fresh_load_ms_median": statistics.median(r["load_ms"] for r in plain),
        "fresh_entries": plain[0]["disk_hits"],
        "fresh_whole_load_ms_median": statistics.median(r["load_ms"] for r in whole),
        "fresh_imports_ms_median": statistics.median(r["imports_ms"] for r in plain),
        "python_pass_ms_median": statistics.median(bare) * 1000,
        "component_disk_load_ms_median": statistics.median(loads) * 1000,
        "floor_modules_ms_median": statistics.median(floor["modules"]),
        "floor_component_ms_median": statistics.median(floor["component"]),
        "floor_mac_ms_median": statistics.median(floor["mac"]),
        "core_modules": float(len(artifacts)),
        "core_modules_bytes": float(sum(p.stat().st_size for p in artifacts)),
        "loadavg_1m": os.getloadavg()[0],
        "rounds": float(repeat),
    }


__all__ = ["bench_bytes", "bench_cached_load", "bench_call", "built"]
