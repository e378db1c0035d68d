"""Parity with the JavaScript IPFS stack: file CIDs, directory CIDs and CAR bytes, byte for byte.

``tools/unixfs_ref.mjs`` imports the same files with ``ipfs-unixfs-importer`` (raw leaves,
balanced layout, explicit chunk size and width) and writes CARs with ``@ipld/car`` in the
same block order; this module compares. Needs ``node`` and ``tools/node_modules``
(``npm ci --prefix tools``); without them it is skipped, saying why (CI may not skip).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from noderef import run_node, why_skip

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import export_car, import_car
from kuro_fs.dagpb import decode as decode_pb
from kuro_fs.fs import Fs, to_unixfs_dir
from kuro_fs.importer import import_path
from kuro_fs.unixfs import NodeType, decode_data

C = 262144
W = 174
EMPTY_FILE = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
EMPTY_DIR = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"

pytestmark = pytest.mark.parity


# (name, size, fill, chunk, width): fill is "zeros" or "random" (seeded by name).
FILE_CASES: list[tuple[str, int, str, int, int]] = [
    ("empty", 0, "zeros", C, W),
    ("one-byte", 1, "random", C, W),
    ("chunk-minus-one", C - 1, "random", C, W),
    ("chunk", C, "random", C, W),
    ("chunk-plus-one", C + 1, "random", C, W),
    ("width-times-chunk", W * C, "random", C, W),
    ("width-times-chunk-plus-one", W * C + 1, "zeros", C, W),
    ("width-times-chunk-plus-one-random", W * C + 1, "random", C, W),
    ("three-mib-random", 3 * 1024 * 1024 + 12345, "random", C, W),
    ("1k-w4-empty", 0, "zeros", 1024, 4),
    ("1k-w4-chunk-minus-one", 1023, "random", 1024, 4),
    ("1k-w4-chunk", 1024, "random", 1024, 4),
    ("1k-w4-chunk-plus-one", 1025, "random", 1024, 4),
    ("1k-w4-width-plus-one", 4 * 1024 + 1, "random", 1024, 4),
    ("1k-w4-width-squared-plus-one", 16 * 1024 + 1, "random", 1024, 4),
    ("1k-w4-three-levels", 70 * 1024 + 7, "random", 1024, 4),
    ("1k-w4-zeros-dedup", 40 * 1024, "zeros", 1024, 4),
    ("1000-w3", 30_001, "random", 1000, 3),
    ("4k-w2-deep", 200_000, "random", 4096, 2),
    ("default-chunk-w2", 5 * C + 1, "random", C, 2),
    ("default-chunk-w3-three-levels", 10 * C + 3, "random", C, 3),
    ("1k-default-width-plus-one", W * 1024 + 1, "random", 1024, W),
    ("1k-default-width-squared-plus-one", W * W * 1024 + 1, "random", 1024, W),
    ("100k-w10-two-mib", 2 * 1024 * 1024, "random", 100_000, 10),
]


def _content(name: str, size: int, fill: str) -> bytes:
    return bytes(size) if fill == "zeros" else random.Random(name).randbytes(size)


def _make_tree(root: Path) -> None:
    (root / "a").mkdir(parents=True)  # an empty directory
    (root / "hello.txt").write_bytes(b"hello world")
    (root / "empty.bin").write_bytes(b"")
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "sub" / "deeper" / "big.bin").write_bytes(random.Random("big").randbytes(5000))
    (root / "sub" / "z").write_bytes(b"z" * 1025)
    (root / "sub" / "B").write_bytes(b"upper")
    (root / "sub" / "é-unicode").write_bytes(b"accent")
    (root / "sub" / "こんにちは").write_bytes("こんにちは".encode())


_THRESHOLD = 262144  # the importer's shardSplitThresholdBytes: name + 36 CID bytes summed over counted links


def _named_files(root: Path, weights: list[int]) -> None:
    # One file per weight, each named so that its link counts exactly that many bytes (name + 36).
    root.mkdir(parents=True, exist_ok=True)
    for i, weight in enumerate(weights):
        (root / (f"{i:05d}-" + "x" * (weight - 36 - 6))).write_bytes(b"%d" % i)


def _at_threshold(root: Path) -> None:
    _named_files(root, [256] * 1024)  # exactly 262144: still flat


def _just_over(root: Path) -> None:
    _named_files(root, [256] * 1023 + [257])  # 262145: sharded


def _shard_with_everything(root: Path) -> None:
    # A sharded directory holding files, empty directories (counted), non-empty directories (not
    # counted), non-ASCII names, and a sharded subdirectory; 2600 names reach three shard levels.
    _named_files(root, [160] * 2600)
    for name in ["é-unicode", "こんにちは", "B", "z"]:
        (root / name).write_bytes(name.encode())
    for i in range(3):
        (root / f"empty-{i}").mkdir()
        (root / f"full-{i}").mkdir()
        (root / f"full-{i}" / "inner.txt").write_bytes(b"inner %d" % i)
    _just_over(root / "sub-sharded")


def _many_subdirectories(root: Path) -> None:
    # 1000 non-empty subdirectories of 250-byte names: 286 bytes each if they counted (286,000 > 262144),
    # but the importer does not count a directory with entries, so this one stays flat.
    root.mkdir()
    for i in range(1000):
        sub = root / (f"{i:04d}" + "d" * 246)
        sub.mkdir()
        (sub / "f").write_bytes(b"")


#: (name, chunk, width, builder) of directory trees imported on both sides.
DIR_CASES: list[tuple[str, int, int, Any]] = [
    ("tree", C, W, _make_tree),
    ("tree-1k-w4", 1024, 4, _make_tree),
    ("empty-dir", C, W, lambda root: root.mkdir()),
    ("shard-at-threshold", C, W, _at_threshold),
    ("shard-just-over", C, W, _just_over),
    ("shard-with-everything", C, W, _shard_with_everything),
    ("flat-many-subdirectories", C, W, _many_subdirectories),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    why = why_skip("ipfs-unixfs-importer")
    if why is not None:
        print(f"JS parity skipped: {why}")
        pytest.skip(why)
    work = tmp_path_factory.mktemp("parity")
    cases: list[dict[str, Any]] = []
    ours: dict[str, Any] = {}
    for name, size, fill, chunk, width in FILE_CASES:
        path = work / f"{name}.bin"
        path.write_bytes(_content(name, size, fill))
        cases.append({"kind": "file", "path": str(path), "chunk": chunk, "width": width, "car": f"{path}.js.car"})
        store = MemoryBlockStore()
        cid = import_path(store, path, chunk_size=chunk, width=width)
        export_car(store, cid, f"{path}.py.car")
        ours[name] = {"cid": cid, "car": f"{path}.py.car", "js_car": f"{path}.js.car"}
    for name, chunk, width, build in DIR_CASES:
        root = work / name
        if build is _make_tree:
            root.mkdir()
        build(root)
        car = work / f"{name}"
        cases.append({"kind": "dir", "path": str(root), "chunk": chunk, "width": width, "car": f"{car}.js.car"})
        store = MemoryBlockStore()
        fs = Fs(store, import_path(store, root, chunk_size=chunk, width=width))
        cid = to_unixfs_dir(fs)
        export_car(store, cid, f"{car}.py.car")
        ours[name] = {"cid": cid, "car": f"{car}.py.car", "js_car": f"{car}.js.car"}
    results = run_node("unixfs_ref.mjs", cases)
    names = [c[0] for c in FILE_CASES] + [c[0] for c in DIR_CASES]
    return {name: {**ours[name], "js": result} for name, result in zip(names, results, strict=True)}


@pytest.mark.parametrize("name", [c[0] for c in FILE_CASES] + [c[0] for c in DIR_CASES])
def test_cids_equal_the_javascript_importers(reference: dict[str, Any], name: str) -> None:
    case = reference[name]
    assert case["cid"] == case["js"]["cid"]


@pytest.mark.parametrize("name", [c[0] for c in FILE_CASES] + [c[0] for c in DIR_CASES])
def test_car_bytes_equal_the_javascript_writers(reference: dict[str, Any], name: str) -> None:
    case = reference[name]
    ours, theirs = Path(case["car"]).read_bytes(), Path(case["js_car"]).read_bytes()
    assert len(ours) == len(theirs)
    assert ours == theirs


def test_the_shard_cases_are_shaped_as_intended(reference: dict[str, Any]) -> None:
    # Not vacuous: the directories on either side of the threshold really are flat / sharded.
    def root_type(name: str) -> NodeType:
        store = MemoryBlockStore()
        import_car(store, reference[name]["car"])
        return decode_data(decode_pb(store.get(reference[name]["cid"]) or b"").data or b"").type

    assert root_type("shard-at-threshold") == NodeType.DIRECTORY
    assert root_type("flat-many-subdirectories") == NodeType.DIRECTORY
    assert root_type("shard-just-over") == NodeType.HAMT_SHARD
    assert root_type("shard-with-everything") == NodeType.HAMT_SHARD


def test_the_published_reference_points_hold_on_both_sides(reference: dict[str, Any]) -> None:
    assert reference["empty"]["cid"] == reference["empty"]["js"]["cid"] == EMPTY_FILE
    assert reference["empty-dir"]["cid"] == reference["empty-dir"]["js"]["cid"] == EMPTY_DIR
