"""Benchmarks of kuro's WASI preview 1 beside wasmtime's built-in WASI, in one process (figures, not tests).

Run through ``tools/bench.py --only wasi`` (a table and ``--json``), or alone:
``.venv/bin/python tools/bench_wasi.py [--quick]``. Each figure runs the same committed C program
(``guests/c/*.wasm``) both ways, **interleaved** (kuro, built-in, kuro, built-in …) so load hits
both alike, and records wall time *and* CPU time, because on a loaded 2-core machine wall-clock
micro-figures swing 3×:

* ``fd_write`` of 1 byte, per call: ``writeloop N`` minus ``writeloop 0`` (the same run without the
  loop), divided by N. kuro keeps the bytes in the run's stream (and receipt); the built-in writes
  them to a temporary file (kept, like ours: the anchor the goal is read on) and, as a floor that does
  less work (the bytes are discarded), to ``/dev/null``.
* reading a 64 MiB file with 64 KiB and 1 MiB ``read()``\\s (``readfile``): kuro from a kuro.fs file
  in a memory block store *and* in a :class:`~kuro_fs.filestore.FileBlockStore` (the default home
  store: every leaf read from its block file and verified against its CID), the whole run each time
  (fresh overlay, leaf list decoded inside the timing); the built-in from a real file in a preopened
  temporary directory. Both disk sides read through the page cache (the files were just written),
  so the figure is kuro's read path, not the disk.
* a warm hello-world run: kuro's ``run`` with its full receipt vs the built-in's ``WasiConfig`` +
  ``Store`` + instantiate (an ``InstancePre``, the cheapest it has) + ``_start``, its stdout again to a
  temporary file and to ``/dev/null``.

CPU is ``time.process_time()`` (every thread of the process: the built-in's I/O worker threads
count for it, kuro's epoch ticker for kuro). The load average is recorded with each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuro_fs.blocks import BlockStore, MemoryBlockStore  # noqa: E402
from kuro_fs.filestore import FileBlockStore  # noqa: E402
from kuro_fs.fs import Fs  # noqa: E402
from kuro_wasm.host.api import run  # noqa: E402
from kuro_wasm.host.loader import add_guest  # noqa: E402
from kuro_wasm.model.sessions import guest, session  # noqa: E402

C_GUESTS = ROOT / "guests" / "c"
MiB = 1 << 20

#: (wall seconds, CPU seconds)
Timing = tuple[float, float]


def _timed(fn: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _median(samples: list[Timing]) -> Timing:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def load_average() -> float | None:
    """The 1-minute load average, or None where the OS does not say."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


class Builtin:
    """wasmtime's own WASI (wasmtime-py ``WasiConfig``), one engine, programs pre-linked once."""

    def __init__(self, root: Path | None, stdout: str) -> None:
        self.engine = wasmtime.Engine()
        self.linker = wasmtime.Linker(self.engine)
        self.linker.define_wasi()
        self.pre: dict[str, Any] = {}
        self.root, self.stdout = root, stdout

    def run(self, program: str, args: list[str]) -> None:
        pre = self.pre.get(program)
        if pre is None:
            module = wasmtime.Module.from_file(self.engine, str(C_GUESTS / f"{program}.wasm"))
            pre = self.pre[program] = self.linker.instantiate_pre(module)
        config = wasmtime.WasiConfig()
        config.argv = [program, *args]
        config.stdout_file = self.stdout
        if self.root is not None:
            config.preopen_dir(str(self.root), "/")
        store = wasmtime.Store(self.engine)
        store.set_wasi(config)
        instance = pre.instantiate(store)
        start = instance.exports(store)["_start"]
        assert isinstance(start, wasmtime.Func)
        try:
            start(store)
        except wasmtime.ExitTrap as exc:
            assert exc.code == 0, exc.code


class Kuro:
    """kuro's WASI over a kuro.fs ``Fs`` (in a memory store unless ``store`` is given): ``run``, full receipt."""

    def __init__(self, files: dict[str, bytes], store: BlockStore | None = None) -> None:
        self.store: BlockStore = MemoryBlockStore() if store is None else store
        fs = Fs.empty(self.store)
        for path, data in files.items():
            fs = fs.write(path, data).fs
        self.fs = fs
        self.session = session("bench-wasi", fs.root, "terminal-repo")
        self.cids: dict[str, str] = {}

    def run(self, program: str, args: list[str]) -> dict[str, Any]:
        cid = self.cids.get(program)
        if cid is None:
            cid = self.cids[program] = add_guest(self.store, (C_GUESTS / f"{program}.wasm").read_bytes())
        receipt = run(self.session, guest(cid, "_start", args), store=self.store, fs=self.fs, home=False,
                      max_output_bytes=1 << 30, max_output_chunks=10**7)  # fmt: skip
        assert receipt["kuro/outcome"] == "ok", receipt
        return receipt


def bench_fd_write(n: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """Per-call wall and CPU µs of a 1-byte ``fd_write`` to stdout: kuro, built-in → file, built-in → /dev/null."""
    kuro = Kuro({})
    to_file, to_null = Builtin(None, str(tmp / "stdout")), Builtin(None, os.devnull)
    sides: dict[str, Callable[[list[str]], object]] = {
        "kuro": lambda a: kuro.run("writeloop", a),
        "builtin_file": lambda a: to_file.run("writeloop", a),
        "builtin_null": lambda a: to_null.run("writeloop", a),
    }
    samples: dict[str, list[Timing]] = {k: [] for k in sides}
    for side in sides.values():  # warm: compiled, pre-linked, first-touch costs paid
        side(["0"])
        side([str(n // 10)])
    for _ in range(rounds):
        for name, side in sides.items():
            empty = _timed(lambda side=side: side(["0"]))  # type: ignore[misc]
            full = _timed(lambda side=side: side([str(n)]))  # type: ignore[misc]
            samples[name].append(((full[0] - empty[0]) / n, (full[1] - empty[1]) / n))
    out: dict[str, Any] = {"calls": n, "rounds": rounds, "load": load_average()}
    for name, got in samples.items():
        wall, cpu = _median(got)
        out[f"{name}_wall_us"], out[f"{name}_cpu_us"] = wall * 1e6, cpu * 1e6
    return out


def bench_read(size: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """GB/s (wall and CPU) of ``readfile big BUFSIZE`` for 64 KiB and 1 MiB reads: kuro.fs in a memory store
    (``kuro``) and in a FileBlockStore (``kuro_disk``) vs a real file (``builtin``), interleaved."""
    data = os.urandom(size)
    folder = tmp / "wasi-read"
    folder.mkdir(exist_ok=True)
    (folder / "big").write_bytes(data)
    with FileBlockStore(tmp / "wasi-read-blocks") as disk:
        sides = {"kuro": Kuro({"big": data}), "kuro_disk": Kuro({"big": data}, disk)}
        builtin = Builtin(folder, os.devnull)
        expected = f"{size} ".encode()
        out: dict[str, Any] = {"bytes": size, "rounds": rounds, "load": load_average()}
        for block in (64 << 10, MiB):
            args = ["big", str(block)]
            for kuro in sides.values():
                receipt = kuro.run("readfile", args)  # warm, and check what it read
                assert receipt["kuro/stdout"].startswith(expected), receipt["kuro/stdout"]
            builtin.run("readfile", args)
            samples: dict[str, list[Timing]] = {name: [] for name in (*sides, "builtin")}
            for _ in range(rounds):
                for name, kuro in sides.items():
                    samples[name].append(_timed(lambda kuro=kuro, args=args: kuro.run("readfile", args)))  # type: ignore[misc]
                samples["builtin"].append(_timed(lambda args=args: builtin.run("readfile", args)))  # type: ignore[misc]
            for name, got in samples.items():
                wall, cpu = _median(got)
                out[f"{name}_{block >> 10}k_wall_gb_s"] = size / wall / 1e9
                out[f"{name}_{block >> 10}k_cpu_gb_s"] = size / cpu / 1e9 if cpu > 0 else None
        out["load_after"] = load_average()
    return out


def bench_hello(n: int, tmp: Path) -> dict[str, Any]:
    """Median wall and CPU µs of one warm hello-world run: kuro (full receipt), built-in → file, → /dev/null."""
    kuro = Kuro({})
    to_file, to_null = Builtin(None, str(tmp / "hello-stdout")), Builtin(None, os.devnull)
    sides: dict[str, Callable[[], object]] = {
        "kuro": lambda: kuro.run("hello", []),
        "builtin_file": lambda: to_file.run("hello", []),
        "builtin_null": lambda: to_null.run("hello", []),
    }
    for side in sides.values():
        for _ in range(max(10, n // 10)):
            side()
    samples: dict[str, list[Timing]] = {k: [] for k in sides}
    for _ in range(n):
        for name, side in sides.items():
            samples[name].append(_timed(side))
    out: dict[str, Any] = {"runs": n, "load": load_average()}
    for name, got in samples.items():
        wall, cpu = _median(got)
        out[f"{name}_wall_us"], out[f"{name}_cpu_us"] = wall * 1e6, cpu * 1e6
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples (a smoke run)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kuro-bench-wasi-") as scratch:
        tmp = Path(scratch)
        results = {
            "fd_write": bench_fd_write(20_000 if args.quick else 200_000, 2 if args.quick else 5, tmp),
            "read": bench_read((4 if args.quick else 64) * MiB, 2 if args.quick else 5, tmp),
            "hello": bench_hello(50 if args.quick else 500, tmp),
        }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
