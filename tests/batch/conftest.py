"""Fixtures for the batch tests: a shared block store holding the test guests, and a real 2-worker LocalCluster."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_witness import Shared

from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.loader import add_guest

GUESTS = Path(__file__).resolve().parents[2] / "guests"


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Shared]:
    store = FileBlockStore(tmp_path / "blocks")
    names = {
        name: add_guest(store, (GUESTS / f"{name}.wat").read_text()) for name in ("batch", "trap", "spin", "fs-cat")
    }
    yield Shared(store, names["batch"], names["trap"], names["spin"], names["fs-cat"], str(Fs.empty(store).root))
    store.close()


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A real Dask LocalCluster: 2 worker processes, one thread each, retries after a worker death off."""
    yield from _cluster(allowed_failures=0)


@pytest.fixture
def retrying_client() -> Iterator[Any]:
    """The same, with Dask's default of re-running a dead worker's tasks elsewhere (as an existing cluster may)."""
    yield from _cluster(allowed_failures=3)


def _cluster(allowed_failures: int) -> Iterator[Any]:
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL
        )
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()
