"""kuro.fs: the immutable Fs value, its ops, receipts, grants and history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.dagcbor import encode
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.dircache import DirCache
from kuro_fs.errors import CorruptBlock, DagPbError, FileTooDeep, InvalidCID
from kuro_fs.filefill import FILE_NODES
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import (
    CAPABILITIES,
    DENIAL_REASONS,
    OP_CAPABILITIES,
    RECEIPT_KEYS,
    Entry,
    Fs,
    FsResult,
    decode_dir,
    encode_dir,
    to_unixfs_dir,
)
from kuro_fs.importer import import_bytes, import_path
from kuro_fs.paths import MAX_PATH_BYTES
from kuro_fs.unixfs import MAX_FILE_DEPTH, NodeType, UnixFSData, directory_node, encode_data, write_file

EMPTY_DIR = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"


@pytest.fixture
def store() -> MemoryBlockStore:
    return MemoryBlockStore()


@pytest.fixture
def fs(store: MemoryBlockStore) -> Fs:
    return Fs.empty(store)


def denied(result: FsResult, reason: str) -> dict[str, Any]:
    assert result.value is None
    assert not result.ok
    assert result.receipt["kuro.fs/type"] == "kuro.fs/denied"
    assert result.receipt["kuro.fs/reason"] == reason, result.receipt
    return result.receipt


def ok(result: FsResult) -> FsResult:
    assert result.ok, result.receipt
    return result


def tree(fs: Fs, files: dict[str, bytes]) -> Fs:
    for path, data in files.items():
        fs = ok(fs.write(path, data)).fs
    return fs


class CountingStore(MemoryBlockStore):
    """A memory store that records every CID fetched."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []

    def get(self, cid: str) -> bytes | None:
        self.fetched.append(cid)
        return super().get(cid)


class FlakyStore(MemoryBlockStore):
    """A memory store whose get raises CorruptBlock for chosen CIDs."""

    def __init__(self) -> None:
        super().__init__()
        self.corrupt: set[str] = set()

    def get(self, cid: str) -> bytes | None:
        if cid in self.corrupt:
            raise CorruptBlock(cid)
        return super().get(cid)


# ---- bad input and denials first


@pytest.mark.parametrize(
    "path", [None, 3, b"a", "", "  ", "../etc/passwd", "a/../../b", "/../x", "a\x00b", "evil\nfake/", "a/\x1b[2J"]
)
@pytest.mark.parametrize("op", ["read", "ls", "stat", "rm", "mkdir", "walk"])
def test_bad_paths_are_denied_by_every_op(fs: Fs, op: str, path: object) -> None:
    receipt = denied(getattr(fs, op)(path), "bad-path")
    assert receipt["kuro.fs/path"] == (path if isinstance(path, str) else repr(path))


def test_bad_paths_are_denied_for_write_read_range_and_either_side_of_mv(fs: Fs) -> None:
    denied(fs.write("../x", b"x"), "bad-path")
    denied(fs.read_range("..", 0, 1), "bad-path")
    denied(fs.mv("..", "a"), "bad-path")
    denied(fs.mv("a", "a/../.."), "bad-path")


def test_bad_path_comes_before_the_grant(fs: Fs) -> None:
    denied(fs.with_grant([]).read("../x"), "bad-path")


def test_a_write_payload_must_be_bytes(fs: Fs) -> None:
    for payload in ["text", None, 5, [1, 2]]:
        denied(fs.write("a.txt", payload), "bytes-required")
    for good in [bytearray(b"ab"), memoryview(b"ab")]:
        assert ok(fs.write("a.txt", good)).fs.read("a.txt").value == b"ab"


@pytest.mark.parametrize("offset, length", [(-1, 1), (0, -1), (1.0, 1), (True, 1), ("0", 1), (0, None)])
def test_read_range_needs_non_negative_int_offsets(fs: Fs, offset: object, length: object) -> None:
    fs = tree(fs, {"a": b"abc"})
    denied(fs.read_range("a", offset, length), "bad-range")


def test_every_denial_reason_is_pinned(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"docs/a.txt": b"hi", "f": b"file"})
    seen = {
        denied(fs.read("nope"), "not-found")["kuro.fs/reason"],
        denied(fs.read("docs"), "not-a-file")["kuro.fs/reason"],
        denied(fs.ls("f"), "not-a-directory")["kuro.fs/reason"],
        denied(fs.read("f/x"), "not-a-directory")["kuro.fs/reason"],
        denied(fs.write("docs", b"x"), "is-a-directory")["kuro.fs/reason"],
        denied(fs.write("f/x", b"x"), "path-blocked")["kuro.fs/reason"],
        denied(fs.mkdir("f/x"), "path-blocked")["kuro.fs/reason"],
        denied(fs.rm("docs"), "directory-not-empty")["kuro.fs/reason"],
        denied(fs.with_grant(["fs/ls"]).read("f"), "missing-capability")["kuro.fs/reason"],
        denied(fs.read(".."), "bad-path")["kuro.fs/reason"],
        denied(fs.write("g", "str"), "bytes-required")["kuro.fs/reason"],
        denied(fs.read_range("f", -1, 1), "bad-range")["kuro.fs/reason"],
        denied(fs.with_budget(bytes=3).read("f"), "over-budget")["kuro.fs/reason"],
    }
    store.delete(raw_cid(b"file"))
    seen.add(denied(fs.read("f"), "block-missing")["kuro.fs/reason"])
    assert seen == set(DENIAL_REASONS)


def test_a_missing_file_block_is_denied_with_its_cid(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"a.txt": b"hello"})
    store.delete(raw_cid(b"hello"))
    receipt = denied(fs.read("a.txt"), "block-missing")
    assert receipt["kuro.fs/cid"] == raw_cid(b"hello")
    denied(fs.read_range("a.txt", 0, 2), "block-missing")


def test_a_missing_leaf_deep_in_a_file_is_denied_with_the_leafs_cid(store: MemoryBlockStore) -> None:
    fs = Fs(store, Fs.empty(store).root, chunk_size=4, width=2)
    fs = tree(fs, {"big": b"0123456789abcdef"})
    store.delete(raw_cid(b"89ab"))
    assert denied(fs.read("big"), "block-missing")["kuro.fs/cid"] == raw_cid(b"89ab")
    assert ok(fs.read_range("big", 0, 8)).value == b"01234567"  # the missing leaf is not needed
    denied(fs.read_range("big", 6, 4), "block-missing")


def test_a_corrupt_block_is_denied_as_block_missing_not_raised() -> None:
    store = FlakyStore()
    root = tree(Fs.empty(store), {"d/a.txt": b"hello"}).root

    def cold() -> Fs:  # a private, empty cache: every directory is read from the store
        return Fs(store, root, cache=DirCache())

    store.corrupt.add(raw_cid(b"hello"))
    assert denied(cold().read("d/a.txt"), "block-missing")["kuro.fs/cid"] == raw_cid(b"hello")
    d = ok(cold().stat("d")).value["cid"]
    store.corrupt.add(d)
    assert denied(cold().ls("d"), "block-missing")["kuro.fs/cid"] == d
    assert denied(cold().write("d/b", b"x"), "block-missing")["kuro.fs/cid"] == d


def test_a_missing_root_is_block_missing_for_every_op(store: MemoryBlockStore) -> None:
    fs = Fs(store, cid_for(encode_dir({"x": Entry(raw_cid(b""), 0)}), "dag-cbor"))
    for result in [fs.ls("."), fs.read("x"), fs.write("y", b""), fs.mkdir("z"), fs.rm("x"), fs.walk(".")]:
        assert denied(result, "block-missing")["kuro.fs/cid"] == fs.root


def test_a_malformed_directory_block_is_block_missing(store: MemoryBlockStore) -> None:
    for value in [{"entries": {}}, {"entries": {"..": {"cid": 1, "size": 0}}, "type": "kuro.fs/dir", "version": 1}]:
        root = store.put(encode(value), "dag-cbor")
        assert denied(Fs(store, root).ls("."), "block-missing")["kuro.fs/cid"] == root


def test_a_denied_write_stores_no_block_and_keeps_the_root(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"f": b"file", "d/x": b"x"})
    before = store.cids()
    attempts = [
        fs.write("f/inner", b"new bytes 1"),
        fs.write("d", b"new bytes 2"),
        fs.write(".", b"new bytes 3"),
        fs.write("../x", b"new bytes 4"),
        fs.with_grant(["fs/read"]).write("g", b"new bytes 5"),
        fs.mkdir("f/sub"),
        fs.mkdir("f"),
        fs.with_grant(["fs/read"]).mkdir("newdir"),
        fs.rm("d"),
        fs.mv("d", "f/d"),
        fs.mv("d", "d/inside"),
    ]
    for result in attempts:
        assert not result.ok
        assert result.fs.root == fs.root
        assert result.receipt["kuro.fs/root-cid"] == fs.root
    assert store.cids() == before


def _lost_dir(store: MemoryBlockStore) -> Fs:
    # An fs whose directory "d" (holding "x") has lost its block.
    fs = tree(Fs.empty(store), {"d/x": b"x", "f": b"file"})
    store.delete(ok(fs.stat("d")).value["cid"])
    return fs


_IMPORTED = b"imported file bytes, not yet linked"

#: Every way a mutating op can be refused: (reason, the attempt). Each must store nothing and keep the root.
_REFUSED_MUTATIONS = [
    ("bad-path", lambda fs: fs.write("../x", b"new 1")),
    ("bad-path", lambda fs: fs.write(None, b"new 2")),
    ("bad-path", lambda fs: fs.write("", b"new 3")),
    ("bad-path", lambda fs: fs.write("a\x00b", b"new 4")),
    ("bad-path", lambda fs: fs.write("/../etc/passwd", b"new 5")),
    ("bad-path", lambda fs: fs.mkdir("d/../../up")),
    ("bad-path", lambda fs: fs.link("..", raw_cid(_IMPORTED))),
    ("bad-path", lambda fs: fs.write("evil\nfake/x", b"new 10")),
    ("bad-path", lambda fs: fs.mv("f", "\x1b]0;title")),
    ("not-a-directory", lambda fs: fs.write("f/", b"new 11")),
    ("not-a-directory", lambda fs: fs.write("g/", b"new 12")),
    ("not-a-directory", lambda fs: fs.link("g/", raw_cid(_IMPORTED))),
    ("not-a-directory", lambda fs: fs.rm("f/")),
    ("not-a-directory", lambda fs: fs.mv("f/", "g")),
    ("not-a-directory", lambda fs: fs.mv("f", "g/")),
    ("not-a-directory", lambda fs: fs.mv("f", "f/")),
    ("bytes-required", lambda fs: fs.write("g", "a string")),
    ("missing-capability", lambda fs: fs.with_grant(["fs/read", "fs/ls", "fs/rm"]).write("g", b"new 6")),
    ("missing-capability", lambda fs: fs.with_grant(["fs/read"]).mkdir("newdir")),
    ("missing-capability", lambda fs: fs.with_grant(["fs/write"]).rm("f")),
    ("missing-capability", lambda fs: fs.with_grant(["fs/write"]).mv("f", "g")),
    ("missing-capability", lambda fs: fs.with_grant(["fs/read"]).link("g", raw_cid(_IMPORTED))),
    ("is-a-directory", lambda fs: fs.write("d", b"new 7")),
    ("is-a-directory", lambda fs: fs.write(".", b"new 8")),
    ("is-a-directory", lambda fs: fs.mv("f", "d")),
    ("is-a-directory", lambda fs: fs.link("d", raw_cid(_IMPORTED))),
    ("path-blocked", lambda fs: fs.write("f/inner", b"new 9")),
    ("path-blocked", lambda fs: fs.mkdir("f/sub")),
    ("path-blocked", lambda fs: fs.mkdir("f")),
    ("path-blocked", lambda fs: fs.mv("d", "f/d")),
    ("path-blocked", lambda fs: fs.link("f/x", raw_cid(_IMPORTED))),
    ("not-found", lambda fs: fs.rm("nope")),
    ("not-found", lambda fs: fs.mv("nope", "x")),
    ("not-a-directory", lambda fs: fs.rm("f/x")),
    ("not-a-directory", lambda fs: fs.mv("d", "f")),
    ("directory-not-empty", lambda fs: fs.rm("d")),
    ("block-missing", lambda fs: fs.link("g", raw_cid(b"never stored"))),
]


@pytest.mark.parametrize("reason, attempt", _REFUSED_MUTATIONS, ids=[r for r, _ in _REFUSED_MUTATIONS])
def test_a_refused_mutation_stores_no_block_and_keeps_the_root(reason: str, attempt: Any) -> None:
    store = MemoryBlockStore()
    fs = tree(Fs.empty(store), {"f": b"file", "d/x": b"x"})
    store.put(_IMPORTED)
    before, cids = store.stats(), store.cids()
    result = attempt(fs)
    denied(result, reason)
    assert result.fs.root == fs.root and result.receipt["kuro.fs/root-cid"] == fs.root
    assert store.stats() == before and store.cids() == cids


@pytest.mark.parametrize(
    "attempt",
    [
        lambda fs: fs.write("d/y", b"new bytes"),
        lambda fs: fs.mkdir("d/sub"),
        lambda fs: fs.rm("d/x"),
        lambda fs: fs.mv("f", "d/f"),
        lambda fs: fs.link("d/y", raw_cid(b"file")),
    ],
)
def test_a_mutation_through_a_lost_directory_block_stores_nothing(attempt: Any) -> None:
    store = MemoryBlockStore()
    fs = _lost_dir(store)
    before = store.stats()
    assert denied(attempt(fs), "block-missing")["kuro.fs/cid"] == cid_for(
        encode_dir({"x": Entry(raw_cid(b"x"), 1)}), "dag-cbor"
    )
    assert store.stats() == before


def test_a_path_deeper_than_the_recursion_limit_is_served_not_raised(fs: Fs) -> None:
    # 1100 one-letter segments: deeper than Python's recursion limit, still a legal path (2202 bytes).
    deep = "/".join(["a"] * 1100) + "/f"
    assert len(deep.encode()) <= MAX_PATH_BYTES
    fs = ok(fs.write(deep, b"deep")).fs
    assert ok(fs.read_range(deep, 1, 2)).value == b"ee"
    assert ok(fs.walk(".")).receipt["kuro.fs/entries"] == 1101
    assert to_unixfs_dir(fs).startswith("bafybei")


def test_a_hostile_deep_file_dag_is_denied_not_raised(fs: Fs, store: MemoryBlockStore) -> None:
    cid, tsize = store.put(b"abc"), 3
    for _ in range(1500):  # one-link File nodes stacked far past the recursion limit
        data = encode_data(UnixFSData(NodeType.FILE, filesize=3, blocksizes=(3,)))
        block = encode_pb(PBNode((PBLink.to(cid, "", tsize),), data))
        cid, tsize = store.put(block, "dag-pb"), tsize + len(block)
    fs = ok(fs.link("deep", cid)).fs  # link reads only the root block
    # Refused as a budget that names its limit: the depth a read follows (kuro_fs.unixfs.MAX_FILE_DEPTH).
    refused = denied(fs.read("deep"), "over-budget")
    assert (refused["kuro.fs/cid"], refused["kuro.fs/budget"]) == (cid, {"depth": MAX_FILE_DEPTH})
    assert denied(fs.read_range("deep", 1, 1), "over-budget")["kuro.fs/budget"] == {"depth": MAX_FILE_DEPTH}
    with pytest.raises(FileTooDeep, match=f"deeper than {MAX_FILE_DEPTH} levels") as raised:
        list(ok(fs.stream("deep")).value)  # a stream meets it part-way: the typed error, naming the depth
    assert raised.value.depth == MAX_FILE_DEPTH and isinstance(raised.value, DagPbError)


def test_read_range_through_fs_fetches_only_the_blocks_on_its_way() -> None:
    store = CountingStore()
    fs = Fs(store, Fs.empty(store).root, chunk_size=256, width=4)
    data = bytes((i * 31 + i // 256) % 256 for i in range(16384))  # 64 distinct leaves, 3 levels
    fs = Fs(store, ok(fs.write("d/big.bin", data)).fs.root, chunk_size=256, width=4, cache=DirCache())
    FILE_NODES.clear()  # a cold read (decoded File nodes are kept process-wide)
    for decoded_dirs, decoded_nodes in ((2, 3), (0, 0)):  # each directory block and File node is decoded once
        store.fetched.clear()
        assert ok(fs.read_range("d/big.bin", 1000, 10)).value == data[1000:1010]
        dirs = [c for c in store.fetched if c.startswith("bafyrei")]
        leaves = [c for c in store.fetched if c.startswith("bafkrei")]
        nodes = [c for c in store.fetched if c.startswith("bafybei")]
        assert (len(dirs), len(nodes), len(leaves)) == (decoded_dirs, decoded_nodes, 1)  # the file's 3 levels; 1 leaf


def test_a_trailing_slash_on_a_file_is_not_a_directory_and_on_a_directory_is_the_directory(fs: Fs) -> None:
    fs = tree(fs, {"greeting.txt": b"hello", "d/x": b"x"})
    for result in [
        fs.read("greeting.txt/"),
        fs.read_range("greeting.txt/", 0, 1),
        fs.stat("greeting.txt/."),
        fs.ls("greeting.txt/"),
        fs.walk("greeting.txt/"),
    ]:
        denied(result, "not-a-directory")
    assert ok(fs.stat("d/")).value["kind"] == "dir"
    assert [e["name"] for e in ok(fs.ls("d/")).value] == ["x"]
    denied(fs.read("d/"), "not-a-file")
    denied(fs.write("d/", b"x"), "is-a-directory")
    moved = ok(fs.mv("d/", "e/")).fs
    assert ok(moved.read("e/x")).value == b"x"
    assert ok(fs.mkdir("new/")).fs.stat("new").value["kind"] == "dir"
    assert ok(fs.link("mnt/", ok(fs.stat("d")).value["cid"])).fs.read("mnt/x").value == b"x"


# ---- link: binding an imported DAG at a path


def test_link_refuses_a_string_that_is_not_a_cid(fs: Fs) -> None:
    for bad in ["not-a-cid", "", None, 5]:
        with pytest.raises(InvalidCID):
            fs.link("a", bad)  # type: ignore[arg-type]


def test_link_refuses_a_cid_whose_root_block_is_missing(fs: Fs) -> None:
    absent = raw_cid(b"never stored")
    receipt = denied(fs.link("a", absent), "block-missing")
    assert receipt["kuro.fs/cid"] == absent and receipt["kuro.fs/op"] == "link"
    absent_dir = cid_for(encode_dir({"z": Entry(raw_cid(b"z"), 1)}), "dag-cbor")
    assert denied(fs.link("a", absent_dir), "block-missing")["kuro.fs/cid"] == absent_dir


def test_link_refuses_a_corrupt_root_block() -> None:
    store = FlakyStore()
    fs = Fs.empty(store)
    cid = store.put(b"bytes")
    store.corrupt.add(cid)
    assert denied(fs.link("a", cid), "block-missing")["kuro.fs/cid"] == cid


def test_link_refuses_a_dag_that_is_neither_a_unixfs_file_nor_a_kuro_fs_directory(
    fs: Fs, store: MemoryBlockStore
) -> None:
    unixfs_dir = store.put(directory_node([])[0], "dag-pb")
    assert denied(fs.link("a", unixfs_dir), "not-a-file")["kuro.fs/cid"] == unixfs_dir
    no_data = store.put(encode_pb(PBNode((PBLink.to(raw_cid(b"x"), "", 1),))), "dag-pb")
    denied(fs.link("a", no_data), "not-a-file")
    garbage = store.put(b"\xff\xff not protobuf", "dag-pb")
    denied(fs.link("a", garbage), "not-a-file")
    symlink = store.put(encode_pb(PBNode((), encode_data(UnixFSData(NodeType.SYMLINK, data=b"/etc")))), "dag-pb")
    denied(fs.link("a", symlink), "not-a-file")
    not_a_dir = store.put(encode({"hello": "world"}), "dag-cbor")
    assert denied(fs.link("a", not_a_dir), "not-a-directory")["kuro.fs/cid"] == not_a_dir
    p2p_link = b"\xd8\x2a\x58\x25\x00\x01\x72\x12\x20" + bytes(32)  # tag 42 over libp2p-key: no codec kuro reads
    entry = b"\xa1\x61a\xa2\x63cid" + p2p_link + b"\x64size\x00"
    odd_dir = b"\xa3\x64type\x6bkuro.fs/dir\x67entries" + entry + b"\x67version\x01"  # canonical key order
    denied(fs.link("a", store.put(odd_dir, "dag-cbor")), "not-a-directory")


def test_link_binds_an_imported_file_creating_parents(fs: Fs, store: MemoryBlockStore) -> None:
    data = bytes(range(256)) * 40
    cid = import_bytes(store, data, chunk_size=1000, width=3)
    before = store.stats()
    r = ok(fs.link("x/y/file.bin", cid))
    assert r.value == cid
    assert r.receipt == {
        "kuro.fs/type": "kuro.fs/receipt",
        "kuro.fs/op": "link",
        "kuro.fs/path": "x/y/file.bin",
        "kuro.fs/cid": cid,
        "kuro.fs/size": len(data),
        "kuro.fs/root-cid": r.fs.root,
    }
    assert store.stats()["blocks"] == before["blocks"] + 3  # root, x, x/y: the file itself is not re-stored
    assert ok(r.fs.read("x/y/file.bin")).value == data
    assert ok(r.fs.stat("x/y/file.bin")).value == {"kind": "file", "size": len(data), "cid": cid}
    assert r.fs.history == (fs.root,)
    written = ok(Fs(store, fs.root, chunk_size=1000, width=3).write("x/y/file.bin", data))
    assert written.fs.root == r.fs.root  # linking the imported DAG is the same tree as writing its bytes


def test_link_binds_an_imported_directory_tree(fs: Fs, store: MemoryBlockStore, tmp_path: Path) -> None:
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "sub" / "a.txt").write_bytes(b"hello")
    (tmp_path / "t" / "e").write_bytes(b"")
    root = import_path(store, tmp_path / "t")
    r = ok(fs.link("mnt/t", root))
    assert r.receipt["kuro.fs/size"] == 0
    assert ok(r.fs.stat("mnt/t")).value == {"kind": "dir", "size": 0, "cid": root}
    assert [e["path"] for e in ok(r.fs.walk("mnt")).value] == ["mnt/t", "mnt/t/e", "mnt/t/sub", "mnt/t/sub/a.txt"]
    assert ok(r.fs.read("mnt/t/sub/a.txt")).value == b"hello"


def test_link_replaces_a_file_and_a_same_link_is_a_no_op(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"a": b"old"})
    cid = write_file(store.put, b"new").cid
    r = ok(fs.link("a", cid))
    assert ok(r.fs.read("a")).value == b"new"
    again = ok(r.fs.link("/a", cid))
    assert again.fs.root == r.fs.root and again.fs.history == r.fs.history


def test_link_needs_fs_write_only(fs: Fs, store: MemoryBlockStore) -> None:
    cid = store.put(b"x")
    wo = fs.with_grant(["fs/write"])
    linked = ok(wo.link("a", cid)).fs
    assert denied(linked.read("a"), "missing-capability")["kuro.fs/missing"] == "fs/read"
    assert (
        denied(fs.with_grant(["fs/read", "fs/ls", "fs/rm"]).link("a", cid), "missing-capability")["kuro.fs/missing"]
        == "fs/write"
    )


def test_a_fresh_fs_lists_nothing_and_refuses_to_remove_its_root(fs: Fs) -> None:
    assert ok(fs.ls(".")).value == []
    denied(fs.rm("."), "not-found")
    denied(fs.rm("missing"), "not-found")
    denied(fs.read("."), "not-a-file")
    denied(fs.write("/", b"x"), "is-a-directory")


def test_the_root_must_be_a_dag_cbor_cid(store: MemoryBlockStore) -> None:
    with pytest.raises(InvalidCID, match="dag-cbor"):
        Fs(store, raw_cid(b""))
    with pytest.raises(InvalidCID):
        Fs(store, "not-a-cid")


def test_unknown_capabilities_are_refused(fs: Fs) -> None:
    with pytest.raises(ValueError, match="unknown capabilities"):
        fs.with_grant(["fs/sudo"])
    with pytest.raises(ValueError, match="unknown capabilities"):
        Fs(fs.store, fs.root, frozenset({"root"}))


# ---- the original kuro's fs_test, rule by rule


def test_write_then_read_round_trips_with_two_accepted_receipts(fs: Fs) -> None:
    w = ok(fs.write("ok.txt", b"ok"))
    r = ok(w.fs.read("ok.txt"))
    assert r.value == b"ok"
    assert [w.receipt["kuro.fs/op"], r.receipt["kuro.fs/op"]] == ["write", "read"]
    assert r.receipt["kuro.fs/cid"] == w.value == raw_cid(b"ok")


def test_overwriting_gives_a_different_cid_and_root(fs: Fs) -> None:
    a = ok(fs.write("f", b"one"))
    b = ok(a.fs.write("f", b"two"))
    assert a.value != b.value and a.fs.root != b.fs.root
    assert ok(b.fs.read("f")).value == b"two"


def test_ls_shows_dirs_and_files_with_sizes(fs: Fs) -> None:
    fs = ok(fs.mkdir("docs/notes")).fs
    fs = ok(fs.write("docs/a.txt", b"hi")).fs
    listing = ok(fs.ls("docs")).value
    assert [(e["name"], e["kind"], e["size"]) for e in listing] == [("a.txt", "file", 2), ("notes", "dir", 0)]
    assert listing[1]["cid"] == cid_for(encode_dir({}), "dag-cbor")


def test_ls_sorts_by_name_regardless_of_insertion_order(fs: Fs) -> None:
    fs = tree(fs, {"z": b"", "a": b"", "m": b""})
    assert [e["name"] for e in ok(fs.ls(".")).value] == ["a", "m", "z"]
    assert ok(fs.ls(".")).receipt["kuro.fs/entries"] == 3


def test_rm_of_a_file_then_ls_is_empty(fs: Fs) -> None:
    fs = tree(fs, {"a.txt": b"x"})
    assert ok(fs.rm("a.txt")).fs.ls(".").value == []


def test_rm_of_an_empty_dir_works_once(fs: Fs) -> None:
    fs = ok(fs.mkdir("d")).fs
    gone = ok(fs.rm("d")).fs
    denied(gone.rm("d"), "not-found")


def test_grants_gate_each_op_and_write_does_not_imply_read(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"a.txt": b"hi"})
    ro = fs.with_grant(["fs/read"])
    before = store.stats()
    assert denied(ro.write("no.txt", b"x"), "missing-capability")["kuro.fs/missing"] == "fs/write"
    assert store.stats() == before
    assert denied(ro.rm("a.txt"), "missing-capability")["kuro.fs/missing"] == "fs/rm"
    assert denied(ro.mkdir("d"), "missing-capability")["kuro.fs/missing"] == "fs/write"
    assert ok(ro.read("a.txt")).value == b"hi"
    wo = fs.with_grant(["fs/write"])
    written = ok(wo.write("b.txt", b"x")).fs
    assert denied(written.read("b.txt"), "missing-capability")["kuro.fs/missing"] == "fs/read"
    assert denied(fs.with_grant(["fs/write"]).mv("a.txt", "c"), "missing-capability")["kuro.fs/missing"] == "fs/rm"


def test_no_op_needs_fs_publish(fs: Fs) -> None:
    assert "fs/publish" in CAPABILITIES
    assert all("fs/publish" not in caps for caps in OP_CAPABILITIES.values())
    g = fs.with_grant(set(CAPABILITIES) - {"fs/publish"})
    g = ok(g.write("a", b"1")).fs
    for result in [g.read("a"), g.ls("."), g.mkdir("d"), g.rm("a"), g.stat("a"), g.mv("a", "b"), g.walk(".")]:
        assert result.ok


def test_a_grant_narrows_and_never_widens(fs: Fs) -> None:
    narrow = fs.with_grant(["fs/read"])
    assert narrow.with_grant(CAPABILITIES).grant == frozenset({"fs/read"})


class _Counting:
    """A block store over another that counts its gets (a wrapper of the same blocks)."""

    def __init__(self, inner: MemoryBlockStore) -> None:
        self.inner, self.gets = inner, 0

    def get(self, cid: str) -> bytes | None:
        self.gets += 1
        return self.inner.get(cid)

    def put(self, data: bytes, codec: str = "raw", **kw: Any) -> str:
        return self.inner.put(data, codec, **kw)

    def has(self, cid: str) -> bool:
        return self.inner.has(cid)


def test_another_store_of_the_same_blocks_keeps_everything_else_and_is_read_through(
    fs: Fs, store: MemoryBlockStore
) -> None:
    made = ok(fs.write("a.txt", b"hello")).fs.with_grant(["fs/read", "fs/ls", "fs/write"]).with_budget(bytes=3)
    counting = _Counting(store)
    over = made.with_store(counting)
    assert type(over) is Fs and over.store is counting and made.store is store
    kept = ("root", "grant", "log", "chunk_size", "width", "layout", "budget", "cache", "history")
    assert all(getattr(over, name) == getattr(made, name) for name in kept)
    assert ok(over.read_range("a.txt", 1, 3)).value == b"ell" and counting.gets > 0
    assert denied(over.read("a.txt"), "over-budget")  # the budget came along
    assert denied(over.rm("a.txt"), "missing-capability")  # and the grant
    written = ok(over.write("b.txt", b"x")).fs
    assert written.store is counting and written.history == (*made.history, made.root)


def test_receipts_are_closed_exact_maps(fs: Fs) -> None:
    w = fs.write("ok.txt", b"ok")
    assert w.receipt == {
        "kuro.fs/type": "kuro.fs/receipt",
        "kuro.fs/op": "write",
        "kuro.fs/path": "ok.txt",
        "kuro.fs/cid": raw_cid(b"ok"),
        "kuro.fs/size": 2,
        "kuro.fs/root-cid": w.fs.root,
    }
    d = fs.with_grant([]).write("no.txt", b"x")
    assert d.receipt == {
        "kuro.fs/type": "kuro.fs/denied",
        "kuro.fs/op": "write",
        "kuro.fs/path": "no.txt",
        "kuro.fs/reason": "missing-capability",
        "kuro.fs/missing": "fs/write",
        "kuro.fs/root-cid": fs.root,
    }


def test_every_receipt_uses_only_declared_keys_in_the_kuro_fs_namespace(fs: Fs) -> None:
    fs = tree(fs, {"a/b": b"x"})
    results = [fs.read("a/b"), fs.read_range("a/b", 0, 1), fs.ls("a"), fs.stat("a"), fs.walk("."), fs.mkdir("c")]
    results += [fs.rm("a/b"), fs.mv("a", "z"), fs.read("zz"), fs.with_grant([]).ls("."), fs.write("x", "s")]
    for result in results:
        assert set(result.receipt) <= set(RECEIPT_KEYS)
        assert isinstance(result, tuple) and len(result) == 3


def test_old_values_stay_valid_snapshots(fs: Fs) -> None:
    st1 = ok(fs.write("a.txt", b"a")).fs
    st2 = ok(st1.write("b.txt", b"b")).fs
    assert [e["name"] for e in fs.ls(".").value] == []
    assert [e["name"] for e in st1.ls(".").value] == ["a.txt"]
    assert [e["name"] for e in st2.ls(".").value] == ["a.txt", "b.txt"]
    assert len({fs.root, st1.root, st2.root}) == 3


# ---- ops in detail


def test_mkdir_creates_parents_and_on_an_existing_dir_keeps_its_children(fs: Fs) -> None:
    fs = tree(fs, {"d/keep.txt": b"k"})
    again = ok(fs.mkdir("d"))
    assert again.fs.root == fs.root
    assert ok(again.fs.read("d/keep.txt")).value == b"k"
    deep = ok(fs.mkdir("x/y/z")).fs
    assert ok(deep.stat("x/y/z")).value["kind"] == "dir"
    assert ok(fs.mkdir(".")).fs.root == fs.root


def test_write_creates_missing_parents_and_replaces_files(fs: Fs) -> None:
    fs = tree(fs, {"a/b/c.txt": b"1", "a/b/c.txt ": b"2"})
    assert ok(fs.read("/a/b/c.txt")).value == b"1"
    assert ok(fs.read("a//b/./c.txt ")).value == b"2"


def test_stat_reports_kind_size_and_cid_without_reading_the_file(fs: Fs, store: MemoryBlockStore) -> None:
    fs = tree(fs, {"f": b"abc"})
    store.delete(raw_cid(b"abc"))
    assert ok(fs.stat("f")).value == {"kind": "file", "size": 3, "cid": raw_cid(b"abc")}
    assert ok(fs.stat(".")).value == {"kind": "dir", "size": 0, "cid": fs.root}
    denied(fs.stat("g"), "not-found")


def test_read_range_reads_like_pread(fs: Fs) -> None:
    fs = tree(fs, {"f": b"0123456789"})
    assert ok(fs.read_range("f", 2, 3)).value == b"234"
    assert ok(fs.read_range("f", 8, 10)).value == b"89"
    r = ok(fs.read_range("f", 20, 5))
    assert r.value == b"" and r.receipt["kuro.fs/offset"] == 20 and r.receipt["kuro.fs/size"] == 0
    assert r.receipt["kuro.fs/cid"] == raw_cid(b"0123456789")
    denied(fs.read_range(".", 0, 1), "not-a-file")


def test_walk_lists_every_entry_depth_first_sorted(fs: Fs) -> None:
    fs = tree(fs, {"b/y": b"1", "a": b"2", "b/x/z": b"3"})
    assert [(e["path"], e["kind"]) for e in ok(fs.walk()).value] == [
        ("a", "file"),
        ("b", "dir"),
        ("b/x", "dir"),
        ("b/x/z", "file"),
        ("b/y", "file"),
    ]
    assert [e["path"] for e in ok(fs.walk("b/x")).value] == ["b/x/z"]
    denied(fs.walk("a"), "not-a-directory")


def test_mv_renames_files_and_moves_directories(fs: Fs) -> None:
    fs = tree(fs, {"d/f": b"1", "g": b"2"})
    r = ok(fs.mv("d/f", "e/renamed"))
    assert r.receipt["kuro.fs/to"] == "e/renamed"
    assert ok(r.fs.read("e/renamed")).value == b"1"
    denied(r.fs.read("d/f"), "not-found")
    moved = ok(fs.mv("d", "x/d2")).fs
    assert ok(moved.read("x/d2/f")).value == b"1"
    replaced = ok(fs.mv("g", "d/f")).fs
    assert ok(replaced.read("d/f")).value == b"2"
    assert ok(fs.mv("g", "/g")).fs.root == fs.root


def test_mv_refusals(fs: Fs) -> None:
    fs = tree(fs, {"d/f": b"1", "g": b"2", "e/h": b"3"})
    denied(fs.mv("nope", "x"), "not-found")
    denied(fs.mv(".", "x"), "not-found")
    denied(fs.mv("g", "d"), "is-a-directory")
    denied(fs.mv("g", "."), "is-a-directory")
    denied(fs.mv("d", "g"), "not-a-directory")
    denied(fs.mv("d", "d/sub"), "bad-path")
    denied(fs.mv("g", "g/x"), "path-blocked")
    denied(fs.mv("e", "g/e"), "path-blocked")


def test_history_lists_prior_roots_and_checks_them_out(fs: Fs) -> None:
    one = ok(fs.write("a", b"1")).fs
    two = ok(one.write("a", b"2")).fs
    assert two.history == (fs.root, one.root)
    back = two.checkout(one.root)
    assert ok(back.read("a")).value == b"1"
    assert back.history == (fs.root, one.root, two.root)
    assert back.checkout(two.root).read("a").value == b"2"
    assert two.checkout(two.root) is two
    with pytest.raises(ValueError, match="not a root in this filesystem's history"):
        fs.checkout(two.root)


def test_an_accepted_no_op_does_not_grow_the_history(fs: Fs) -> None:
    one = ok(fs.write("a", b"1")).fs
    assert ok(one.write("a", b"1")).fs.history == one.history


def test_directory_blocks_round_trip_and_are_deterministic() -> None:
    entries = {"b": Entry(raw_cid(b"b"), 1), "a": Entry(cid_for(encode_dir({}), "dag-cbor"), 0)}
    block = encode_dir(entries)
    assert decode_dir(block) == entries
    assert encode_dir(dict(reversed(entries.items()))) == block


def test_to_unixfs_dir_gives_the_published_directory_cids(fs: Fs) -> None:
    assert to_unixfs_dir(fs) == EMPTY_DIR
    fs = tree(fs, {"hello.txt": b"hello world", "empty.bin": b""})
    fs = ok(fs.mkdir("a")).fs
    assert to_unixfs_dir(fs) == "bafybeid6jqwmliywbyogwc3fzvwikqxbqv4mxco4twaejjl6pqd7ck2x2q"


def test_the_fs_works_over_the_file_block_store(tmp_path: Path) -> None:
    with FileBlockStore(tmp_path / "blocks") as store:
        fs = Fs(store, Fs.empty(store).root, chunk_size=8, width=2)
        fs = tree(fs, {"a/b.bin": bytes(range(100))})
        assert ok(fs.read("a/b.bin")).value == bytes(range(100))
        assert ok(fs.read_range("a/b.bin", 30, 20)).value == bytes(range(30, 50))


_ANY_PATH = st.one_of(
    st.text(max_size=12), st.binary(max_size=4), st.integers(), st.none(), st.sampled_from(["a", "a/b"])
)


@settings(max_examples=150, deadline=None)
@given(op=st.sampled_from(["read", "ls", "stat", "rm", "mkdir", "walk"]), path=_ANY_PATH)
def test_no_path_makes_an_op_raise(op: str, path: object) -> None:
    store = MemoryBlockStore()
    fs = tree(Fs.empty(store), {"a/b": b"x"})
    result = getattr(fs, op)(path)
    assert set(result.receipt) <= set(RECEIPT_KEYS)
    assert result.ok or result.receipt["kuro.fs/reason"] in DENIAL_REASONS


@settings(max_examples=100, deadline=None)
@given(path=_ANY_PATH, dst=_ANY_PATH, data=st.one_of(st.binary(max_size=8), st.text(max_size=3), st.none()))
def test_no_input_makes_write_or_mv_raise(path: object, dst: object, data: object) -> None:
    store = MemoryBlockStore()
    fs = tree(Fs.empty(store), {"a/b": b"x"})
    for result in [fs.write(path, data), fs.mv(path, dst), fs.read_range(path, 0, 3)]:
        assert set(result.receipt) <= set(RECEIPT_KEYS)
        assert result.ok or result.receipt["kuro.fs/reason"] in DENIAL_REASONS


def test_mv_refuses_a_directory_move_that_would_put_a_path_below_it_past_4096_bytes(fs: Fs) -> None:
    # Each path mv names is checked, and so is every stored path below a directory moved somewhere longer:
    # otherwise the new root holds a file no kuro.fs call can name (Fs.read of it is bad-path).
    deep = "a/" + "/".join(["n" * 200] * 19) + "/" + "f" * 100  # 3,921 bytes
    fs = tree(fs, {deep: b"x"})
    assert denied(fs.mv("a", "b" * 200 + "/a"), "bad-path")["kuro.fs/path"] == "a"  # 4,122 bytes below it
    assert ok(fs.read(deep)).value == b"x"  # nothing moved
    moved = ok(fs.mv("a", "b" * 100 + "/a")).fs  # 4,022 bytes: still nameable
    assert ok(moved.read("b" * 100 + "/" + deep)).value == b"x"
    shorter = ok(fs.mv("a", "z")).fs  # a move to a shorter path walks nothing
    assert ok(shorter.read("z" + deep[1:])).value == b"x"
