"""CARv1: exact bytes out (depth-first pre-order, each block once), strict and all-or-nothing in."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fshelpers import LateSecondPut, PlainStore, ctrl_c_at_second_pool_thread, main_thread_in

from kuro_fs import car
from kuro_fs.blocks import MemoryBlockStore, active_batch
from kuro_fs.car import PUT_RUN_BYTES, dag_blocks, export_car, import_car, links_of, read_car, write_car
from kuro_fs.cid import cid_bytes, cid_for, raw_cid
from kuro_fs.dagcbor import Link, encode
from kuro_fs.dagpb import encode_uvarint
from kuro_fs.errors import CarError
from kuro_fs.fileread import read_file
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.unixfs import MissingBlock, write_file

VECTORS: dict[str, Any] = json.loads((Path(__file__).parent.parent / "vectors" / "unixfs.json").read_text())
EMPTY = raw_cid(b"")


def car_of(roots: list[str], blocks: list[tuple[str, bytes]]) -> bytes:
    return b"".join(write_car(roots, blocks))


def header(value: Any) -> bytes:
    raw = encode(value)
    return encode_uvarint(len(raw)) + raw


def section(cid_bin: bytes, data: bytes) -> bytes:
    return encode_uvarint(len(cid_bin) + len(data)) + cid_bin + data


GOOD_HEADER = header({"roots": [Link(EMPTY)], "version": 1})
#: The good header with ``version`` written as the float 1.0 (fb 3ff0…), which kuro's encoder refuses to write.
_FLOAT_VERSION = b"\x42" + GOOD_HEADER[1:].replace(b"\x67version\x01", b"\x67version\xfb\x3f\xf0" + bytes(6))


# ---- bad input first


@pytest.mark.parametrize(
    "blob, rule",
    [
        (b"", "empty file"),
        (b"\x00", "header length 0"),
        (b"\x80", "truncated varint"),
        (b"\x81\x00", "non-minimal"),
        (b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
        (encode_uvarint(1 << 40), "header length .* out of range"),
        (b"\x05\xa0", "truncated header"),
        (b"\x02\xff\xff", "not dag-cbor"),
        (header([1]), "not a dag-cbor map"),
        (header({"roots": [Link(EMPTY)], "version": 2}), "unsupported CAR version 2"),
        (header({"roots": [Link(EMPTY)], "version": True}), "unsupported CAR version True"),  # true == 1 in Python
        (_FLOAT_VERSION, "unsupported CAR version 1.0"),  # the spec's version is an Int
        (header({"version": 1}), "exactly"),
        (header({"roots": [], "version": 1}), "zero roots"),
        (header({"roots": ["x"], "version": 1}), "non-empty list of CIDs"),
        (header({"roots": [Link(EMPTY)], "version": 1, "x": 1}), "exactly"),
        (GOOD_HEADER + b"\x80", "truncated varint"),
        (GOOD_HEADER + b"\x00", "section length 0"),
        (GOOD_HEADER + b"\xff" * 10, "longer than 10 bytes"),
        (GOOD_HEADER + encode_uvarint(1 << 40), "section length .* out of range"),
        (GOOD_HEADER + section(cid_bytes(EMPTY), b"") + b"\x30", "truncated section"),
        (GOOD_HEADER + b"\x30" + cid_bytes(EMPTY), "truncated section"),
        (GOOD_HEADER + section(b"\x12\x20" + bytes(32), b""), "does not hash to its CID Qm"),
        (GOOD_HEADER + section(b"\x12\x20" + bytes(31), b""), "bad CID.*truncated digest in binary CIDv0"),
        (GOOD_HEADER + section(b"\x01\x72\x12\x20" + bytes(32), b""), "bad CID.*unsupported codec 0x72"),
        (GOOD_HEADER + section(b"\x01\x55\x11\x14" + bytes(20), b""), "bad CID.*unsupported multihash 0x11"),
        (GOOD_HEADER + section(b"\x01\x55\x13\x40" + bytes(64), b""), "does not hash to its CID bafkrg"),
        (GOOD_HEADER + section(b"\x01\x55\x12\x20" + bytes(10), b""), "bad CID.*truncated"),
        (GOOD_HEADER + section(b"\x01\x55\x12", b""), "bad CID"),
        (GOOD_HEADER + section(cid_bytes(EMPTY), b"x"), "does not hash to its CID"),
    ],
)
def test_malformed_cars_are_refused_with_a_clear_error(blob: bytes, rule: str) -> None:
    with pytest.raises(CarError, match=rule):
        _roots, sections = read_car(io.BytesIO(blob))
        list(sections)


def test_a_car_needs_a_root() -> None:
    with pytest.raises(CarError, match="at least one root"):
        car_of([], [])


def test_a_tampered_car_imports_nothing(tmp_path: Path) -> None:
    src = MemoryBlockStore()
    root = write_file(src.put, bytes(range(256)) * 40, chunk_size=1000, width=3).cid
    path = tmp_path / "f.car"
    export_car(src, root, path)
    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0x01  # a byte inside the last leaf
    path.write_bytes(bytes(blob))
    dst = MemoryBlockStore()
    with pytest.raises(CarError, match="does not hash"):
        import_car(dst, path)
    assert dst.stats() == {"blocks": 0, "bytes": 0}


def test_a_truncated_car_imports_nothing(tmp_path: Path) -> None:
    src = MemoryBlockStore()
    root = write_file(src.put, bytes(5000), chunk_size=1000).cid
    path = tmp_path / "f.car"
    export_car(src, root, path)
    path.write_bytes(path.read_bytes()[:-3])
    dst = MemoryBlockStore()
    with pytest.raises(CarError, match="truncated"):
        import_car(dst, path)
    assert dst.stats()["blocks"] == 0


def test_exporting_a_dag_with_a_missing_block_leaves_no_file(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, bytes(range(200)) * 10, chunk_size=500).cid
    store.delete(cid_for(bytes(range(200)) * 2 + bytes(range(100)), "raw"))
    with pytest.raises(MissingBlock):
        export_car(store, root, tmp_path / "x.car")
    assert list(tmp_path.iterdir()) == []


# ---- exact bytes


@pytest.mark.parametrize("vector", VECTORS["cars"], ids=lambda v: v["what"])
def test_car_bytes_match_the_published_sizes(vector: dict[str, Any], tmp_path: Path) -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, bytes(vector["size"])).cid
    path = tmp_path / "v.car"
    assert export_car(store, root, path) == vector["blocks"]
    blob = path.read_bytes()
    assert len(blob) == vector["car_bytes"]
    assert blob[:1] == b"\x3a" and blob[1:8] == bytes.fromhex("a265726f6f7473")


def test_the_empty_file_car_is_a_header_and_one_empty_section() -> None:
    blob = car_of([EMPTY], [(EMPTY, b"")])
    assert blob == GOOD_HEADER + b"\x24" + cid_bytes(EMPTY)
    assert GOOD_HEADER[:1] == b"\x3a" and len(GOOD_HEADER) == 59


def test_blocks_are_written_depth_first_pre_order_each_once() -> None:
    store = MemoryBlockStore()
    data = b"aaaabbbbaaaacccc"  # leaves: a, b, a, c (a repeats)
    root = write_file(store.put, data, chunk_size=4, width=2).cid
    order = [cid for cid, _ in dag_blocks(store.get, root)]
    left, right = links_of(root, store.get(root) or b"")
    a, b = links_of(left, store.get(left) or b"")
    a2, c = links_of(right, store.get(right) or b"")
    assert a == a2
    assert order == [root, left, a, b, right, c]


def test_dag_cbor_links_are_followed_in_key_order(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    fs = fs.write("b/x", b"x").fs.write("a", b"a").fs
    cids = [cid for cid, _ in dag_blocks(store.get, fs.root)]
    a_cid, b_dir = raw_cid(b"a"), fs.stat("b").value["cid"]
    assert cids == [fs.root, a_cid, b_dir, raw_cid(b"x")]


# ---- round trips


def test_an_fs_exports_and_imports_whole(tmp_path: Path) -> None:
    src = MemoryBlockStore()
    fs = Fs(src, Fs.empty(src).root, chunk_size=64, width=3)
    fs = fs.write("docs/big.bin", bytes(range(256)) * 9).fs.write("docs/e", b"").fs.mkdir("empty").fs
    path = tmp_path / "fs.car"
    n = export_car(fs, path)
    assert n == len(list(dag_blocks(src.get, fs.root)))
    dst = MemoryBlockStore()
    assert import_car(dst, path) == [fs.root]
    back = Fs(dst, fs.root)
    assert back.read("docs/big.bin").value == bytes(range(256)) * 9
    assert [e["path"] for e in back.walk().value] == [e["path"] for e in fs.walk().value]


def test_an_export_onto_a_symlink_or_a_fifo_writes_through_it_and_keeps_it(tmp_path: Path) -> None:
    # The export replaced its target by a renamed temporary file, whatever the target was: onto a
    # symlink it replaced the link (``kuro car export /dev/stdout`` as root replaced /dev/stdout with a
    # regular file; /dev/full too), onto a FIFO the FIFO, and nothing read the CAR.
    store = MemoryBlockStore()
    root = write_file(store.put, b"x" * 100, chunk_size=40, width=2).cid
    expected = car_of([root], list(dag_blocks(store.get, root)))
    (tmp_path / "real").write_bytes(b"old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert export_car(store, root, tmp_path / "link") == 5
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_bytes() == expected
    got: list[bytes] = []
    os.mkfifo(tmp_path / "pipe")
    reader = threading.Thread(target=lambda: got.append((tmp_path / "pipe").read_bytes()))
    reader.start()
    assert export_car(store, root, tmp_path / "pipe") == 5
    reader.join()
    assert got == [expected] and stat.S_ISFIFO((tmp_path / "pipe").lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "pipe", "real"]


def test_an_export_onto_a_directory_names_the_directory(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    root = store.put(b"x")
    with pytest.raises(IsADirectoryError) as raised:
        export_car(store, root, tmp_path)
    assert raised.value.filename == str(tmp_path)  # not the temporary file the export wrote first
    assert list(tmp_path.iterdir()) == []


def test_export_accepts_an_fs_given_with_an_explicit_root(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    fs = Fs.empty(store).write("a", b"hello").fs
    export_car(fs, raw_cid(b"hello"), tmp_path / "a.car")
    dst = MemoryBlockStore()
    assert import_car(dst, tmp_path / "a.car") == [raw_cid(b"hello")]
    assert read_file(dst, raw_cid(b"hello")) == b"hello"


def test_export_car_needs_an_fs_when_given_two_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="needs an Fs"):
        export_car(MemoryBlockStore(), tmp_path / "x.car")


def test_read_car_gives_roots_and_verified_blocks_lazily() -> None:
    blob = car_of([EMPTY, raw_cid(b"x")], [(EMPTY, b""), (raw_cid(b"x"), b"x")])
    roots, sections = read_car(io.BytesIO(blob))
    assert roots == [EMPTY, raw_cid(b"x")]
    assert list(sections) == [(EMPTY, b""), (raw_cid(b"x"), b"x")]


# ---- import: one pass, all or nothing, on every kind of store


def _tree_car(tmp_path: Path) -> tuple[Path, str, MemoryBlockStore]:
    src = MemoryBlockStore()
    root = write_file(src.put, bytes(range(256)) * 40, chunk_size=1000, width=3).cid
    path = tmp_path / "tree.car"
    export_car(src, root, path)
    return path, root, src


def _stores(tmp_path: Path) -> list[Any]:
    return [MemoryBlockStore(), FileBlockStore(tmp_path / "blocks"), PlainStore()]


def _held(store: Any) -> int:
    inner = store.inner if isinstance(store, PlainStore) else store
    blocks: int = inner.stats()["blocks"]
    return blocks


def test_a_tampered_car_imports_nothing_into_any_store(tmp_path: Path) -> None:
    path, _, _ = _tree_car(tmp_path)
    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0x01
    path.write_bytes(bytes(blob))
    for store in _stores(tmp_path):
        with pytest.raises(CarError, match="does not hash"):
            import_car(store, path)
        assert _held(store) == 0
    assert not any(p.name.startswith(".batch-") for p in (tmp_path / "blocks").iterdir())


def test_a_good_car_imports_whole_into_any_store(tmp_path: Path) -> None:
    path, root, src = _tree_car(tmp_path)
    for store in _stores(tmp_path):
        assert import_car(store, path) == [root]
        assert _held(store) == src.stats()["blocks"]
        assert read_file(store, root) == bytes(range(256)) * 40


def _fifo_feed(path: Path, payload: bytes) -> threading.Thread:
    os.mkfifo(path)

    def feed() -> None:
        with open(path, "wb") as pipe:
            pipe.write(payload)

    thread = threading.Thread(target=feed)
    thread.start()
    return thread


def test_import_car_reads_its_file_once_so_a_named_pipe_works(tmp_path: Path) -> None:
    path, root, src = _tree_car(tmp_path)
    for n, store in enumerate(_stores(tmp_path)):
        feeder = _fifo_feed(tmp_path / f"pipe{n}", path.read_bytes())
        assert import_car(store, tmp_path / f"pipe{n}") == [root]
        feeder.join()
        assert _held(store) == src.stats()["blocks"]


def test_a_car_that_turns_bad_while_it_is_read_imports_nothing(tmp_path: Path) -> None:
    # What the two-pass import got wrong: bytes that change after the check. Here the stream itself
    # is good for most of its length and bad at the end; nothing of it may be visible afterwards.
    path, _, _ = _tree_car(tmp_path)
    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0x01
    for n, store in enumerate(_stores(tmp_path)):
        feeder = _fifo_feed(tmp_path / f"pipe{n}", bytes(blob))
        with pytest.raises(CarError):
            import_car(store, tmp_path / f"pipe{n}")
        feeder.join()
        assert _held(store) == 0


_IMPORTER = """
import sys
from kuro_fs.car import import_car
from kuro_fs.filestore import FileBlockStore
import_car(FileBlockStore(sys.argv[1]), sys.argv[2])
"""


def test_an_import_killed_midway_leaves_no_visible_block_and_its_staging_is_swept(tmp_path: Path) -> None:
    blocks = [(raw_cid(b"%06d" % i), b"%06d" % i) for i in range(3000)]
    payload = car_of([blocks[0][0]], blocks)
    pipe, root = tmp_path / "pipe", tmp_path / "blocks"
    os.mkfifo(pipe)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", _IMPORTER, str(root), str(pipe)], env=env)
    try:
        with open(pipe, "wb") as feed:
            feed.write(payload[: len(payload) // 2])
            feed.flush()
            staged: list[Path] = []
            for _ in range(3000):  # wait (up to ~30 s) until the child has staged blocks, then kill it
                staged = list(root.glob(".batch-*/*/*")) if root.exists() else []
                if len(staged) > 100:
                    break
                time.sleep(0.01)
            assert len(staged) > 100
            child.kill()
            child.wait()
    except BrokenPipeError:  # pragma: no cover - the child died first; the assertions below tell
        pass
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    store = FileBlockStore(root)
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert store.get(blocks[0][0]) is None
    assert len(list(root.glob(".batch-*"))) == 1
    with store.batch():
        store.put(b"after")
    assert list(root.glob(".batch-*")) == []
    assert store.cids() == [raw_cid(b"after")]


class _Discarding(MemoryBlockStore):
    """A store with batches that keeps no block (so the memory an import holds is the import's own)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0
        self._count = threading.Lock()

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        with self._count:
            self.puts += 1
        return ""


def test_an_import_holds_a_bounded_number_of_block_bytes_whatever_the_block_size(tmp_path: Path) -> None:
    # The parser handed the workers runs of 512 sections whatever their size: a CAR of 256 KiB leaves
    # held ~768 MB in flight, one of 1 MiB blocks 3 GB, and the 256 MiB sections a CAR may hold 768 GB.
    blocks = [(raw_cid(data), data) for data in (i.to_bytes(4, "big") * (16 * 1024) for i in range(1200))]
    path = tmp_path / "big-blocks.car"
    path.write_bytes(car_of([blocks[0][0]], blocks))  # 1200 blocks of 64 KiB: 75 MiB
    store = _Discarding()
    tracemalloc.start()
    try:
        import_car(store, path, workers=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert store.puts == 1200
    assert peak < (2 * 2 + 2) * PUT_RUN_BYTES + (2 << 20)  # the runs in flight, the one being read, a buffer


def test_a_ctrl_c_while_a_worker_starts_still_waits_for_that_workers_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The import_path defect, in import_car too: ThreadPoolExecutor joins a thread only once its start has
    # returned, so a Ctrl-C landing in that start left the thread's run going, and its put landed after
    # the import's batch was discarded: a block of an interrupted import became visible.
    blocks = [(raw_cid(b"car %d" % i), b"car %d" % i) for i in range(6)]
    path = tmp_path / "six.car"
    path.write_bytes(car_of([blocks[0][0]], blocks))
    monkeypatch.setattr(car, "PUT_RUN", 2)
    store: LateSecondPut

    def settle() -> None:  # until the import waits for its threads, or (the defect) its batch has ended
        batch = active_batch(store)
        for _ in range(1000):
            if main_thread_in("_join") or batch is None or not batch.open:
                return
            time.sleep(0.01)

    store = LateSecondPut(tmp_path / "store", b"car 0", b"car 2", settle)
    starts = ctrl_c_at_second_pool_thread(monkeypatch, lambda: store.in_second.wait(10))  # the thread is in a put
    with pytest.raises(KeyboardInterrupt):
        import_car(store, path, workers=2)
    assert len(starts) == 2
    assert store.ended.is_set()
    assert store.stats()["blocks"] == 0


def _foreign_node(links: list[tuple[str, str | None, int | None]], data: bytes) -> bytes:
    # A dag-pb block as another writer may make it: each link's Name and Tsize only when given.
    out = b""
    for cid, name, tsize in links:
        body = b"\x0a" + encode_uvarint(36) + cid_bytes(cid)
        if name is not None:
            body += b"\x12" + encode_uvarint(len(name)) + name.encode()
        if tsize is not None:
            body += b"\x18" + encode_uvarint(tsize)
        out += b"\x12" + encode_uvarint(len(body)) + body
    return out + b"\x0a" + encode_uvarint(len(data)) + data


def test_a_foreign_dag_whose_links_omit_name_and_tsize_imports_reads_and_exports_byte_for_byte(
    tmp_path: Path,
) -> None:
    # The dag-pb spec makes PBLink Name and Tsize optional: a file and a directory written that way read, and
    # export as the very blocks that came in (same bytes, same CIDs, same CAR).
    a, b = b"alpha-" * 100, b"beta"
    leaves = [(raw_cid(a), a), (raw_cid(b), b)]
    file_data = bytes.fromhex("0802") + b"\x18" + encode_uvarint(len(a + b))
    file_data += b"".join(b"\x20" + encode_uvarint(len(x)) for x in (a, b))
    file_block = _foreign_node([(leaves[0][0], None, None), (leaves[1][0], None, 4)], file_data)
    file_cid = cid_for(file_block, "dag-pb")
    dir_block = _foreign_node([(file_cid, "f", None)], bytes.fromhex("0801"))
    dir_cid = cid_for(dir_block, "dag-pb")
    blocks = [(dir_cid, dir_block), (file_cid, file_block), *leaves]
    source = tmp_path / "in.car"
    source.write_bytes(car_of([dir_cid], blocks))
    store = MemoryBlockStore()
    assert import_car(store, source) == [dir_cid]
    assert read_file(store, file_cid) == a + b
    fs = Fs.empty(store).link("f", file_cid).fs
    assert fs.read("f").value == a + b and fs.read_range("f", 598, 4).value == b"a-be"
    out = tmp_path / "out.car"
    assert export_car(store, dir_cid, out) == 4
    assert out.read_bytes() == source.read_bytes()
