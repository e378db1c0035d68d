"""Fixtures for the ledger suite: a ledger on a real SQLite file, a memory block store, a fake starter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_fakes import FakeStarter

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.ledger.ledger import Ledger


@pytest.fixture
def store() -> MemoryBlockStore:
    return MemoryBlockStore()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "home" / "ledger.sqlite"


@pytest.fixture
def starter() -> FakeStarter:
    return FakeStarter()


@pytest.fixture
def ledger(db: Path, store: MemoryBlockStore, starter: FakeStarter) -> Iterator[Ledger]:
    with Ledger(db, store=store, starter=starter, timeout=0.2) as led:
        yield led
