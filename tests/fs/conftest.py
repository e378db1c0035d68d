"""Fixtures shared by the kuro_fs suites: the two block stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.filestore import FileBlockStore


@pytest.fixture
def memory_store() -> MemoryBlockStore:
    return MemoryBlockStore()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[FileBlockStore]:
    with FileBlockStore(tmp_path / "blocks") as store:
        yield store
