"""SparseFile: a stored file under sparse pending writes reads and builds exactly as a plain bytearray would.

Tiny chunks (and width 2–3) make every chunk, leaf-reuse and tree-shape boundary reachable.
"""

from __future__ import annotations

import sys
import tracemalloc
from dataclasses import replace
from types import FrameType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs import basetree
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import decode as decode_pb
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.extents import RUN_COST, SparseFile
from kuro_fs.fileread import read_file, read_range
from kuro_fs.unixfs import BalancedLayout, FileRoot, NodeType, UnixFSData, chunks, decode_data, encode_data, write_file


class CountingStore(MemoryBlockStore):
    """A memory store that counts puts (and the bytes they carried) and gets."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0
        self.put_bytes = 0
        self.gets = 0

    def put(self, data: Any, codec: str = "raw", *, cid: str | None = None) -> str:
        self.puts += 1
        self.put_bytes += len(data)
        return super().put(data, codec, cid=cid)

    def get(self, cid: str) -> bytes | None:
        self.gets += 1
        return super().get(cid)


def sparse_over(store: MemoryBlockStore, base: bytes | None, chunk: int, width: int) -> SparseFile:
    if base is None:
        return SparseFile(store, None, 0, chunk, width)
    root = write_file(store.put, base, chunk_size=chunk, width=width)
    return SparseFile(store, root.cid, root.size, chunk, width)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 70), st.binary(min_size=0, max_size=20)),
        st.tuples(st.just("size"), st.integers(0, 80), st.just(b"")),
        st.tuples(st.just("size"), st.integers(80, 400), st.just(b"")),  # long holes: many whole zero chunks
        st.tuples(st.just("fold"), st.integers(0, 16), st.just(b"")),
    ),
    max_size=25,
)


def apply(model: bytearray, f: SparseFile, op: tuple[str, int, bytes]) -> None:
    kind, n, data = op
    if kind == "write":
        if data:
            if n > len(model):
                model.extend(bytes(n - len(model)))
            model[n : n + len(data)] = data
        f.write(n, data)
    elif kind == "size":
        del model[n:]
        model.extend(bytes(n - len(model)))
        f.set_size(n)
    else:
        f.fold(n)


@settings(max_examples=300, deadline=None)
@given(
    base=st.one_of(st.none(), st.binary(max_size=60)),
    ops=OPS,
    chunk=st.integers(1, 9),
    width=st.integers(2, 3),
    ranges=st.lists(st.tuples(st.integers(0, 90), st.integers(0, 40)), max_size=5),
)
def test_reads_and_the_built_dag_match_a_bytearray_model(
    base: bytes | None, ops: list[tuple[str, int, bytes]], chunk: int, width: int, ranges: list[tuple[int, int]]
) -> None:
    store = MemoryBlockStore()
    f = sparse_over(store, base, chunk, width)
    model = bytearray(base or b"")
    for op in ops:
        apply(model, f, op)
        assert f.size == len(model)
    for offset, length in [*ranges, (0, len(model))]:
        assert f.read(offset, length)[0] == bytes(model[offset : offset + length])
    assert f.pending_bytes == sum(n for _, n in f.runs())
    root = f.build()
    expected = write_file(MemoryBlockStore().put, bytes(model), chunk_size=chunk, width=width)
    assert root == expected
    assert read_file(store, root.cid) == bytes(model)
    if base is None or bytes(model) != base:
        assert f.dirty
    f.rebase(root)
    assert not f.dirty and f.read(0, len(model) + 1)[0] == bytes(model)


def test_runs_merge_when_they_touch_or_overlap() -> None:
    f = SparseFile(MemoryBlockStore(), None, 0, 1 << 20, 174)
    f.write(10, b"bb")
    f.write(0, b"aa")
    f.write(12, b"cc")  # touches the first run: merged
    assert list(f.runs()) == [(0, 2), (10, 4)]
    f.write(1, b"x" * 10)  # bridges both
    assert list(f.runs()) == [(0, 14)]
    assert f.read(0, 20)[0] == b"ax" + b"x" * 9 + b"bcc"


def test_a_sequential_writer_holds_at_most_one_chunk_in_memory() -> None:
    store = CountingStore()
    f = SparseFile(store, None, 0, 1024, 174)
    for i in range(0, 100_000, 7):
        f.write(i, bytes([i % 251]) * 7)
        assert f.pending_bytes < 1024 + 7
    assert f.pending_bytes == f.size % 1024
    assert store.puts == f.size // 1024


def test_changing_one_chunk_of_a_large_file_stores_one_leaf_and_the_tree_above_it() -> None:
    store = CountingStore()
    base = bytes(range(256)) * 4096  # 1 MiB: 64 chunks of 16 KiB, width 8 → two levels
    root = write_file(store.put, base, chunk_size=16384, width=8)
    f = SparseFile(store, root.cid, root.size, 16384, 8)
    f.write(500_000, b"changed")
    store.puts = store.put_bytes = 0
    built = f.build()
    assert store.puts == 1 + 1 + 1  # the changed leaf, its level-1 node, the root (the other 7 nodes are kept)
    assert store.put_bytes < 16384 + 4096
    expected = bytearray(base)
    expected[500_000:500_007] = b"changed"
    assert built == write_file(MemoryBlockStore().put, bytes(expected), chunk_size=16384, width=8)


def test_a_hole_costs_one_zero_leaf_however_long() -> None:
    store = CountingStore()
    f = SparseFile(store, None, 0, 4096, 174)
    f.write(4096 * 100 + 5, b"end")
    assert f.pending_bytes == 3
    built = f.build()
    assert store.puts == 1 + 1 + 1  # the zero chunk (reused 100 times), the last chunk, the root
    assert built.size == 4096 * 100 + 8
    assert read_file(store, built.cid) == bytes(4096 * 100 + 5) + b"end"


def test_a_terabyte_hole_is_built_from_a_few_blocks_not_a_step_per_chunk() -> None:
    """ftruncate to 1 TiB, one byte written in the middle: 2**22 chunks of 256 KiB, but the build stores
    the zero leaf, the written leaf and a few nodes per tree level (before: a step per chunk, ~18 s)."""
    store = CountingStore()
    f = SparseFile(store, None, 0, 1 << 18, 174)
    f.set_size(1 << 40)
    f.write(1 << 39, b"x")
    built = f.build()
    assert built.size == 1 << 40
    assert store.puts < 40, store.puts
    assert read_range(store, built.cid, (1 << 39) - 2, 4) == b"\0\0x\0"


def test_cutting_then_growing_reads_zeros_not_the_old_bytes() -> None:
    store = MemoryBlockStore()
    f = sparse_over(store, b"abcdefghij" * 3, 4, 2)
    f.write(28, b"XY")
    f.set_size(5)
    f.set_size(12)
    assert f.read(0, 100)[0] == b"abcde" + bytes(7)
    assert f.read(0, 5) == (b"abcde", True)
    assert f.read(6, 5) == (bytes(5), False)


def test_fold_stores_whole_chunks_and_keeps_the_partial_last_one() -> None:
    store = CountingStore()
    f = SparseFile(store, None, 0, 8, 174)
    for i in range(0, 30, 2):
        f.write(i * 3 % 29, b"zz")  # scattered, so nothing folds by itself... until covered
    before = f.read(0, 100)[0]
    f.fold(0)
    assert f.read(0, 100)[0] == before
    assert all(start >= (f.size // 8) * 8 for start, _ in f.runs())
    assert f.pending_bytes <= f.size % 8


def test_a_write_into_a_terabyte_hole_of_the_base_costs_the_tree_depth_not_a_step_per_chunk() -> None:
    """The 1 TiB hole is the base now (committed): one byte written at 0. The build reuses the base's
    untouched subtrees whole — the same few blocks the hole is made of — instead of walking its 2**22 leaves
    (before: every base node read and every level-1 node re-made, ~24 000 gets and puts, ~60 s, > 1 GB)."""
    store = CountingStore()
    f = SparseFile(store, None, 0, 1 << 18, 174)
    f.write((1 << 40) - 1, b"x")
    f.rebase(f.build())
    f.write(0, b"y")
    store.gets = store.puts = 0
    built = f.build()
    assert store.puts < 20, store.puts
    assert store.gets < 60, store.gets  # the base's few distinct nodes, read on the way down
    assert built.size == 1 << 40
    assert read_range(store, built.cid, 0, 2) == b"y\0"
    assert read_range(store, built.cid, (1 << 40) - 2, 2) == b"\0x"
    # a fresh SparseFile over the same base (a later run opening the file) needs no more
    again = SparseFile(store, built.cid, built.size, 1 << 18, 174)
    again.write(1 << 39, b"z")
    store.gets = store.puts = 0
    again.build()
    assert store.puts < 20, store.puts
    assert store.gets < 60, store.gets


def _wrapped(store: MemoryBlockStore, root: FileRoot) -> FileRoot:
    # A one-link File node over ``root``: the same bytes, a tree no balanced layout makes.
    data = encode_data(UnixFSData(NodeType.FILE, filesize=root.size, blocksizes=(root.size,)))
    block = encode_pb(PBNode((PBLink.to(root.cid, "", root.tsize),), data))
    return FileRoot(store.put(block, "dag-pb"), root.size, len(block) + root.tsize)


def _wrapped_leaves(store: MemoryBlockStore, data: bytes, chunk: int, width: int) -> FileRoot:
    # The layout's tree, but each leaf wrapped in a one-link node: every node above looks like the layout's.
    layout = BalancedLayout(store.put, width)
    for piece in chunks(data, chunk):
        leaf = store.put(bytes(piece), "raw")
        layout.add_leaf(_wrapped(store, FileRoot(leaf, len(piece), len(piece))).cid, len(piece))
    return layout.finish()


def _with_mode(store: MemoryBlockStore, data: bytes, chunk: int, width: int) -> FileRoot:
    # The layout's tree, but each File node carries a ``mode``: the same links, not the layout's blocks.
    def put(block: bytes, codec: str) -> str:
        if codec == "dag-pb":
            node = decode_pb(block)
            meta = decode_data(node.data or b"")
            block = encode_pb(PBNode(node.links, encode_data(replace(meta, mode=0o644))))
        return store.put(block, codec)

    return write_file(put, data, chunk_size=chunk, width=width)


BASES = st.one_of(
    st.none(),
    st.tuples(
        st.one_of(st.binary(max_size=60), st.integers(0, 300).map(bytes), st.binary(max_size=8).map(lambda b: b * 30)),
        st.sampled_from(["layout", "other-chunk", "other-width", "wrapped", "wrapped-leaves", "with-mode"]),
    ),
)


@settings(max_examples=200, deadline=None)
@given(base=BASES, rounds=st.lists(OPS, min_size=1, max_size=3), chunk=st.integers(1, 5), width=st.integers(2, 3))
def test_a_rebuilt_file_is_the_one_its_bytes_import_to_whatever_layout_its_base_has(
    base: tuple[bytes, str] | None, rounds: list[list[tuple[str, int, bytes]]], chunk: int, width: int
) -> None:
    """Differential: after each round of writes, cuts and folds the build is exactly :func:`write_file` of
    the file's bytes — over a base in this layout (its untouched subtrees kept whole), in another chunk size
    or width, wrapped (whole, or leaf by leaf) in nodes no layout makes, or with nodes that carry a mode
    (nothing kept whole that the import would not make), and over the trees earlier rounds built (the
    nodes checked in one build remembered for the next)."""
    store = MemoryBlockStore()
    if base is None:
        f, model = SparseFile(store, None, 0, chunk, width), bytearray()
    else:
        data, shape = base
        root = write_file(
            store.put,
            data,
            chunk_size=chunk + 1 if shape == "other-chunk" else chunk,
            width=width + 1 if shape == "other-width" else width,
        )
        if shape == "wrapped":
            root = _wrapped(store, root)
        if shape == "with-mode":
            root = _with_mode(store, data, chunk, width)
        if shape == "wrapped-leaves":
            root = _wrapped_leaves(store, data, chunk, width)
        f, model = SparseFile(store, root.cid, root.size, chunk, width), bytearray(data)
    for ops in rounds:
        for op in ops:
            apply(model, f, op)
        built = f.build()
        assert built == write_file(MemoryBlockStore().put, bytes(model), chunk_size=chunk, width=width)
        assert read_file(store, built.cid) == bytes(model)
        f.rebase(built)


def test_a_wide_foreign_base_is_rebuilt_in_steps_linear_in_its_links(monkeypatch: Any) -> None:
    """A base that is one File node of n links (a layout no balanced builder makes: a hostile or foreign
    DAG) is rebuilt chunk by chunk, each chunk looked up in it. Every lookup added up the node's n
    blocksizes again (twice), so a rebuild cost n² steps: 66 000 links, a 3 MB node, took a minute;
    the 1 000 000 a 46 MB node holds, days. The sizes a lookup needs are summed once per node now."""
    n = 4000
    store = MemoryBlockStore()
    leaf = store.put(b"abcd")
    data = encode_data(UnixFSData(NodeType.FILE, filesize=4 * n, blocksizes=(4,) * n))
    base = store.put(encode_pb(PBNode(tuple(PBLink.to(leaf, "", 4) for _ in range(n)), data)), "dag-pb")
    summed = 0

    def counting_sum(values: Any, start: int = 0) -> int:
        nonlocal summed
        items = list(values)
        summed += len(items)
        return sum(items, start)

    monkeypatch.setattr(basetree, "sum", counting_sum, raising=False)
    f = SparseFile(store, base, 4 * n, 4, 174)
    f.write(0, b"x")
    built = f.build()
    assert read_range(store, built.cid, 0, 6) == b"xbcdab"
    assert built.cid == write_file(store.put, b"xbcd" + b"abcd" * (n - 1), chunk_size=4, width=174).cid
    assert summed < 10 * n, summed


def test_folding_many_scattered_runs_touches_each_run_a_bounded_number_of_times() -> None:
    """Folding R runs that lie in R chunks costs O(R) steps, not O(R**2): each chunk's cut touches only the runs in
    it. (64 MiB written as 4 KiB pages scattered over a large file is 16384 runs; the quadratic cut spent minutes in
    one write.) Counted in executed lines of the cut, so the bound holds on any machine, loaded or not."""
    chunk, runs = 1024, 400
    f = SparseFile(MemoryBlockStore(), None, 0, chunk, 174)
    for k in range(runs):
        f.write(k * chunk + 3, b"x" * 100)
    steps = 0

    def count(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal steps
        if frame.f_code is SparseFile._cut.__code__:
            if event == "line":
                steps += 1
            return count
        return None

    sys.settrace(count)
    try:
        f.fold(0)
    finally:
        sys.settrace(None)
    assert f.pending_bytes == 100 and list(f.runs()) == [((runs - 1) * chunk + 3, 100)]  # the partial last chunk
    assert steps < 40 * runs, steps


def test_held_bytes_are_the_pending_bytes_plus_each_runs_bookkeeping_as_measured() -> None:
    """What a SparseFile holds for its runs is their bytes and ~105 bytes each (a start and a bytearray):
    :attr:`SparseFile.held_bytes` says so, within a tenth of what tracemalloc sees."""
    f = SparseFile(MemoryBlockStore(), None, 0, 1 << 18, 174)
    f.write(100_000, b"end")
    tracemalloc.start()
    try:
        for i in range(20_000):
            f.write(i * 3, b"x")
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f.held_bytes == f.pending_bytes + RUN_COST * len(list(f.runs()))
    assert abs((f.held_bytes - 3 - RUN_COST) - grown) < grown / 10, (f.held_bytes, grown)


def test_fold_folds_a_partial_last_chunk_of_scattered_runs_into_one_leaf_and_the_bytes_stay() -> None:
    """One run in the partial last chunk stays pending (its cost is its bytes); many runs there cost ~105 bytes
    each, so a fold puts that chunk in a leaf (zeros past the end), and the file reads and builds the same."""
    store = CountingStore()
    f = SparseFile(store, None, 0, 1024, 174)
    model = bytearray(700)
    f.set_size(700)
    for i in range(0, 700, 2):
        f.write(i, b"s")
        model[i] = ord("s")
    assert len(list(f.runs())) == 350
    f.fold(0)
    assert list(f.runs()) == [] and f.held_bytes == 0 and store.puts == 1
    assert f.read(0, 1000)[0] == bytes(model)
    f.write(900, b"late")  # past the old end, in the same chunk: the gap reads as zeros
    model.extend(bytes(200) + b"late")
    assert f.read(0, 2000)[0] == bytes(model)
    assert f.build() == write_file(MemoryBlockStore().put, bytes(model), chunk_size=1024, width=174)


def test_a_read_across_many_runs_over_a_folded_leaf_fetches_the_leaf_once() -> None:
    """The gaps between 256 runs written over a folded leaf each fetched (and hashed) the whole leaf: a fold of
    a chunk of scattered writes above its leaf cost 256 KiB of hashing per gap. One read fetches it once."""
    store = CountingStore()
    f = SparseFile(store, None, 0, 1024, 174)
    f.write(0, bytes(range(256)) * 4)  # a whole chunk: folded into a leaf at once
    for i in range(0, 1024, 4):
        f.write(i, b"w")
    store.gets = 0
    expected = bytes(b"w"[0] if i % 4 == 0 else i % 256 for i in range(1024))
    assert f.read(0, 1024)[0] == expected
    assert store.gets == 1
