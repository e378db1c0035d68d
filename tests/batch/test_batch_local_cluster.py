"""The LocalCluster a batch without an address starts: kuro's settings in its own processes, never in the caller's."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kuro_wasm.batch.cluster import LOCAL_CONFIG, local_cluster

pytestmark = pytest.mark.timeout(120)

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

KEYS = tuple(LOCAL_CONFIG)


def _global() -> dict[str, Any]:
    return {key: dask.config.get(key) for key in KEYS}


def test_kuros_cluster_runs_with_kuros_settings_and_leaves_the_processes_config_as_it_was() -> None:
    before = _global()
    assert before != LOCAL_CONFIG, "Dask's defaults differ from kuro's, or this test proves nothing"
    cluster = local_cluster(1)
    try:
        assert _global() == before
        assert cluster.scheduler.allowed_failures == 0
        with distributed.Client(cluster, set_as_default=False) as client:
            seen = client.run(lambda: {key: dask.config.get(key) for key in KEYS})
        assert len(seen) == 1
        for got in seen.values():
            assert got["distributed.worker.profile.enabled"] is False
            assert got["distributed.admin.tick.interval"] == "1s"
    finally:
        cluster.close()
    assert _global() == before


class _Overlapping:
    """A stand-in LocalCluster for two starts in two threads: the first waits (at most 1 s) for the second to
    begin, the second for the first to end, so that without serialization they overlap, the first leaving first."""

    def __init__(self) -> None:
        self.begun: list[threading.Event] = [threading.Event(), threading.Event()]
        self.ended: list[threading.Event] = [threading.Event(), threading.Event()]
        self.calls = 0
        self.seen: list[dict[str, Any]] = []
        self.kwargs: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> str:
        with self.lock:
            me = self.calls
            self.calls += 1
        self.begun[me].set()
        self.seen.append(_global())
        self.kwargs.append(kwargs)
        if me == 0:
            self.begun[1].wait(1.0)
        else:
            self.ended[0].wait(5.0)
        self.ended[me].set()
        return f"cluster {me}"


def test_two_overlapping_starts_in_threads_leave_the_processes_config_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _global()
    fake = _Overlapping()
    monkeypatch.setattr(distributed, "LocalCluster", fake)
    got: list[Any] = []
    first = threading.Thread(target=lambda: got.append(local_cluster(1)))
    first.start()
    assert fake.begun[0].wait(5.0)
    second = threading.Thread(target=lambda: got.append(local_cluster(1)))
    second.start()
    first.join(10.0)
    second.join(10.0)
    assert sorted(got) == ["cluster 0", "cluster 1"]
    assert _global() == before
    # what has a keyword is passed to the cluster, never set for every thread of the process
    for seen, kwargs in zip(fake.seen, fake.kwargs, strict=True):
        assert seen["distributed.scheduler.allowed-failures"] == before["distributed.scheduler.allowed-failures"]
        assert seen["distributed.worker.profile.enabled"] == before["distributed.worker.profile.enabled"]
        assert kwargs["scheduler_kwargs"] == {"allowed_failures": 0}
        assert kwargs["config"]["distributed.worker.profile.enabled"] is False
