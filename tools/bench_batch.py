"""Batch measurements for ``tools/bench.py`` (section ``batch``): kuro_wasm.batch on a Dask LocalCluster(2).

Each function returns plain numbers; ``tools/bench.py`` sets them beside their anchors as rows.
Every pair is measured interleaved (ABAB…) in the same run, with the load average before and after,
and CPU time beside wall time: on a loaded 2-core machine wall time says how busy the neighbours are,
CPU time what the work cost.

The cluster of the rows is the one ``run_many`` starts without an address
(:func:`kuro_wasm.batch.cluster.local_cluster`: Dask's defaults but retries, its profiler and its
20 ms tick), started once and given to every round as a client; the start-up anchor is Dask's defaults.

* ``cpu_bound``: N CPU-bound invocations (``spin count``) through ``run_many`` on the cluster vs the
  same N run one after another in this process (``kuro_wasm.run``); speedup = in-process ÷ cluster wall.
  Control, same moment: the same N split over two plain spawned processes (no Dask, no batch), which
  says how much of two cores a loaded machine lets two processes have.
* ``trivial``: M trivial invocations through ``run_many`` (adaptive chunks) vs ``run`` in-process, per second.
* ``pool``: the same CPU-bound and trivial batches without Dask — ``LocalPool(2)`` over a started
  worker-process pool (what ``kuro batch --local 2`` uses when Dask is not installed), wall time only
  (its workers are forked by a zygote, whose CPU this process does not see).
* ``first_receipt``: ``run_many`` with no cluster (it starts a LocalCluster(2)) to its first receipt, vs
  Dask alone: a LocalCluster(2) started, a client, one no-op task's result.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.batch import run_many
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.invocation import Invocation, invocation

ROOT = Path(__file__).resolve().parent.parent


def _load() -> float:
    return os.getloadavg()[0]


def _noop() -> int:
    return 0


def _cluster() -> tuple[Any, Any]:
    """The LocalCluster(2) the rows run on: the one ``run_many`` starts without an address, kept for every round."""
    from distributed import Client

    from kuro_wasm.batch.cluster import local_cluster

    cluster = local_cluster(2)
    return cluster, Client(cluster, set_as_default=False)


def _dask_cluster() -> tuple[Any, Any]:
    """Dask alone: a LocalCluster(2) of one-thread processes under Dask's defaults (the start-up anchor)."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL
        )
    return cluster, Client(cluster, set_as_default=False)


def _workers_cpu(client: Any) -> float:
    return float(sum(client.run(time.process_time).values()))


def _specs(store: FileBlockStore, wat: str, export: str, args: list[int], n: int) -> list[Invocation]:
    cid = add_guest(store, (ROOT / "guests" / wat).read_text())
    root = str(Fs.empty(store).root)
    line = {"guest": cid, "export": export, "args": args}
    one = invocation(line, session_id="bench", default_fs=root)
    return [one] * n


def _in_process(store: FileBlockStore, specs: list[Invocation], home: Path) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for inv in specs:
        receipt = run(inv.session, inv.command, store=store, home=home, **inv.run_options())
        assert receipt["kuro/outcome"] == "ok", receipt
    return time.perf_counter() - wall, time.process_time() - cpu


def _on_cluster(
    store: FileBlockStore, specs: list[Invocation], client: Any, home: Path, chunk_size: int | None
) -> tuple[float, float]:
    wall, cpu, workers = time.perf_counter(), time.process_time(), _workers_cpu(client)
    done = 0
    for completed in run_many(specs, store=store, cluster=client, worker_home=str(home), chunk_size=chunk_size):
        assert completed.value["kuro/outcome"] == "ok", completed.value
        done += 1
    assert done == len(specs)
    elapsed = time.perf_counter() - wall
    return elapsed, time.process_time() - cpu + _workers_cpu(client) - workers


def _on_pool(store: FileBlockStore, specs: list[Invocation], workers: Any, home: Path, chunk_size: int | None) -> float:
    from kuro_wasm.batch.local import LocalPool
    from kuro_wasm.batch.stores import SharedStore

    backend = LocalPool(workers.size, store=SharedStore(str(store.root)), home=home, pool=workers)
    wall = time.perf_counter()
    done = 0
    for completed in run_many(specs, store=store, cluster=backend, home=home, chunk_size=chunk_size):
        assert completed.value["kuro/outcome"] == "ok", completed.value
        done += 1
    assert done == len(specs)
    return time.perf_counter() - wall


def _spin_half(args: tuple[str, str, int, int, str]) -> float:
    """One plain process's half of the CPU-bound work (the control: no Dask, no batch machinery)."""
    path, wat_cid, count, n, root = args
    store = FileBlockStore(path)
    inv = invocation({"guest": wat_cid, "export": "count", "args": [count]}, session_id="c", default_fs=root)
    began = time.process_time()
    for _ in range(n):
        run(inv.session, inv.command, store=store, home=False, **inv.run_options())
    return time.process_time() - began


def _two_processes(pool: Any, store: FileBlockStore, inv: Invocation, n: int) -> float:
    count = inv.command["kuro/args"][0]
    half = (str(store.root), inv.command["kuro/guest"], count, n // 2, inv.session.fs_root_cid)
    began = time.perf_counter()
    pool.map(_spin_half, [half, half])
    return time.perf_counter() - began


def measure(tmp: Path, quick: bool) -> dict[str, Any]:
    """Every batch figure (see the module docstring) as plain numbers."""
    store = FileBlockStore(tmp / "batch-blocks")
    home = tmp / "batch-home"
    count = 40_000_000 if quick else 200_000_000
    cpu_n, trivial_n, rounds = (8, 2_000, 1) if quick else (24, 20_000, 3)
    heavy = _specs(store, "spin.wat", "count", [count], cpu_n)
    light = _specs(store, "hello.wat", "trivial", [], trivial_n)
    out: dict[str, Any] = {"load_before": _load(), "spin_count": count, "cpu_n": cpu_n, "trivial_n": trivial_n}
    import multiprocessing

    from kuro_wasm.host.worker.pool import WorkerPool

    cluster, client = _cluster()
    pool = multiprocessing.get_context("spawn").Pool(2)
    workers = WorkerPool(2)
    try:
        _two_processes(pool, store, heavy[0], 2)  # warm: the pool's processes import and compile
        _on_cluster(store, heavy[:4], client, home, 1)  # warm: workers import, compile, cache
        _on_cluster(store, light[:200], client, home, None)
        _on_pool(store, heavy[:2], workers, home, 1)
        _on_pool(store, light[:200], workers, home, None)
        _in_process(store, heavy[:2], home)
        cpu_cluster, cpu_local, triv_cluster, triv_local, plain = [], [], [], [], []
        cpu_pool: list[float] = []
        triv_pool: list[float] = []
        for _ in range(rounds):
            cpu_cluster.append(_on_cluster(store, heavy, client, home, 1))
            cpu_local.append(_in_process(store, heavy, home))
            plain.append(_two_processes(pool, store, heavy[0], cpu_n))
            cpu_pool.append(_on_pool(store, heavy, workers, home, 1))
            triv_cluster.append(_on_cluster(store, light, client, home, None))
            triv_local.append(_in_process(store, light[: trivial_n // 4], home))
            triv_pool.append(_on_pool(store, light[: trivial_n // 4], workers, home, None))
    finally:
        workers.close()
        pool.close()
        pool.join()
        client.close()
        cluster.close()
    out["cpu_two_plain_processes_s"] = statistics.median(plain)
    out["cpu_cluster_s"] = statistics.median(w for w, _ in cpu_cluster)
    out["cpu_cluster_cpu_s"] = statistics.median(c for _, c in cpu_cluster)
    out["cpu_local_s"] = statistics.median(w for w, _ in cpu_local)
    out["cpu_local_cpu_s"] = statistics.median(c for _, c in cpu_local)
    out["trivial_cluster_rate"] = trivial_n / statistics.median(w for w, _ in triv_cluster)
    out["trivial_cluster_cpu_per_call_us"] = statistics.median(c for _, c in triv_cluster) / trivial_n * 1e6
    out["trivial_local_rate"] = (trivial_n // 4) / statistics.median(w for w, _ in triv_local)
    out["trivial_local_cpu_per_call_us"] = statistics.median(c for _, c in triv_local) / (trivial_n // 4) * 1e6
    out["cpu_pool_s"] = statistics.median(cpu_pool)
    out["trivial_pool_rate"] = (trivial_n // 4) / statistics.median(triv_pool)
    starts, bare = [], []
    for _ in range(1 if quick else 2):
        starts.append(_first_receipt(store, light[:1], home))
        bare.append(_bare_dask())
    out["first_receipt_s"] = statistics.median(starts)
    out["bare_dask_s"] = statistics.median(bare)
    out["load_after"] = _load()
    store.close()
    return out


def _first_receipt(store: FileBlockStore, specs: list[Invocation], home: Path) -> float:
    began = time.perf_counter()
    batch = run_many(specs, store=store, workers=2, home=home, worker_home=str(home))
    with batch:
        first = next(iter(batch))
        elapsed = time.perf_counter() - began
        assert first.value["kuro/outcome"] == "ok", first.value
    return elapsed


def _bare_dask() -> float:
    began = time.perf_counter()
    cluster, client = _dask_cluster()
    try:
        assert client.submit(_noop, pure=False).result() == 0
        return time.perf_counter() - began
    finally:
        client.close()
        cluster.close()
