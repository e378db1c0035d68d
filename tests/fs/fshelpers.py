"""Helpers the kuro.fs suites share: an accepted op, a store that counts what it is asked, one without batch()."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kuro_fs.blocks import MemoryBlockStore, StatsResult
from kuro_fs.filestore import FileBlockStore
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


def main_thread_in(function: str) -> bool:
    """True if the main thread is running ``function`` (anywhere on its stack) right now."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def ctrl_c_at_second_pool_thread(monkeypatch: pytest.MonkeyPatch, ready: Callable[[], object]) -> list[str]:
    """Raise KeyboardInterrupt in the main thread just after it starts a second ThreadPoolExecutor thread
    (once ``ready()`` says that thread took its work), as a Ctrl-C landing in that start; returns the names
    of the pool threads started."""
    real_start = threading.Thread.start
    starts: list[str] = []

    def start(thread: threading.Thread) -> None:
        real_start(thread)
        if thread.name.startswith("ThreadPoolExecutor") and threading.current_thread() is threading.main_thread():
            starts.append(thread.name)
            if len(starts) == 2:
                assert ready()
                raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)
    return starts


class LateSecondPut(FileBlockStore):
    """The put of ``first`` (the first thread's first) waits until another thread is in the put of
    ``second`` (so the pool must start a second thread), which waits for ``settle()`` before it stores:
    ``in_second`` is set once that put began, ``ended`` once it returned."""

    def __init__(self, root: Path, first: bytes, second: bytes, settle: Callable[[], None]) -> None:
        super().__init__(root)
        self.first, self.second, self.settle = first, second, settle
        self.in_second = threading.Event()
        self.ended = threading.Event()

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        if bytes(data) == self.first:
            assert self.in_second.wait(10)
        if bytes(data) != self.second:
            return super().put(data, codec, cid=cid)
        self.in_second.set()
        self.settle()
        try:
            return super().put(data, codec, cid=cid)
        finally:
            self.ended.set()
