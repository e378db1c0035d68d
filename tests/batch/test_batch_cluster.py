"""run_many on a real Dask LocalCluster (2 workers): the same receipts as one by one in-process, nothing twice."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
from batch_witness import Shared, WitnessStore, reads, when_read

from kuro_fs.cid import raw_cid
from kuro_fs.fs import Fs
from kuro_wasm.batch import run_many
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.invocation import Invocation, invocation

pytestmark = pytest.mark.timeout(240)

GUESTS = Path(__file__).resolve().parents[2] / "guests"

WRITE = ["guest/invoke", "fs/read", "fs/write"]
COMPARED = ("kuro/exit-code", "kuro/outcome", "kuro/stdout-cid", "kuro/stderr-cid", "kuro/fs-root-after", "kuro/trap")


def _mixed(shared: Shared, n: int) -> list[dict[str, Any]]:
    """ok with output, fs writes (each its own file), nonzero exits, traps and timeouts, interleaved."""
    lines: list[dict[str, Any]] = []
    for i in range(n):
        k = i % 20
        if k in (0, 10):
            lines.append({"guest": shared.trap, "export": "run"})
        elif k in (1, 5, 9):
            lines.append({"guest": shared.batch, "export": "note", "args": [i], "grant": WRITE})
        elif k == 7:
            lines.append({"guest": shared.batch, "export": "exit", "args": [i % 200 + 1]})
        elif k == 13 and i < 400:
            lines.append({"guest": shared.spin, "export": "run", "timeout_ms": 20})
        else:
            lines.append({"guest": shared.batch, "export": "echo", "args": [i]})
    return lines


def _one_by_one(shared: Shared, invocations: list[Invocation]) -> list[dict[str, Any]]:
    return [run(inv.session, inv.command, store=shared.store, home=False, **inv.run_options()) for inv in invocations]


def test_a_thousand_mixed_invocations_give_the_receipts_of_running_them_one_by_one(shared: Shared, client: Any) -> None:
    lines = _mixed(shared, 1000)
    batch = run_many(lines, store=shared.store, cluster=client)
    got: dict[int, dict[str, Any]] = {}
    for done in batch:
        assert done.index not in got, "one receipt per invocation"
        got[done.index] = done.value
    expected = _one_by_one(shared, batch.invocations)
    assert sorted(got) == list(range(1000)) and batch.not_run == [] and batch.lost == []
    for index, want in enumerate(expected):
        assert {k: got[index].get(k) for k in COMPARED} == {k: want.get(k) for k in COMPARED}, lines[index]
    outcomes = {r["kuro/outcome"] for r in got.values()}
    assert outcomes == {"ok", "exit", "trap", "timeout"}
    roots = {r["kuro/fs-root-after"] for r in got.values() if "kuro/fs-root-after" in r}
    assert len(roots) == 150  # every write made its own tree, and each tree is complete in the driver's store
    for root in roots:
        assert Fs(shared.store, root).ls("notes").value  # the whole tree is in the driver's store


def _witnessed(
    shared: Shared, n: int, log: Path, kill_at: int | None = None
) -> tuple[list[Invocation], WitnessStore, dict[str, int]]:
    """n invocations, each reading its own file (a unique block the witness logs); reading ``kill_at``'s kills."""
    invocations = []
    effect: dict[str, int] = {}
    for i in range(n):
        data = f"effect {i}".encode()
        root = str(Fs.empty(shared.store).write("greeting.txt", data).fs.root)
        effect[raw_cid(data)] = i
        inv = invocation({"guest": shared.cat, "export": "run", "fs": root}, session_id="w", default_fs=root)
        invocations.append(inv)
    kill_on = None if kill_at is None else raw_cid(f"effect {kill_at}".encode())
    return invocations, WitnessStore(str(shared.store.root), str(log), frozenset(effect), kill_on), effect


def _runs(log: Path, effect: dict[str, int], per_run: int, killed: int | None = None) -> dict[int, list[int]]:
    """invocation → the pids of the workers that ran it (one entry per run; the killed worker's last may be partial)."""
    counts: dict[tuple[int, int], int] = {}
    for pid, cid in reads(str(log)):
        key = (effect[cid], pid)
        counts[key] = counts.get(key, 0) + 1
    out: dict[int, list[int]] = {}
    for (index, pid), count in counts.items():
        assert pid == killed or count % per_run == 0, f"invocation {index}: {count} reads is no whole number of runs"
        out.setdefault(index, []).extend([pid] * -(-count // per_run))
    return out


def test_killing_a_worker_mid_batch_records_exactly_its_in_flight_invocations_as_died_and_runs_nothing_twice(
    shared: Shared, client: Any, tmp_path: Path
) -> None:
    _kill_a_worker_mid_batch(shared, client, tmp_path, 240, 100)


def test_with_dask_retrying_a_dead_workers_tasks_the_fence_still_runs_nothing_twice(
    shared: Shared, retrying_client: Any, tmp_path: Path
) -> None:
    # allowed-failures 3: Dask re-runs the dead worker's chunk elsewhere; only the fence refuses it
    _kill_a_worker_mid_batch(shared, retrying_client, tmp_path, 60, 20)


def _kill_a_worker_mid_batch(shared: Shared, client: Any, tmp_path: Path, n: int, at: int) -> None:
    """Kill the worker running invocation ``at`` of ``n``: exactly its chunks died, everything else ran once."""
    invocations, witness, effect = _witnessed(shared, 1 + n, tmp_path / "reads.log", kill_at=1 + at)
    probe = _runs_in_process(shared, invocations[0], witness, tmp_path)
    invocations = invocations[1:]
    batch = run_many(invocations, store=shared.store, cluster=client, worker_store=witness, chunk_size=6)
    got = {done.index: done.value for done in batch}
    victim = next(pid for pid, cid in reads(witness.log) if effect[cid] == 1 + at)
    assert sorted(got) == list(range(len(invocations))) and batch.not_run == []
    ran = _runs(tmp_path / "reads.log", effect, probe, killed=victim)
    died = {i for i, r in got.items() if r["kuro/outcome"] == "worker-died"}
    assert at in died and died == set(batch.lost)  # the invocation its worker died running
    assert len(died) <= 2 * 6, "at most the chunks the worker held (one running, one waiting)"
    for index, value in got.items():
        pids = ran.get(index + 1, [])
        assert len(pids) <= 1, f"invocation {index} ran {len(pids)} times"
        if index in died:
            assert value["kuro/exit-code"] == 137 and value["kuro/worker"]["pid"] == victim
            assert pids in ([], [victim]), "a died invocation ran on the dead worker or not at all"
        else:
            assert value["kuro/outcome"] == "ok" and len(pids) == 1
            assert value["kuro/stdout"] == f"effect {index + 1}".encode()


def _runs_in_process(
    shared: Shared, inv: Invocation, witness: WitnessStore, tmp_path: Path, isolation: Any = None
) -> int:
    """How many witnessed reads one run of an invocation makes (the unit the log is counted in)."""
    store = dataclasses.replace(witness, kill_on=None).open(None)
    receipt = run(
        inv.session,
        inv.command,
        store=store,  # type: ignore[arg-type]
        home=False,
        isolation=isolation,
        **inv.run_options(),  # type: ignore[arg-type]
    )
    assert receipt["kuro/outcome"] == "ok"
    per_run = len(reads(witness.log))
    assert per_run >= 1
    Path(witness.log).unlink()
    return per_run


def test_an_op_id_already_in_the_ledger_is_replayed_without_touching_the_cluster(
    shared: Shared, client: Any, tmp_path: Path
) -> None:
    lines = [{"guest": shared.batch, "export": "echo", "args": [i], "op_id": f"op-{i}"} for i in range(40)]
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        first = {d.index: d.value for d in run_many(lines, store=shared.store, cluster=client, ledger=ledger)}
        assert all(v["kuro/replayed"] is False and v["kuro/persistence"] == "saved" for v in first.values())
        again = list(run_many(lines, store=shared.store, cluster=_Untouchable(), ledger=ledger))
    assert all(d.value["kuro/replayed"] is True for d in again)
    assert {d.index: d.value["kuro/stdout-cid"] for d in again} == {i: v["kuro/stdout-cid"] for i, v in first.items()}


class _Untouchable:
    """A backend that fails the test if the batch so much as opens it."""

    def open(self, batch_id: str) -> None:
        raise AssertionError("the cluster was touched")

    def submit(self, token: str, items: list[Any]) -> None:
        raise AssertionError("the cluster was touched")

    def wait(self, timeout: float) -> list[Any]:
        raise AssertionError("the cluster was touched")

    def slots(self) -> int:
        return 1

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_cancel_kills_the_running_guests_keeps_their_receipts_and_releases_what_never_ran(
    shared: Shared, client: Any, tmp_path: Path
) -> None:
    log = str(tmp_path / "reads.log")
    witness = WitnessStore(str(shared.store.root), log, frozenset({shared.spin}), log_has=True)
    lines = [{"guest": shared.spin, "export": "run", "timeout_ms": 30_000, "op_id": f"slow-{i}"} for i in range(12)]
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many(lines, store=shared.store, cluster=client, ledger=ledger, chunk_size=1, worker_store=witness)
        when_read(log, batch.cancel)  # a worker claimed a spinner and is loading it: only a kill ends it
        finished = list(batch)
        assert finished, "the spinner that was loading when the cancel came ends with a receipt"
        assert len(finished) + len(batch.not_run) == 12
        assert {d.index for d in finished}.isdisjoint(batch.not_run)
        for done in finished:
            assert done.value["kuro/outcome"] == "cancelled" and done.value["kuro/exit-code"] == 130
            assert ledger.result(f"slow-{done.index}")["kuro/outcome"] == "cancelled"
        for index in batch.not_run:
            assert ledger.result(f"slow-{index}")["kuro/status"] == "not-found"  # released: it may run later


def test_dask_workers_keep_their_caches_in_their_own_home_never_the_drivers(shared: Shared, tmp_path: Path) -> None:
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    from kuro_fs.filestore import FileBlockStore
    from kuro_fs.gateway.serve import running_gateway
    from kuro_wasm.batch.stores import GatewayStore

    driver_home, worker_home, named = tmp_path / "driver-home", tmp_path / "worker-home", tmp_path / "named-home"
    hello = add_guest(shared.store, (GUESTS / "hello.wat").read_text())  # a guest new to the worker process
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
            env={"KURO_HOME": str(worker_home)},  # what the workers see; the driver's home is another
        )
    client = distributed.Client(cluster, set_as_default=False)
    try:
        with running_gateway(shared.store) as url:
            rounds = [(None, worker_home, shared.batch, "echo", [1]), (str(named), named, hello, "run", [])]
            for given, home, guest, export, args in rounds:
                batch = run_many(
                    [{"guest": guest, "export": export, "args": args}] * 3,
                    store=shared.store,
                    cluster=client,
                    worker_store=GatewayStore(url),
                    home=str(driver_home),
                    worker_home=given,
                )
                assert [d.value["kuro/outcome"] for d in batch] == ["ok"] * 3
                assert FileBlockStore(home / "blocks").has(guest), "the verified guest is cached in its home"
                assert any((home / "cache" / "modules").iterdir()), "the compiled guest is cached in its home"
    finally:
        client.close()
        cluster.close()
    assert not driver_home.exists(), "a worker wrote under the driver's home"
