"""A batch's op ids and the ledger: an op id is used only by a run that may have happened.

Whatever stops a batch before an invocation was sent — a backend that cannot start, a caller
that stops iterating — leaves that invocation's op id free (``not-found``), never ``running``
nor, once this process is gone, ``unknown``: it never ran, so it may run later under that op id.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_witness import Inline, Shared
from test_batch_cluster import _Untouchable

from kuro_fs.cid import cid_for
from kuro_fs.errors import BlockStoreError
from kuro_fs.filestore import FileBlockStore
from kuro_wasm.batch import run_many
from kuro_wasm.batch.backend import Done
from kuro_wasm.batch.stores import SharedStore
from kuro_wasm.errors import BatchError, LedgerError, ModelError
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.limits import MAX_WORKERS


class _CannotStart(_Untouchable):
    """A backend whose cluster cannot be reached (as ``--cluster`` at an address where no scheduler answers)."""

    def open(self, batch_id: str) -> None:
        raise BatchError("no Dask scheduler answers at tcp://127.0.0.1:1")


def _echo(shared: Shared, op_id: str) -> dict[str, Any]:
    return {"guest": shared.batch, "export": "echo", "args": [1], "op_id": op_id}


def test_a_backend_that_cannot_start_leaves_every_op_id_free(shared: Shared, tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many(
            [_echo(shared, "a"), _echo(shared, "b")], store=shared.store, ledger=ledger, cluster=_CannotStart()
        )
        with pytest.raises(BatchError, match="no Dask scheduler"):
            list(batch)
        assert [ledger.result(op)["kuro/status"] for op in ("a", "b")] == ["not-found", "not-found"]
        assert sorted(batch.not_run) == [0, 1]


def test_a_worker_count_out_of_range_is_refused_by_run_many_before_any_op_id_is_claimed(
    shared: Shared, tmp_path: Path
) -> None:
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        for workers in (0, MAX_WORKERS + 1):
            with pytest.raises(BatchError, match=f"workers must be an integer from 1 to {MAX_WORKERS}"):
                run_many([_echo(shared, "a")], store=shared.store, ledger=ledger, workers=workers)
        assert ledger.result("a")["kuro/status"] == "not-found"


def test_a_caller_that_stops_iterating_before_an_invocation_is_sent_leaves_its_op_id_free(
    shared: Shared, tmp_path: Path
) -> None:
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        denied = {"guest": shared.batch, "export": "echo", "grant": ["fs/read"], "op_id": "denied"}  # no guest/invoke
        batch = run_many(
            [denied, _echo(shared, "never-sent")], store=shared.store, ledger=ledger, cluster=_CannotStart()
        )
        first = next(batch)  # the denial comes first: nothing has been sent
        assert first.value["kuro/status"] == "done"
        del batch, first  # dropped without close(): once collected, its generator is closed where it stands
        gc.collect()
        assert ledger.result("never-sent")["kuro/status"] == "not-found"


class _Hangs(_Untouchable):
    """A backend whose chunk never ends, even once cancelled (a worker that no longer answers).

    Its first wait is where the first signal lands (the CLI's handler calls ``batch.cancel()``);
    the wait after it is where the second one lands (the handler raises ``KeyboardInterrupt``).
    """

    def __init__(self) -> None:
        self.cancel_batch: Any = None
        self.sent: list[str] = []
        self.waits = 0

    def open(self, batch_id: str) -> None:
        pass

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        self.sent.append(token)

    def wait(self, timeout: float) -> list[Any]:
        self.waits += 1
        if self.waits == 1:
            self.cancel_batch()  # the first signal
        elif self.waits == 2:
            raise KeyboardInterrupt  # the second signal
        else:
            raise AssertionError("the batch still waits after the second signal")
        return []


def test_after_a_cancel_the_next_interrupt_stops_waiting_and_what_is_out_is_unknown(
    shared: Shared, tmp_path: Path
) -> None:
    backend = _Hangs()
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many([_echo(shared, "out")], store=shared.store, ledger=ledger, cluster=backend)
        backend.cancel_batch = batch.cancel
        with pytest.raises(KeyboardInterrupt):
            list(batch)
        assert len(backend.sent) == 1 and ledger.result("out")["kuro/status"] == "unknown"


class _AsksCancel(_Hangs):
    """:class:`_Hangs`, whose first wait first asks the ledger to cancel the op id it holds (as a signal handler or
    a callback on the driver's thread would)."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger
        self.asked: dict[str, Any] = {}

    def wait(self, timeout: float) -> list[Any]:
        if self.waits == 0:
            self.asked = self.ledger.result("out", cancel=True)
        return super().wait(timeout)


def test_a_cancel_of_an_op_id_a_batch_has_out_answers_not_cancellable_at_once_instead_of_blocking(
    shared: Shared, tmp_path: Path
) -> None:
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        backend = _AsksCancel(ledger)
        batch = run_many([_echo(shared, "out")], store=shared.store, ledger=ledger, cluster=backend)
        backend.cancel_batch = batch.cancel
        with pytest.raises(KeyboardInterrupt):
            list(batch)
        assert (backend.asked["kuro/status"], backend.asked["kuro/cancel"]) == ("running", "not-cancellable")
        assert "cancel the batch" in backend.asked["kuro/hint"]


_KILLED_DRIVER = """
import os, signal, sys
from batch_witness import Inline
from kuro_fs.filestore import FileBlockStore
from kuro_fs.cid import cid_for
from kuro_fs.errors import BlockStoreError
from kuro_fs.filestore import FileBlockStore
from kuro_wasm.batch import run_many
from kuro_wasm.batch.stores import SharedStore
from kuro_wasm.batch.stores import SharedStore
from kuro_wasm.ledger.ledger import Ledger

store = FileBlockStore(sys.argv[1])
lines = [{"guest": sys.argv[3], "export": "echo", "args": [n], "op_id": f"op-{n}"} for n in range(10)]
with Ledger(sys.argv[2], store=store) as ledger:
    for done in run_many(lines, store=store, ledger=ledger, cluster=Inline(SharedStore(sys.argv[1])), chunk_size=1):
        os.kill(os.getpid(), signal.SIGKILL)  # the driver dies as its first receipt is recorded
"""


def test_a_driver_killed_mid_batch_leaves_only_what_it_had_sent_unknown_and_a_rerun_runs_the_rest(
    shared: Shared, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.sqlite"
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_DRIVER, str(shared.store.root), str(path), shared.batch],
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert killed.returncode == -signal.SIGKILL
    lines = [_echo(shared, f"op-{n}") | {"args": [n]} for n in range(10)]
    with Ledger(path, store=shared.store) as ledger:
        status = [ledger.result(f"op-{n}")["kuro/status"] for n in range(10)]
        # op-0 finished; op-1 was out (sent, not yet answered): it may have run; the rest never left the driver
        assert status == ["done", "unknown"] + ["not-found"] * 8
        again = {done.index: done.value for done in run_many(lines, store=shared.store, ledger=ledger, workers=1)}
    assert again[0]["kuro/replayed"] is True and again[1]["kuro/status"] == "unknown"
    assert all(again[n]["kuro/replayed"] is False and again[n]["kuro/exit-code"] == 0 for n in range(2, 10))


class _Full:
    """The driver's store on a full disk: a block it holds is there, a new one is refused."""

    def __init__(self, inner: FileBlockStore) -> None:
        self._inner = inner

    def put(self, data: bytes, codec: str = "raw") -> str:
        known = cid_for(data, codec)
        if self._inner.has(known):
            return known
        raise BlockStoreError("No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_run_whose_writes_the_driver_cannot_store_is_a_host_error_and_the_batch_goes_on(
    shared: Shared, tmp_path: Path
) -> None:
    note = {"guest": shared.batch, "export": "note", "args": [7], "grant": ["guest/invoke", "fs/write"]}
    lines = [{**note, "op_id": "writes"}, _echo(shared, "echoes")]
    full: Any = _Full(shared.store)
    where = SharedStore(str(shared.store.root))
    with Ledger(tmp_path / "ledger.sqlite", store=full) as ledger:
        got = {
            done.index: done.value
            for done in run_many(lines, store=full, ledger=ledger, cluster=Inline(where), worker_store=where)
        }
        assert (got[0]["kuro/outcome"], got[0]["kuro/exit-code"]) == ("host-error", 70)
        assert "No space left on device" in got[0]["kuro/error"] and "kuro/fs-root-after" not in got[0]
        assert got[1]["kuro/outcome"] == "ok"
        assert ledger.result("writes")["kuro/outcome"] == "host-error"  # it ran: the op id is used, never rerun


def test_one_op_id_twice_in_a_batch_is_refused_by_run_many_naming_both_before_anything_is_claimed(
    shared: Shared, tmp_path: Path
) -> None:
    lines = [_echo(shared, "once"), _echo(shared, "other"), _echo(shared, "once") | {"args": [2]}]
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        with pytest.raises(ModelError, match="invocation 2: op_id 'once' is already invocation 0's") as refused:
            run_many(lines, store=shared.store, ledger=ledger, cluster=_Untouchable())
        assert refused.value.reason == "duplicate-op-id"
        assert ledger.result("once")["kuro/status"] == "not-found"


def test_the_denials_of_a_batch_are_claimed_and_settled_together_not_one_transaction_each(
    shared: Shared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int]] = []
    for name in ("claim_many", "settle_many"):
        real = getattr(Ledger, name)

        def counted(self: Ledger, requests: Any, _real: Any = real, _name: str = name, **options: Any) -> Any:
            calls.append((_name, len(requests)))
            return _real(self, requests, **options)

        monkeypatch.setattr(Ledger, name, counted)
    denied = [{"guest": shared.batch, "export": "echo", "grant": ["fs/read"], "op_id": f"d-{n}"} for n in range(50)]
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        got = list(run_many(denied, store=shared.store, ledger=ledger, cluster=_Untouchable()))
        assert [done.value["kuro/reason"] for done in got] == ["missing-capabilities"] * 50
        assert ledger.result("d-49")["kuro/reason"] == "missing-capabilities"
    assert calls == [("claim_many", 50), ("settle_many", 50)]


class _SaysItTwice(Inline):
    """A damaged worker: its answer for a chunk gives the first invocation's receipt twice."""

    def wait(self, timeout: float) -> list[Any]:
        ended = super().wait(timeout)
        for done in ended:
            done.detail["ran"].append(dict(done.detail["ran"][0]))
        return ended


def test_a_worker_answer_that_names_an_invocation_twice_gives_it_one_receipt(shared: Shared, tmp_path: Path) -> None:
    where = SharedStore(str(shared.store.root))
    lines = [_echo(shared, "a"), _echo(shared, "b") | {"args": [2]}]
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        got = [(done.index, done.value["kuro/outcome"]) for done in run_many(
            lines, store=shared.store, ledger=ledger, cluster=_SaysItTwice(where), worker_store=where, chunk_size=2
        )]  # fmt: skip
        assert sorted(got) == [(0, "ok"), (1, "ok")]
        assert ledger.result("a")["kuro/outcome"] == ledger.result("b")["kuro/outcome"] == "ok"


class _RunsThenFails(Inline):
    """A backend whose worker runs the chunk, then reports ``failed`` without proving the chunk was never taken."""

    def wait(self, timeout: float) -> list[Any]:
        ended = super().wait(timeout)
        return [Done(done.token, "failed", {"error": "the scheduler lost this batch"}) for done in ended]


def test_a_failed_chunk_that_may_have_run_is_unknown_and_never_run_again(shared: Shared, tmp_path: Path) -> None:
    where = SharedStore(str(shared.store.root))
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many([_echo(shared, "once")], store=shared.store, ledger=ledger, cluster=_RunsThenFails(where))
        with pytest.raises(BatchError, match="the scheduler lost this batch"):
            list(batch)
        assert batch.not_run == [] and ledger.result("once")["kuro/status"] == "unknown"
        again = [done.value["kuro/status"] for done in run_many(
            [_echo(shared, "once")], store=shared.store, ledger=ledger, cluster=_Untouchable()
        )]  # fmt: skip
        assert again == ["unknown"]


class _InterruptedWhileSettling(Ledger):
    """A ledger where the first settling of receipts meets a Ctrl-C (as it lands during the commit)."""

    interrupted = 0

    def settle_many(self, results: Any) -> list[dict[str, Any]]:
        if not self.interrupted:
            self.interrupted += 1
            raise KeyboardInterrupt
        return super().settle_many(results)


def test_a_ctrl_c_while_receipts_are_settled_stores_them_first_then_cancels(shared: Shared, tmp_path: Path) -> None:
    where = SharedStore(str(shared.store.root))
    ops = ["a", "b", "c"]
    with _InterruptedWhileSettling(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many(
            [_echo(shared, op) for op in ops], store=shared.store, ledger=ledger, cluster=Inline(where), chunk_size=1
        )
        got = []
        with pytest.raises(KeyboardInterrupt):
            got.extend((done.index, done.value["kuro/status"]) for done in batch)
        assert got[0] == (0, "done") and batch.not_run == [2]  # b was already out: it ran and was stored too
        assert [ledger.result(op)["kuro/status"] for op in ops] == ["done", "done", "not-found"]


class _InterruptedWhileClaiming(Ledger):
    """A ledger where the second chunk's claim meets a Ctrl-C: before it is made, or just after it committed."""

    def __init__(self, *args: Any, after: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after = after
        self.calls = 0

    def claim_many(self, requests: Any, **options: Any) -> list[Any]:
        self.calls += 1
        got = super().claim_many(requests, **options) if self.after else None
        if self.calls == 2:
            raise KeyboardInterrupt  # after: between claim_many's return and the caller's assignment
        return got if got is not None else super().claim_many(requests, **options)


@pytest.mark.parametrize("after", [False, True], ids=["before-the-claim", "after-the-claim"])
def test_a_ctrl_c_while_a_chunk_is_being_sent_lists_it_not_run_and_leaves_its_op_ids_free(
    shared: Shared, tmp_path: Path, after: bool
) -> None:
    where = SharedStore(str(shared.store.root))
    ops = ["a", "b", "c", "d"]
    with _InterruptedWhileClaiming(tmp_path / "ledger.sqlite", store=shared.store, after=after) as ledger:
        batch = run_many(
            [_echo(shared, op) for op in ops], store=shared.store, ledger=ledger, cluster=Inline(where), chunk_size=1
        )
        got = []
        with pytest.raises(KeyboardInterrupt):
            got.extend(done.index for done in batch)
        assert got == [0] and sorted(batch.not_run) == [1, 2, 3]
        assert [ledger.result(op)["kuro/status"] for op in ops] == ["done", "not-found", "not-found", "not-found"]


class _RefusesTheSecondClaim(Ledger):
    """A ledger that cannot record the second chunk's claims (SQLite locked: nothing of it claimed)."""

    calls = 0

    def claim_many(self, requests: Any, **options: Any) -> list[Any]:
        self.calls += 1
        if self.calls == 2:
            raise LedgerError("could not record the start (database is locked); nothing ran")
        return super().claim_many(requests, **options)


class _FirstComesBackUnstarted(Inline):
    """The first chunk comes back untaken (its token revoked); every chunk sent is counted."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.sent: list[str] = []

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        self.sent.append(token)
        super().submit(token, chunk)

    def wait(self, timeout: float) -> list[Any]:
        if len(self.sent) == 1 and self._queue:
            token, _ = self._queue.pop(0)
            return [Done(token, "unstarted")]
        return super().wait(timeout)


def test_after_the_ledger_refuses_a_claim_an_unstarted_chunk_is_not_sent_again(shared: Shared, tmp_path: Path) -> None:
    where = SharedStore(str(shared.store.root))
    backend = _FirstComesBackUnstarted(where)
    with _RefusesTheSecondClaim(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many(
            [_echo(shared, op) for op in "abc"], store=shared.store, ledger=ledger, cluster=backend, chunk_size=1
        )
        with pytest.raises(LedgerError, match="database is locked"):
            list(batch)
        assert len(backend.sent) == 1 and sorted(batch.not_run) == [0, 1, 2]
        assert [ledger.result(op)["kuro/status"] for op in "abc"] == ["not-found"] * 3


class _BothAtOnce(Inline):
    """Both chunks out end together: one wait hands out both ends."""

    def wait(self, timeout: float) -> list[Any]:
        ended = []
        while self._queue:
            ended.extend(super().wait(timeout))
        return ended


def test_stopping_a_batch_keeps_the_receipts_of_chunks_that_had_already_ended(shared: Shared, tmp_path: Path) -> None:
    where = SharedStore(str(shared.store.root))
    with Ledger(tmp_path / "ledger.sqlite", store=shared.store) as ledger:
        batch = run_many(
            [_echo(shared, op) for op in "abc"],
            store=shared.store,
            ledger=ledger,
            cluster=_BothAtOnce(where),
            chunk_size=1,
        )
        first = next(batch)
        batch.stop()  # as a second Ctrl-C does: stop waiting
        assert first.index == 0 and batch.not_run == [2]
        assert [ledger.result(op)["kuro/status"] for op in "abc"] == ["done", "done", "not-found"]
