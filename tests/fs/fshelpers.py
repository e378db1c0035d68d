"""Helpers the kuro.fs suites share: asserting an accepted op, and a store that counts what it is asked."""

from __future__ import annotations

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import FsResult


def ok(result: FsResult) -> FsResult:
    """``result``, after checking it was accepted (the receipt is the failure message)."""
    assert result.ok, result.receipt
    return result


class CountingStore(MemoryBlockStore):
    """A memory store that counts fetches by CID and puts."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: dict[str, int] = {}
        self.puts = 0

    def get(self, cid: str) -> bytes | None:
        self.fetched[cid] = self.fetched.get(cid, 0) + 1
        return super().get(cid)

    def put(self, data: bytes, codec: str = "raw") -> str:
        self.puts += 1
        return super().put(data, codec)
