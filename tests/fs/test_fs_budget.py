"""Diamond DAGs: a few blocks that name millions of paths or terabytes are refused over-budget, not materialised.

Issue 11 item 7: a 20-block directory whose entries share children (``{a: d, b: d}``
nested 18 deep) made ``Fs.walk`` list 786,430 entries; the same shape under a file made
a whole read allocate its claimed size. Exports by CID visit each block once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagkit import diamond_file
from fshelpers import CountingStore, ok

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import export_car, read_car
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.fileread import STREAM_WINDOW, read_range
from kuro_fs.fs import Budget, Fs
from kuro_fs.fsdir import Entry, to_unixfs_dir, write_dir
from kuro_fs.overlay import Errno, Overlay
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data


def diamond_dir(store: MemoryBlockStore, depth: int) -> str:
    """A directory of ``depth + 2`` blocks naming 2^(depth+1) + … paths: each level is {a: below, b: below}."""
    below = write_dir(store, {"f": Entry(store.put(b"leaf"), 4)})
    for _ in range(depth):
        below = write_dir(store, {"a": Entry(below, 0), "b": Entry(below, 0)})
    return below


def paths_below(depth: int) -> int:
    # Entries a walk lists: at each level 2 names, each a directory holding what is below; 1 file at the bottom.
    n = 1
    for _ in range(depth):
        n = 2 * (1 + n)
    return n


def test_the_issues_20_block_diamond_is_refused_before_any_entry_is_listed() -> None:
    store = MemoryBlockStore()
    fs = ok(Fs.empty(store).link("d", diamond_dir(store, 18))).fs
    assert paths_below(18) == 786_430 and len(store.cids()) <= 22
    receipt = fs.walk(".").receipt
    assert receipt["kuro.fs/reason"] == "over-budget"
    assert receipt["kuro.fs/budget"] == {"entries": 500_000}
    assert receipt["kuro.fs/cid"] == fs.root
    assert fs.walk("d").receipt["kuro.fs/reason"] == "over-budget"


def test_a_budget_that_fits_lists_every_path_through_shared_subtrees() -> None:
    store = MemoryBlockStore()
    fs = ok(Fs.empty(store).link("d", diamond_dir(store, 6))).fs
    exact = paths_below(6) + 1  # and "d" itself
    listed = ok(fs.with_budget(entries=exact).walk(".")).value
    assert len(listed) == exact and listed[-1]["path"] == "d/b/b/b/b/b/b/f"
    over = fs.with_budget(entries=exact - 1).walk(".")
    assert over.receipt["kuro.fs/reason"] == "over-budget" and over.receipt["kuro.fs/budget"] == {"entries": exact - 1}


def test_a_file_that_claims_more_than_the_budget_is_refused_without_reading_it() -> None:
    store = MemoryBlockStore()
    cid, claimed = diamond_file(store, 4)  # 5 blocks claiming 1 KiB × 174^4 ≈ 917 GB
    fs = ok(Fs.empty(store).link("big", cid)).fs
    assert ok(fs.stat("big")).value["size"] == claimed == 1024 * 174**4
    receipt = fs.read("big").receipt
    assert receipt["kuro.fs/reason"] == "over-budget"
    assert receipt["kuro.fs/size"] == claimed and receipt["kuro.fs/budget"] == {"bytes": 4 << 30}
    assert fs.read_range("big", 0, 1 << 40).receipt["kuro.fs/reason"] == "over-budget"
    assert ok(fs.read_range("big", claimed - 5, 100)).value == bytes(5)  # a small range is served
    small = ok(Fs.empty(store).link("f", diamond_file(store, 1)[0])).fs
    assert ok(small.read("f")).value == bytes(1024 * 174)
    assert small.with_budget(bytes=1024 * 174 - 1).read("f").receipt["kuro.fs/reason"] == "over-budget"


def test_exports_by_cid_visit_each_shared_block_once(tmp_path: Path) -> None:
    store = CountingStore()
    fs = ok(Fs.empty(store).link("d", diamond_dir(store, 18))).fs
    fs = ok(fs.link("big", diamond_file(store, 4)[0])).fs
    before = store.puts
    root = to_unixfs_dir(fs)
    assert store.puts - before == 20  # one UnixFS directory per distinct kuro.fs directory (19 + the root)
    written = export_car(store, root, tmp_path / "d.car")
    with (tmp_path / "d.car").open("rb") as car:
        roots, blocks = read_car(car)
        cids = [cid for cid, _ in blocks]
    assert roots == [root] and written == len(cids) == len(set(cids)) == 20 + 1 + 5  # dirs, "leaf", the file


def test_a_budget_is_a_pair_of_non_negative_ints() -> None:
    for bad in [{"entries": -1}, {"bytes": 1.5}, {"entries": True}]:
        with pytest.raises(ValueError, match="budget"):
            Budget(**bad)  # type: ignore[arg-type]
    fs = Fs.empty(MemoryBlockStore())
    assert fs.with_budget(entries=3).budget == Budget(3, 4 << 30)
    assert fs.with_budget(bytes=3).with_budget(entries=2).budget == Budget(2, 3)


def test_stream_refuses_a_file_over_budget_before_reading_a_leaf() -> None:
    store = CountingStore()
    cid, claimed = diamond_file(store, 4)
    fs = ok(Fs.empty(store).link("big", cid)).fs
    store.fetched.clear()
    receipt = fs.stream("big").receipt
    assert receipt["kuro.fs/reason"] == "over-budget"
    assert (receipt["kuro.fs/size"], receipt["kuro.fs/budget"]) == (claimed, {"bytes": 4 << 30})
    assert cid not in store.fetched  # decided from the directory entry's size alone


def test_stream_yields_the_file_in_windows_within_the_budget() -> None:
    store = MemoryBlockStore()
    cid, size = diamond_file(store, 2)  # 174² KiB = 29.6 MiB
    fs = ok(Fs.empty(store).link("f", cid)).fs
    result = ok(fs.with_budget(bytes=size).stream("f"))
    assert result.receipt["kuro.fs/size"] == size
    pieces = list(result.value)
    assert len(pieces) == -(-size // STREAM_WINDOW) and b"".join(pieces) == bytes(size)
    assert fs.with_budget(bytes=size - 1).stream("f").receipt["kuro.fs/reason"] == "over-budget"
    assert fs.stream(".").receipt["kuro.fs/reason"] == "not-a-file"


def test_stream_refuses_a_root_that_covers_another_size_than_its_entry() -> None:
    # A directory entry that says 1 KiB over a DAG that yields 174 KiB: refused before a byte is yielded.
    store = MemoryBlockStore()
    cid, _ = diamond_file(store, 1)
    lying = write_dir(store, {"f": Entry(cid, 1024)})
    fs = ok(Fs.empty(store).link("d", lying)).fs
    receipt = fs.stream("d/f").receipt
    assert (receipt["kuro.fs/reason"], receipt["kuro.fs/cid"]) == ("block-missing", cid)


class FetchLimitStore(CountingStore):
    """A counting store that fails the test at its ``limit``-th fetch (a walk per link would need millions)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def get(self, cid: str) -> bytes | None:
        assert sum(self.fetched.values()) < self.limit, f"more than {self.limit} block fetches"
        return super().get(cid)


def test_a_diamond_of_one_byte_leaves_reads_whole_in_a_few_fetches() -> None:
    # 4 blocks naming 174³ one-byte leaves (5.3 MB): each distinct block is fetched once, every repeat copied.
    store = FetchLimitStore(20)
    cid, size = diamond_file(store, 3, leaf=1)
    fs = ok(Fs.empty(store).link("f", cid)).fs
    assert ok(fs.read("f")).value == bytes(size)


def test_a_range_deep_inside_a_900_mb_diamond_reads_in_a_few_fetches() -> None:
    # 174⁴ one-byte leaves (916 MB, inside the 4 GiB budget): 8 MiB across level-3 subtrees, a walk per
    # leaf would be 8 million fetches (hours, as a whole read of it was).
    store = FetchLimitStore(40)
    cid, size = diamond_file(store, 4, leaf=1)
    fs = ok(Fs.empty(store).link("f", cid)).fs
    at = size // 2 - 12345
    assert ok(fs.read_range("f", at, 8 << 20)).value == bytes(8 << 20)
    assert read_range(store, cid, size - 3, 10) == bytes(3)


def test_streaming_a_900_mb_diamond_costs_its_windows_not_its_leaves() -> None:
    # kuro fs cat / a guest read: 916 MB in windows; the one leaf is fetched again only as old windows are
    # forgotten (a bounded number of times per window), never once per link.
    store = FetchLimitStore(2 * (174**4 // STREAM_WINDOW + 1) + 20)
    cid, size = diamond_file(store, 4, leaf=1)
    fs = ok(Fs.empty(store).link("f", cid)).fs
    total = 0
    for piece in ok(fs.stream("f")).value:
        assert not any(piece[:: 1 << 16])
        total += len(piece)
    assert total == size


def test_overlay_reads_of_a_900_mb_diamond_cost_a_few_fetches_each() -> None:
    store = FetchLimitStore(60)
    cid, size = diamond_file(store, 4, leaf=1)
    ov = Overlay(ok(Fs.empty(store).link("f", cid)).fs)
    handle = ov.open("f", ov.root)
    assert not isinstance(handle, Errno)
    out = bytearray(4 << 20)
    for at in (0, size // 3, size - len(out)):
        assert ov.read_into(handle, at, out) == len(out) and not any(out)


def wide_file(store: MemoryBlockStore, links: int) -> tuple[str, int]:
    """A file whose root links ``links`` 2-byte leaves, 256 distinct (more than an overlay's leaf table holds)."""
    leaves = [store.put(i.to_bytes(2, "big")) for i in range(256)]
    data = encode_data(UnixFSData(NodeType.FILE, filesize=2 * links, blocksizes=(2,) * links))
    block = encode_pb(PBNode(tuple(PBLink.to(leaves[i % len(leaves)], "", 2) for i in range(links)), data))
    return store.put(block, "dag-pb"), 2 * links


def test_a_root_of_70k_links_is_decoded_once_for_many_range_and_overlay_reads() -> None:
    store = CountingStore()
    root, size = wide_file(store, 70_000)
    fs = ok(Fs.empty(store).link("f", root)).fs
    assert ok(fs.read_range("f", 4, 4)).value == bytes.fromhex("00020003")
    first = store.fetched[root]
    for at in (0, 1000, size - 4):
        assert len(ok(fs.read_range("f", at, 4)).value) == 4
    ov = Overlay(fs)
    handle = ov.open("f", ov.root)
    assert not isinstance(handle, Errno)
    for at in (0, 1000, size - 4):
        assert ov.read(handle, at, 2) == (at // 2 % 256).to_bytes(2, "big")
    assert store.fetched[root] == first
