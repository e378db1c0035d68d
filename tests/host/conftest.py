"""Shared fixtures for the host suite: a block store, guests compiled from guests/*.wat, a private home."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.loader import add_guest


@pytest.fixture
def store() -> MemoryBlockStore:
    return MemoryBlockStore()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A private embedded home, so no test writes the user's ~/.kuro."""
    return tmp_path / "home"


@pytest.fixture(autouse=True)
def _private_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("KURO_HOME", str(tmp_path / "env-home"))
    yield


@pytest.fixture
def guest_cid(store: MemoryBlockStore) -> Callable[[str], str]:
    """Add guests/<name>.wat to the test's store; return its CID."""

    def add(name: str) -> str:
        return add_guest(store, wat(name))

    return add
