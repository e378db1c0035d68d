"""The batch without Dask: the worker-process pool of isolation="process", the same promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_witness import Shared, WitnessStore, reads, when_read
from test_batch_cluster import COMPARED, _mixed, _one_by_one, _runs, _runs_in_process, _Untouchable, _witnessed

from kuro_fs.errors import GatewayUnreachable
from kuro_wasm.batch import run_many
from kuro_wasm.batch.local import LocalPool
from kuro_wasm.batch.stores import GatewayStore, SharedStore
from kuro_wasm.errors import BatchError
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.ledger.ledger import Ledger

pytestmark = pytest.mark.timeout(240)


def test_mixed_invocations_on_the_local_pool_give_the_receipts_of_running_them_one_by_one(shared: Shared) -> None:
    lines = _mixed(shared, 200)
    pool = LocalPool(2, store=SharedStore(str(shared.store.root)))
    batch = run_many(lines, store=shared.store, cluster=pool)
    got = {done.index: done.value for done in batch}
    expected = _one_by_one(shared, batch.invocations)
    assert sorted(got) == list(range(200))
    for index, want in enumerate(expected):
        assert {k: got[index].get(k) for k in COMPARED} == {k: want.get(k) for k in COMPARED}, lines[index]


def test_a_pool_worker_killed_mid_batch_leaves_exactly_its_run_died_and_the_rest_done_once(
    shared: Shared, tmp_path: Path
) -> None:
    invocations, witness, effect = _witnessed(shared, 1 + 120, tmp_path / "reads.log", kill_at=1 + 50)
    with WorkerPool(1) as pool:  # a run on a worker reads through the pool's host: count its reads there
        probe = _runs_in_process(shared, invocations[0], witness, tmp_path, isolation=pool)
    invocations = invocations[1:]
    batch = run_many(invocations, store=shared.store, cluster=LocalPool(2, store=witness), chunk_size=4)
    got = {done.index: done.value for done in batch}
    victim = next(pid for pid, cid in reads(witness.log) if effect[cid] == 1 + 50)
    assert sorted(got) == list(range(len(invocations))) and batch.not_run == []
    ran = _runs(tmp_path / "reads.log", effect, probe, killed=victim)
    died = {i for i, r in got.items() if r["kuro/outcome"] == "worker-died"}
    assert died == {50} and batch.lost == [50]  # one run per worker at a time: only the one it was running
    assert got[50]["kuro/exit-code"] == 137 and got[50]["kuro/worker"]["signal"] == "SIGKILL"
    assert got[50]["kuro/worker"]["pid"] == victim and ran[51] == [victim]
    for index, value in got.items():
        assert value["kuro/isolation"] == "process"
        pids = ran.get(index + 1, [])
        assert len(pids) == 1, f"invocation {index} ran {len(pids)} times"
        if index != 50:
            assert value["kuro/outcome"] == "ok" and value["kuro/stdout"] == f"effect {index + 1}".encode()
            assert pids == [value["kuro/worker"]["pid"]]  # it ran once, on the worker its receipt names


def test_a_cancelled_local_batch_kills_what_runs_and_starts_nothing_after(shared: Shared, tmp_path: Path) -> None:
    log = str(tmp_path / "reads.log")
    witness = WitnessStore(str(shared.store.root), log, frozenset({shared.spin}), log_has=True)
    lines = [
        {"guest": shared.spin, "export": "run", "timeout_ms": 30_000} for _ in range(6)
    ]  # a kill, not this, ends them
    batch = run_many(lines, store=shared.store, cluster=LocalPool(2, store=witness), chunk_size=1)
    when_read(log, batch.cancel)  # a spinner is loading: it was taken, and only a kill ends it
    got = {done.index: done.value for done in batch}
    assert got, "the spinner that was loading when the cancel came ends with a receipt"
    assert set(got) | set(batch.not_run) == set(range(6)) and not set(got) & set(batch.not_run)
    assert all((v["kuro/outcome"], v["kuro/exit-code"]) == ("cancelled", 130) for v in got.values())


def test_a_store_no_worker_can_open_stops_the_batch_and_runs_nothing(shared: Shared, tmp_path: Path) -> None:
    lines = [{"guest": shared.batch, "export": "echo", "args": [1]}]
    batch = run_many(lines, store=shared.store, cluster=LocalPool(1, store=SharedStore(str(tmp_path / "nowhere"))))
    with pytest.raises(BatchError, match="nowhere"):
        list(batch)
    assert batch.not_run == [0]


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(BatchError):
        LocalPool(0, store=SharedStore("/"))


def test_a_pool_or_a_local_cluster_larger_than_the_maximum_is_refused_before_anything_starts() -> None:
    from kuro_wasm.batch.driver import backend_for
    from kuro_wasm.model.limits import MAX_WORKERS

    with pytest.raises(BatchError, match=f"at most {MAX_WORKERS} workers, got 100000000"):
        LocalPool(10**8, store=SharedStore("/"))
    for workers in (MAX_WORKERS + 1, 0, True):
        with pytest.raises(BatchError, match=f"workers must be an integer from 1 to {MAX_WORKERS}"):
            backend_for(None, store=SharedStore("/"), workers=workers)


def test_a_gateway_that_does_not_answer_refuses_the_batch_before_any_op_id_is_claimed(
    shared: Shared, tmp_path: Path
) -> None:
    lines = [{"guest": shared.batch, "export": "echo", "args": [1], "op_id": "first"}]
    nowhere = GatewayStore("http://127.0.0.1:9")
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        with pytest.raises(GatewayUnreachable, match=r"127\.0\.0\.1:9"):
            run_many(lines, store=shared.store, ledger=ledger, worker_store=nowhere, cluster=_Untouchable())
        assert ledger.result("first")["kuro/status"] == "not-found"
