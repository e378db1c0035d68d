"""The fence on the scheduler: a chunk's token is taken once, by a claim or a revoke, and never again."""

from __future__ import annotations

import pytest

cluster = pytest.importorskip("kuro_wasm.batch.cluster", reason="the Dask extra is not installed")


def test_a_token_is_claimed_once_and_a_second_attempt_learns_who_took_it() -> None:
    fence = cluster.fence
    fence("b1", "open")
    assert fence("b1", "claim", "t1", {"pid": 1}) == {"ok": True}
    assert fence("b1", "claim", "t1", {"pid": 2}) == {"ok": False, "state": "claimed", "by": {"pid": 1}}
    assert fence("b1", "revoke", "t1") == {"ok": False, "state": "claimed", "by": {"pid": 1}}
    fence("b1", "close")


def test_a_revoked_token_is_never_claimed_so_its_chunk_can_be_sent_again_safely() -> None:
    fence = cluster.fence
    fence("b2", "open")
    assert fence("b2", "revoke", "t1") == {"ok": True}
    assert fence("b2", "claim", "t1", {"pid": 1})["state"] == "revoked"
    fence("b2", "close")


def test_after_a_cancel_no_new_chunk_starts_and_a_closed_batch_takes_nothing() -> None:
    fence = cluster.fence
    fence("b3", "open")
    assert fence("b3", "claim", "t1", {"pid": 1})["ok"]
    fence("b3", "cancel")
    assert fence("b3", "status") == {"ok": True, "cancelled": True}
    assert fence("b3", "claim", "t2", {"pid": 1})["state"] == "cancelled"
    assert fence("b3", "revoke", "t2")["state"] == "cancelled"
    fence("b3", "close")
    assert fence("b3", "claim", "t3", {"pid": 1}) == {"ok": False, "state": "closed"}


def test_a_retried_chunk_refused_at_the_fence_is_lost_not_run_again() -> None:
    backend = cluster.DaskBackend(None, store=None)  # type: ignore[arg-type]
    done = backend._judge("t", "finished", {"fenced": {"ok": False, "state": "claimed", "by": {"pid": 7}}})
    assert (done.kind, done.detail) == ("lost", {"worker": {"pid": 7}})
    assert backend._judge("t", "finished", {"fenced": {"ok": False, "state": "cancelled"}}).kind == "unstarted"
    assert backend._judge("t", "finished", {"unavailable": "no store"}).kind == "failed"


class _Worker:
    """A worker whose store cannot be opened (its plugin's state has an error)."""

    address = "tcp://w2"

    def __init__(self) -> None:
        from kuro_wasm.batch.worker import WorkerState

        state = WorkerState.__new__(WorkerState)
        state.error = "cannot open the store /mnt/shared"
        self.plugins = {"p": type("Holder", (), {"state": state})()}


def test_a_retry_of_a_claimed_chunk_on_a_worker_that_cannot_open_its_store_is_lost_not_unrun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "get_worker", _Worker)
    monkeypatch.setattr(cluster, "_ask", lambda worker, **message: cluster.fence(**message))
    cluster.fence("b4", "open")
    assert cluster.fence("b4", "claim", "t0", {"address": "w1"})["ok"]  # attempt 1 took it, then its worker died
    backend = cluster.DaskBackend(None, store=None)  # type: ignore[arg-type]
    done = backend._judge("t0", "finished", cluster.run_chunk("b4", "t0", "p", b""))
    assert (done.kind, done.detail) == ("lost", {"worker": {"address": "w1"}})
    # a chunk nobody took is refused at the fence for good before it is answered unavailable: provably never run
    answer = cluster.run_chunk("b4", "t1", "p", b"")
    assert backend._judge("t1", "finished", answer).kind == "failed" and answer.get("taken") is False
    assert cluster.fence("b4", "claim", "t1", {"address": "w1"})["state"] == "revoked"
    cluster.fence("b4", "close")


def test_a_chunk_whose_fence_the_scheduler_lost_is_lost_not_failed_because_a_worker_may_have_run_it() -> None:
    backend = cluster.DaskBackend(None, store=None)  # type: ignore[arg-type]
    backend._batch = "b5"
    backend._call = lambda action, **message: cluster.fence("b5", action, **message)  # type: ignore[method-assign]
    cluster.fence("b5", "open")
    assert cluster.fence("b5", "claim", "t0", {"address": "w1"})["ok"]
    cluster.fence("b5", "close")  # the scheduler restarted: the fence forgot the batch
    done = backend._judge("t0", "error", ("x", RuntimeError("scheduler connection lost"), None))
    assert done.kind == "lost"
    assert backend._judge("t1", "finished", {"fenced": {"ok": False, "state": "closed"}}).kind == "lost"
