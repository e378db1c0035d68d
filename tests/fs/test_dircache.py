"""The decoded-directory cache: bounded, decode-once, and never a decoding of bytes that failed their hash."""

from __future__ import annotations

import threading

import pytest
from fshelpers import CountingStore, ok

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for
from kuro_fs.dircache import DirCache, load_verified
from kuro_fs.errors import CorruptBlock, MissingBlock
from kuro_fs.fs import Fs
from kuro_fs.fsdir import Entry, encode_dir, write_dir


class LyingStore(MemoryBlockStore):
    """A store that answers chosen CIDs with other bytes (as a tampered disk or a hostile peer would)."""

    def __init__(self, real: MemoryBlockStore, lies: dict[str, bytes]) -> None:
        super().__init__()
        self.real = real
        self.lies = lies

    def has(self, cid: str) -> bool:
        return cid in self.lies or self.real.has(cid)

    def get(self, cid: str) -> bytes | None:
        return self.lies[cid] if cid in self.lies else self.real.get(cid)


def test_the_bound_is_on_block_bytes_and_the_least_recently_used_goes_first() -> None:
    cache = DirCache(max_bytes=100)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    assert cache.get("a") == "A"  # now b is the least recently used
    cache.put("c", "C", 40)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("A", None, "C")
    cache.put("huge", "H", 101)
    assert cache.get("huge") is None
    assert cache.stats() == {"entries": 2, "bytes": 80, "hits": 3, "misses": 2}
    cache.clear()
    assert cache.stats() == {"entries": 0, "bytes": 0, "hits": 0, "misses": 0}
    with pytest.raises(ValueError):
        DirCache(max_bytes=-1)


def test_a_directory_block_is_fetched_and_decoded_once_however_often_it_is_read() -> None:
    store = CountingStore()
    fs = ok(Fs.empty(store).write("a/b/c.txt", b"hi")).fs
    cold = Fs(store, fs.root, cache=DirCache())
    store.fetched.clear()
    for _ in range(20):
        assert ok(cold.read("a/b/c.txt")).value == b"hi"
        assert ok(cold.ls("a/b")).value[0]["name"] == "c.txt"
    dirs = {cid: n for cid, n in store.fetched.items() if cid.startswith("bafyrei")}
    assert len(dirs) == 3 and set(dirs.values()) == {1}  # the root, a and a/b: once each
    assert cold.cache is not None and cold.cache.stats()["hits"] >= 20 * 5


def test_bytes_that_do_not_hash_to_their_cid_are_refused_and_never_cached() -> None:
    honest = MemoryBlockStore()
    good = encode_dir({"x": Entry(honest.put(b"x"), 1)})
    cid = honest.put(good, "dag-cbor")
    forged = encode_dir({"x": Entry(honest.put(b"evil"), 4)})
    liar = LyingStore(honest, {cid: forged})
    cache = DirCache()
    with pytest.raises(CorruptBlock):
        load_verified(liar, cid, cache, lambda b: b, bytes)
    assert cache.stats()["entries"] == 0
    assert load_verified(honest, cid, cache, lambda b: b, bytes) == good
    with pytest.raises(MissingBlock):
        load_verified(honest, cid_for(b"absent", "dag-cbor"), cache, lambda b: b, bytes)


def test_a_lying_store_cannot_poison_another_stores_reads_through_the_shared_cache() -> None:
    honest = MemoryBlockStore()
    fs = ok(Fs.empty(honest).write("d/x", b"truth")).fs
    d = ok(fs.stat("d")).value["cid"]
    liar = LyingStore(honest, {d: encode_dir({"x": Entry(honest.put(b"lies"), 4)})})
    shared = DirCache()
    lied_to = Fs(liar, fs.root, cache=shared)
    receipt = lied_to.read("d/x").receipt
    assert receipt["kuro.fs/reason"] == "block-missing" and receipt["kuro.fs/cid"] == d
    assert ok(Fs(honest, fs.root, cache=shared).read("d/x")).value == b"truth"
    # and once the honest decoding is cached, the liar is served the truth, never its own bytes
    assert ok(lied_to.read("d/x")).value == b"truth"


def test_a_cached_directory_is_still_denied_when_its_store_has_lost_the_block() -> None:
    store = MemoryBlockStore()
    fs = ok(Fs.empty(store).write("d/x", b"x")).fs
    assert ok(fs.ls("d")).ok  # decoded and cached
    d = ok(fs.stat("d")).value["cid"]
    store.delete(d)
    assert fs.ls("d").receipt["kuro.fs/reason"] == "block-missing"
    assert fs.ls("d").receipt["kuro.fs/cid"] == d


def test_many_threads_reading_through_a_tiny_cache_get_the_right_answers() -> None:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    for i in range(30):
        fs = ok(fs.write(f"d{i % 5}/f{i}", b"%d" % i)).fs
    fs = Fs(store, fs.root, cache=DirCache(max_bytes=300))  # holds one or two blocks: constant eviction
    failures: list[object] = []

    def reader(offset: int) -> None:
        for k in range(200):
            i = (k + offset) % 30
            result = fs.read(f"d{i % 5}/f{i}")
            if result.value != b"%d" % i:
                failures.append(result.receipt)

    threads = [threading.Thread(target=reader, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_demoted_entries_are_evicted_before_everything_else_and_kept_until_then() -> None:
    cache = DirCache(max_bytes=100)
    for name in "abc":
        cache.put(name, name.upper(), 30)
    cache.demote(["c", "never-held"])  # c was the most recently used; now it goes first
    cache.put("d", "D", 30)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), cache.get("d")) == ("A", "B", None, "D")


def test_a_demoted_entry_is_kept_until_evicted_and_a_second_supersession_leaves_it_in_place() -> None:
    cache = DirCache(max_bytes=100)
    for name in "abc":
        cache.put(name, name.upper(), 30)
    cache.demote(["c"])
    assert cache.get("c") == "C"  # demoted, not dropped (and a hit makes it recent again)
    cache.demote(["c"])  # superseded again: a base that writes keep branching from, so it stays recent
    cache.put("d", "D", 30)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), cache.get("d")) == (None, "B", "C", "D")


def test_writes_branching_from_one_state_keep_that_state_cached() -> None:
    # Writes from the same Fs (undo is remembering a root) supersede the same base nodes every time;
    # demoted each time, the base was evicted by the writes' new nodes and decoded again by every write.
    store = MemoryBlockStore()
    files = {f"file-{i:05d}": Entry(store.put(b"%d" % i), 1) for i in range(20_000)}
    root = ok(Fs.empty(store).link("big", write_dir(store, files))).fs.root
    cache = DirCache(max_bytes=6 << 20)  # the live nodes (~1.4 MB) and what ~250 writes add beside them
    base = Fs(store, root, cache=cache)
    for i in range(1500):  # the cache fills with the writes' new nodes: its steady state
        ok(base.write(f"big/warm-{i}", b"x"))
    before = cache.stats()["misses"]
    for i in range(300):
        ok(base.write(f"big/new-{i}", b"x"))
    assert (cache.stats()["misses"] - before) / 300 < 0.5  # before: every write decoded 2 base nodes again


def test_a_chain_of_writes_keeps_the_live_nodes_of_a_large_directory_cached() -> None:
    # Each write into a sharded directory supersedes the nodes on its path; left most recently used,
    # those dead versions used to push the live nodes of the rest of the directory out of the cache,
    # and every later write decoded them again (writes into 100k-200k entries settled at 2-3 ms CPU).
    # A directory of ~1.4 MB of nodes and a 2 MiB cache: its live nodes fit, its dead versions do not.
    store = MemoryBlockStore()
    files = {f"file-{i:05d}": Entry(store.put(b"%d" % i), 1) for i in range(20_000)}
    root = ok(Fs.empty(store).link("big", write_dir(store, files))).fs.root
    cache = DirCache(max_bytes=2 << 20)
    fs = Fs(store, root, cache=cache)
    for i in range(600):  # every interior node touched at least once: the cache reaches its steady state
        fs = ok(fs.write(f"big/warm-{i}", b"x")).fs
    before = cache.stats()["misses"]
    for i in range(300):
        fs = ok(fs.write(f"big/new-{i}", b"x")).fs
    assert (cache.stats()["misses"] - before) / 300 < 0.15  # before the fix: 0.65 blocks decoded again per write
