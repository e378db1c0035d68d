#!/usr/bin/env python3
"""The project's speed claims, each measured beside its anchor in the same run, as a ratio.

    python tools/bench.py                 # full sizes (256 MiB import, 64 MiB fs_read …), ~1-2 min
    python tools/bench.py --quick         # small sizes, a few seconds (a test runs this so it cannot rot)
    python tools/bench.py --json out.json # also write every figure, its anchor and the machine as JSON

Figures and their anchors (what each ratio divides):

* warm guest invocation with a full receipt ÷ raw wasmtime-py doing Store + instantiate + call of the
  same precompiled module (goal ≤ 2×), and ÷ Extism's Python SDK (a new plugin from a compiled one
  + call, and a new plugin from bytes + call) when ``extism`` is importable;
* UnixFS import of a 256 MiB file (CID only, memory store, 2 threads) ÷ ``pread`` + ``hashlib.sha256``
  of the same chunks on 2 threads (goal ≤ 1.3×), and ÷ the JavaScript ``ipfs-unixfs-importer``
  (``node tools/unixfs_ref.mjs``, its process time minus an empty request's) when node and ``tools/node_modules`` exist;
* reading the file back from the memory store into one buffer (GB/s) ÷ one in-memory copy of it, and streaming
  it back through a reused 1 MiB window (GB/s; goal ≥ 1 GB/s) ÷ the same copy of the source bytes;
* guest ``fs_read`` of a 64 MiB file through the capability gate (GB/s; goal ≥ 1 GB/s) ÷ ``Fs.read``
  of the same file from the host side;
* deadline overshoot: an infinite loop with ``timeout_ms=50`` (median and max of several runs) ÷ the
  50 ms deadline (goal: stop within 55 ms);
* loading a cached ~1 MB guest from the on-disk module cache (goal ≤ 2 ms) ÷ compiling it;
* invocations per second on all cores (one thread per core) ÷ 1 thread, for a trivial export and a CPU-bound
  one (with raw wasmtime-py's speedup on the same loop as a control for a busy machine);
* the block store (``tools/bench_store.py``): import into the memory and the disk store ÷ same-thread
  hashing, the disk store ÷ ``cp`` + fsync and ``cp -r`` + sync, verified read-back ÷ a plain file read,
  ``import_car`` of a million four-byte blocks, and the peak memory of ``Fs.read`` ÷ the file size.

The host measurements (invocation, fs_read, deadline, cache) are the functions of
``tools/bench_host.py``, called here and set beside their anchors; this file adds the import
figures, the Extism-from-compiled-plugin and host-side ``Fs.read`` anchors, the all-cores rates and the table.

Nothing is ever made up: a comparison that cannot run prints ``not available: <reason>``.
No figure here is asserted by a test (timed tests flake); the README quotes this output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_host  # noqa: E402  (tools/bench_host.py: the host helper's measurements, folded in here)
import bench_store  # noqa: E402  (tools/bench_store.py: the block store's measurements)
import wasmtime  # noqa: E402

from kuro_fs.blocks import MemoryBlockStore  # noqa: E402
from kuro_fs.fs import Fs  # noqa: E402
from kuro_fs.importer import import_path  # noqa: E402
from kuro_fs.unixfs import iter_file  # noqa: E402
from kuro_wasm.host import run  # noqa: E402
from kuro_wasm.loader import add_guest  # noqa: E402
from kuro_wasm.model import guest, session  # noqa: E402

MiB = 1 << 20
NOOP_PLUGIN_WAT = '(module (memory (export "memory") 1) (func (export "noop") (result i32) (i32.const 0)))'


@dataclass
class Row:
    """One figure beside its anchor. ``ratio`` = value ÷ anchor (None when the anchor is not available)."""

    figure: str
    value: float | None
    unit: str
    anchor: str
    anchor_value: float | None
    ratio: float | None
    goal: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _row(figure: str, value: float | None, unit: str, anchor: str, anchor_value: float | None, **kw: Any) -> Row:
    if anchor_value is None or anchor_value == 0:
        reason = "the anchor measured nothing" if anchor_value is None else "the anchor measured 0 (timer resolution)"
        return _unavailable(figure, value, unit, anchor, reason, **kw)
    ratio = value / anchor_value if value is not None else None
    return Row(figure, value, unit, anchor, anchor_value, ratio, **kw)


def _unavailable(figure: str, value: float | None, unit: str, anchor: str, reason: str, **kw: Any) -> Row:
    kw.pop("note", None)  # the reason is the note
    return Row(figure, value, unit, anchor, None, None, note=f"not available: {reason}", **kw)


# ---- machine


def machine() -> dict[str, Any]:
    """The facts a figure means nothing without."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "wasmtime": _version("wasmtime"),
        "extism": _version("extism"),
        "node": None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if shutil.which("node"):
        out = subprocess.run(["node", "--version"], capture_output=True, text=True)
        facts["node"] = out.stdout.strip() or None
    return facts


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# ---- timing helpers


def _per_call(fn: Callable[[], object], n: int, warmup: int) -> float:
    """Median seconds per call over ``n`` calls (after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


# ---- 1. invocation (tools/bench_host.py measures kuro vs raw wasmtime-py; Extism is added here)


def bench_invocation(home: Path, quick: bool) -> list[Row]:
    n = 200 if quick else 2000
    h = bench_host.bench_trivial(n, home)
    kuro = h["kuro_run_us"]
    figure = "warm invocation, full receipt"
    rows = [_row(figure, kuro, "µs", "raw wasmtime-py Store+instantiate+call", h["raw_wasmtime_us"], goal="≤ 2×",
                 extra={"calls_per_batch": n})]  # fmt: skip
    rows.extend(_bench_extism(kuro, n, h))
    return rows


def _bench_extism(kuro_us: float, n: int, h: dict[str, Any]) -> list[Row]:
    figure = "warm invocation, full receipt"
    try:
        import extism  # type: ignore[import-untyped]
        from extism.extism import CompiledPlugin  # type: ignore[import-untyped]
    except ImportError as exc:
        return [_unavailable(figure, kuro_us, "µs", "Extism Python SDK", f"extism not importable ({exc})")]
    try:
        manifest = {"wasm": [{"data": bytes(wasmtime.wat2wasm(NOOP_PLUGIN_WAT))}]}
        compiled = CompiledPlugin(manifest, False)

        def from_compiled() -> None:
            extism.Plugin(compiled, wasi=False).call("noop", b"")

        warm = _per_call(from_compiled, n, max(3, n // 10))
    except Exception as exc:  # an SDK that cannot run here is reported, never faked
        return [_unavailable(figure, kuro_us, "µs", "Extism Python SDK", f"{type(exc).__name__}: {exc}")]
    rows = [_row(figure, kuro_us, "µs", "Extism: Plugin(compiled plugin) + call", warm * 1e6, goal="< 1×")]
    if "extism_plugin_and_call_us" in h:
        rows.append(_row(figure, kuro_us, "µs", "Extism: Plugin(wasm bytes) + call", h["extism_plugin_and_call_us"],
                         goal="< 1×"))  # fmt: skip
    else:
        rows.append(_unavailable(figure, kuro_us, "µs", "Extism: Plugin(wasm bytes) + call", str(h.get("extism"))))
    return rows


# ---- 2. import


def bench_import(tmp: Path, quick: bool) -> tuple[list[Row], Path]:
    size = 16 * MiB if quick else 256 * MiB
    repeat = 1 if quick else 3
    path = tmp / f"import-{size // MiB}MiB.bin"
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
    label = f"{size // MiB} MiB"

    def sha256_chunks() -> None:  # like with like: the import hashes the same chunks on 2 threads
        bench_store.hash_chunks(path, 2)

    store_box: dict[str, Any] = {}

    def kuro_import() -> None:
        store = MemoryBlockStore()
        store_box["cid"] = import_path(store, path)
        store_box["store"] = store

    ours, sha = bench_store.interleaved(lambda: bench_store._timed(kuro_import),
                                        lambda: bench_store._timed(sha256_chunks), repeat)  # fmt: skip
    rows = [_row(f"import {label} (CID, memory store, 2 threads)", ours, "s",
                 "pread + sha256 of the same chunks, 2 threads", sha, goal="≤ 1.3×")]  # fmt: skip
    rows.append(_bench_js_import(path, ours, label, store_box["cid"]))

    store, cid = store_box["store"], store_box["cid"]

    def read_back() -> None:
        # Every byte is copied once into one buffer, as the anchor copies it once: iterating the
        # stored blocks without touching them would measure only the walk, not a read.
        buf = bytearray(size)
        pos = 0
        for piece in iter_file(store.get, cid):
            buf[pos : pos + len(piece)] = piece
            pos += len(piece)
        assert pos == size

    blob = path.read_bytes()

    def copy_once() -> None:
        bytearray(blob)

    window = bytearray(1 << 20)

    def stream_back() -> None:
        # A streaming reader: every byte is copied once into a reused 1 MiB window (what a socket
        # or file writer does), so fresh-page faults of a 256 MiB buffer are not what is measured.
        total = 0
        for piece in iter_file(store.get, cid):
            n = len(piece)
            window[: min(n, len(window))] = piece[: len(window)]
            total += n
        assert total == size

    def stream_anchor() -> None:
        view = memoryview(blob)
        for start in range(0, size, 1 << 18):
            window[: 1 << 18] = view[start : start + (1 << 18)]

    read = _best(read_back, repeat)
    copy = _best(copy_once, repeat)
    rows.append(_row(f"read {label} back into one buffer (memory store)", size / read / 1e9, "GB/s",
                     "one in-memory copy of the same bytes", size / copy / 1e9))  # fmt: skip
    streamed = _best(stream_back, repeat)
    anchor = _best(stream_anchor, repeat)
    rows.append(_row(f"stream {label} back through a 1 MiB window (memory store)", size / streamed / 1e9, "GB/s",
                     "the same bytes copied through the window", size / anchor / 1e9, goal="≥ 1 GB/s"))  # fmt: skip
    return rows, path


def _bench_js_import(path: Path, ours: float, label: str, our_cid: str) -> Row:
    figure = f"import {label} (CID, memory store)"
    script = ROOT / "tools" / "unixfs_ref.mjs"
    if shutil.which("node") is None:
        return _unavailable(figure, ours, "s", "JS ipfs-unixfs-importer", "node is not installed")
    if not (ROOT / "tools" / "node_modules").is_dir():
        return _unavailable(figure, ours, "s", "JS ipfs-unixfs-importer", "tools/node_modules missing (npm ci)")

    def node(cases: list[dict[str, Any]]) -> tuple[float, dict[str, Any]]:
        t = time.perf_counter()
        out = subprocess.run(["node", str(script)], input=json.dumps({"cases": cases}), capture_output=True,
                             text=True, timeout=600)  # fmt: skip
        elapsed = time.perf_counter() - t
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "node failed")
        return elapsed, json.loads(out.stdout)

    try:
        baseline = min(node([])[0] for _ in range(3))
        elapsed, answer = node([{"kind": "file", "path": str(path), "chunk": 262144, "width": 174}])
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        return _unavailable(figure, ours, "s", "JS ipfs-unixfs-importer", str(exc))
    js_cid = answer["results"][0]["cid"]
    note = "same CID" if js_cid == our_cid else f"CID DIFFERS: {js_cid}"
    return _row(figure, ours, "s", "JS ipfs-unixfs-importer (node, minus startup)", elapsed - baseline,
                goal="< 1×", note=note, extra={"node_startup_s": baseline})  # fmt: skip


# ---- 3. fs_read through the gate (bench_host measures the guest; the host-side anchor is added here)


def bench_fs_read(home: Path, quick: bool) -> list[Row]:
    size = (4 if quick else 64) * MiB
    h = bench_host.bench_fs_read(size, home)
    store = MemoryBlockStore()
    written = Fs.empty(store).write("big.bin", bytes(range(256)) * (size // 256))
    assert written.ok, written.receipt
    fs = written.fs
    host = _best(lambda: fs.read("big.bin"), 5)
    return [_row(f"guest fs_read {size // MiB} MiB via the gate (whole run)", h["gb_per_s_whole_run"], "GB/s",
                 "Fs.read of the same file, host side", size / host / 1e9, goal="≥ 1 GB/s")]  # fmt: skip


# ---- 4. deadline (bench_host)


def bench_deadline(home: Path, quick: bool) -> list[Row]:
    samples = 3 if quick else 20
    h = bench_host.bench_deadline(samples, home)
    deadline = h["timeout_ms"]
    median, worst = h["overshoot_ms_median"], h["overshoot_ms_max"]
    goal = f"≤ {deadline + 5} ms"
    return [
        _row(f"infinite loop stopped (timeout_ms={deadline}), median", deadline + median, "ms", "the deadline",
             deadline, goal=goal, note=f"overshoot {median:+.1f} ms", extra={"samples": samples}),
        _row(f"infinite loop stopped (timeout_ms={deadline}), max of {samples}", deadline + worst, "ms",
             "the deadline", deadline, goal=goal, note=f"overshoot {worst:+.1f} ms", extra={"samples": samples}),
    ]  # fmt: skip


# ---- 5. module cache (bench_host)


def bench_cache(tmp: Path, quick: bool) -> list[Row]:
    h = bench_host.bench_cache(300 if quick else 3000, tmp)
    label = f"{h['wasm_bytes'] / MiB:.2f} MiB guest"
    return [
        _row(f"load a cached {label} from disk", h["disk_load_ms_median"], "ms", "compiling it",
             h["compile_ms"], goal="≤ 2 ms"),
        _row(f"load a cached {label} from memory", h["memory_hit_us"] / 1000, "ms", "compiling it",
             h["compile_ms"]),
    ]  # fmt: skip


# ---- 6. concurrency: all cores vs one (the same rate helper as bench_host, with the thread count of this machine)


_rate = bench_host._rate  # one rate helper for both harnesses


def bench_concurrency(home: Path, quick: bool) -> list[Row]:
    cores = os.cpu_count() or 1
    n, count, cpu_jobs = (200, 20_000_000, 2) if quick else (2000, 200_000_000, 4)
    store = MemoryBlockStore()
    sess = session("bench", Fs.empty(store).root, "terminal-repo", grant=bench_host.CAPS)
    trivial = guest(add_guest(store, (ROOT / "guests" / "hello.wat").read_text()), "trivial")
    counting = guest(add_guest(store, (ROOT / "guests" / "spin.wat").read_text()), "count", [count])
    for command in (trivial, counting):
        receipt = run(sess, command, store=store, home=home)
        assert receipt.get("kuro/outcome") == "ok", receipt  # a failed run is not a rate
    one = _rate(1, n, lambda: run(sess, trivial, store=store, home=home))
    many = _rate(cores, n, lambda: run(sess, trivial, store=store, home=home))
    cpu_one = _rate(1, cpu_jobs, lambda: run(sess, counting, store=store, home=home))
    cpu_many = _rate(cores, cpu_jobs, lambda: run(sess, counting, store=store, home=home))
    # control: the same CPU-bound loop through raw wasmtime-py, same moment: how far this machine lets threads overlap
    engine = wasmtime.Engine()
    module = wasmtime.Module(engine, (ROOT / "guests" / "spin.wat").read_text())

    def raw_count() -> object:
        st = wasmtime.Store(engine)
        return wasmtime.Instance(st, module, []).exports(st)["count"](st, count)  # type: ignore[operator]

    raw_speedup = _rate(cores, cpu_jobs, raw_count) / _rate(1, cpu_jobs, raw_count)
    goal = f"→ {cores}× on {cores} cores"
    label = f"{cores} threads (all cores)"
    return [
        _row(f"invocations/s on {label}, trivial export", many, "/s", "1 thread", one, goal=goal,
             extra={"threads": cores, "calls_per_thread": n}),
        _row(f"invocations/s on {label}, CPU-bound (spin count {count:,})", cpu_many, "/s", "1 thread", cpu_one,
             goal=goal, note=f"raw wasmtime-py on the same loop: {raw_speedup:.2f}×",
             extra={"threads": cores, "raw_wasmtime_speedup": raw_speedup}),
    ]  # fmt: skip


# ---- 7. the block store (tools/bench_store.py measures; the rows are made here)


def bench_block_store(tmp: Path, quick: bool, car_blocks: int | None = None) -> list[Row]:
    return [_row(**fields) for fields in bench_store.bench_all(tmp, quick, car_blocks)]


# ---- output


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("µs", "ms"):
        return f"{value:,.1f} {unit}" if value >= 1 else f"{value:.3f} {unit}"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    return f"{ratio:.3g}×" if ratio >= 0.01 else f"1/{1 / ratio:,.0f}"


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table (also valid Markdown)."""
    head = ("figure", "kuro", "anchor", "anchor value", "ratio", "goal", "note")
    body = [
        (r.figure, _fmt(r.value, r.unit), r.anchor, _fmt(r.anchor_value, r.unit),
         _ratio(r.ratio), r.goal, r.note)
        for r in rows
    ]  # fmt: skip
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
             for line in (head, *body)]  # fmt: skip
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


SECTIONS = ("invocation", "import", "fs_read", "deadline", "cache", "concurrency", "store")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only these sections (repeatable)")
    parser.add_argument(
        "--car-blocks", type=int, metavar="N", help="blocks in the import_car figure (default 1,000,000)"
    )
    args = parser.parse_args(argv)
    wanted = args.only or list(SECTIONS)
    facts = machine()
    print(
        f"machine: {facts['nproc']} × {facts['cpu']} · Python {facts['python']} · wasmtime {facts['wasmtime']}"
        f" · extism {facts['extism'] or 'not installed'} · node {facts['node'] or 'not installed'}"
        f" · {facts['date']}{' · QUICK (smoke sizes)' if args.quick else ''}",
        flush=True,
    )
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kuro-bench-") as tmpdir:
        tmp = Path(tmpdir)
        home = tmp / "home"
        if "invocation" in wanted:
            rows += bench_invocation(home, args.quick)
        if "import" in wanted:
            rows += bench_import(tmp, args.quick)[0]
        if "fs_read" in wanted:
            rows += bench_fs_read(home, args.quick)
        if "deadline" in wanted:
            rows += bench_deadline(home, args.quick)
        if "cache" in wanted:
            rows += bench_cache(tmp, args.quick)
        if "concurrency" in wanted:
            rows += bench_concurrency(home, args.quick)
        if "store" in wanted:
            rows += bench_block_store(tmp, args.quick, args.car_blocks)
    print(table(rows))
    if args.json:
        payload = {"machine": facts, "quick": args.quick, "rows": [asdict(r) for r in rows]}
        Path(args.json).write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
