"""Helpers the kuro.fs suites share: an accepted op, a store that counts what it is asked, one without batch()."""

from __future__ import annotations

from kuro_fs.blocks import MemoryBlockStore, StatsResult
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


class PlainStore:
    """A store without ``batch()`` (as a wrapper or a remote store may be): puts go straight through.

    ``import_car`` spools for such a store to stay all-or-nothing; ``puts`` counts the puts, and
    ``put(data, cid=…)`` files foreign hashes as the memory store inside does.
    """

    def __init__(self) -> None:
        self.inner = MemoryBlockStore()
        self.puts = 0

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        self.puts += 1
        return self.inner.put(data, codec, cid=cid)

    def get(self, cid: str) -> bytes | None:
        return self.inner.get(cid)

    def stats(self) -> StatsResult:
        return self.inner.stats()
