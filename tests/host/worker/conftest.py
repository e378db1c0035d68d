"""Shared fixtures for the worker-process backend: one small pool with test hooks for the whole session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kuro_wasm.host.worker.hardening import Hardening
from kuro_wasm.host.worker.pool import WorkerPool


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the ``pool`` fixture's workers may read block stores under directly."""
    return tmp_path_factory.mktemp("stores").resolve()


@pytest.fixture(scope="session")
def pool(store_dir: Path) -> Iterator[WorkerPool]:
    """One active worker, one spare, test hooks on (tests kill workers: the pool replaces them)."""
    with WorkerPool(1, spare=1, test_hooks=True, hardening=Hardening(stores=(str(store_dir),))) as started:
        assert started.wait_ready(60)
        yield started


@pytest.fixture(scope="session")
def pool2() -> Iterator[WorkerPool]:
    """Two active workers, no spare."""
    with WorkerPool(2, spare=0, test_hooks=True) as started:
        assert started.wait_ready(60)
        yield started
