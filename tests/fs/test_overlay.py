"""The overlay's rules one by one: refusals as errno values, handles as inodes, reads, and what a commit costs."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import DENIAL_REASONS, Fs
from kuro_fs.overlay import FS_REASON_ERRNO, Commit, DirEntry, Errno, Handle, Overlay, Stat
from kuro_fs.overlay_tree import STAGING
from kuro_fs.unixfs import iter_leaves


def make(files: dict[str, bytes | None] | None = None, **options: Any) -> tuple[Overlay, Fs]:
    fs = Fs.empty(MemoryBlockStore())
    for path, data in (files or {}).items():
        result = fs.mkdir(path) if data is None else fs.write(path, data)
        assert result.ok, result.receipt
        fs = result.fs
    return Overlay(fs, **options), fs


def handle(value: Handle | Errno) -> Handle:
    assert isinstance(value, Handle), value
    return value


def committed(ov: Overlay, ops: int | None = None) -> Fs:
    result = ov.commit()
    assert result.ok, result.denial
    if ops is not None:
        assert result.ops == ops
    return result.fs


def tree(fs: Fs) -> dict[str, bytes | None]:
    walk = fs.walk()
    assert walk.ok
    return {e["path"]: (fs.read(e["path"]).value if e["kind"] == "file" else None) for e in walk.value}


# ---- bad input first


@pytest.mark.parametrize("path", ["..", "../x", "a/../..", "/x", "/", "./../a"])
def test_a_path_that_leaves_its_directory_is_perm(path: str) -> None:
    ov, _ = make({"a/f": b"1"})
    assert ov.stat_path(path) is Errno.PERM
    assert ov.open(path, create=True) is Errno.PERM
    assert ov.mkdir(path) is Errno.PERM
    assert not ov.pending


def test_a_climb_inside_the_directory_is_fine_and_dot_is_the_directory_itself() -> None:
    ov, _ = make({"a/f": b"1"})
    a = handle(ov.open("a", directory=True))
    assert ov.stat_path("a/f/../f") is Errno.NOTDIR
    assert ov.stat_path("f/../a") is Errno.NOENT
    assert ov.stat_path("a/../a/f") == ov.stat_path("f", a)
    assert ov.stat_path("..", a) is Errno.PERM
    assert ov.stat_path(".", a) == ov.stat(a)


@pytest.mark.parametrize(
    ("path", "errno"),
    [("", Errno.NOENT), ("a\x00b", Errno.INVAL), ("n" * 256, Errno.NAMETOOLONG), ("d/" * 2100, Errno.NAMETOOLONG)],
)
def test_a_malformed_path_is_refused_with_its_errno(path: str, errno: Errno) -> None:
    ov, _ = make()
    for result in (ov.stat_path(path), ov.open(path, create=True), ov.mkdir(path), ov.unlink(path), ov.rmdir(path)):
        assert result is errno
    assert not ov.pending


def test_a_name_kuro_fs_cannot_hold_is_inval_to_create_and_absent_to_look_up() -> None:
    ov, _ = make()
    assert ov.open(" ", create=True) is Errno.INVAL
    assert ov.mkdir("\t") is Errno.INVAL
    assert ov.stat_path(" ") is Errno.NOENT
    assert ov.open("n" * 255, create=True) != Errno.NAMETOOLONG


def test_a_path_that_would_pass_4096_bytes_after_its_parent_is_nametoolong() -> None:
    ov, _ = make()
    deep = "/".join(["d" * 200] * 20)  # 4019 bytes
    assert all(ov.mkdir("/".join(["d" * 200] * i)) is None for i in range(1, 21))
    assert ov.mkdir(deep + "/" + "x" * 80) is Errno.NAMETOOLONG
    assert ov.open(deep + "/ok", create=True) != Errno.NAMETOOLONG


#: A chain below ``a`` whose deepest path is 4082 bytes: legal, but not one byte more than 14 further down.
_DEEP = "a/" + "/".join(["x" * 200] * 20) + "/" + "f" * 60


def test_a_directory_moved_so_that_a_stored_path_below_it_passes_4096_bytes_is_refused_at_commit() -> None:
    """The rename itself is allowed (as on Linux, whose limit is per call); the commit that would store a path
    no kuro.fs call can name is refused, ``bad-path``, with everything kept pending, until it is moved back."""
    ov, fs = make({_DEEP: b"hi", "a-much-longer-name": None})
    assert ov.rename("a", "a-much-longer-name/a") is None
    result = ov.commit()
    assert not result.ok and result.denial is not None
    assert result.denial["kuro.fs/reason"] == "bad-path"
    assert result.fs.root == fs.root and ov.pending
    assert ov.stat_path("a-much-longer-name/a/" + _DEEP[2:]) is Errno.NAMETOOLONG  # no path names it here either
    assert ov.rename("a-much-longer-name/a", "a") is None
    assert tree(committed(ov)) == tree(fs)


def test_a_swap_whose_staged_paths_would_pass_4096_bytes_commits_when_the_final_tree_is_legal() -> None:
    ov, _ = make({_DEEP: b"hi", "b": None})  # staging "a" passes 4096 bytes; its final place "b" does not
    assert [ov.rename("a", "t"), ov.rename("b", "a"), ov.rename("t", "b")] == [None, None, None]
    after = tree(committed(ov))
    assert after["b/" + _DEEP[2:]] == b"hi" and after["a"] is None


def test_a_closed_handle_is_badf_and_a_foreign_value_is_a_type_error() -> None:
    ov, _ = make({"f": b"x"})
    h = handle(ov.open("f"))
    assert ov.close(h) is None
    for result in (ov.read(h, 0, 1), ov.write(h, 0, b"y"), ov.stat(h), ov.set_size(h, 0), ov.close(h)):
        assert result is Errno.BADF
    assert ov.open("f", Handle(999)) is Errno.BADF
    with pytest.raises(TypeError):
        ov.stat(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ov.write(handle(ov.open("f")), 0, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ov.open(b"f")  # type: ignore[arg-type]


def test_negative_numbers_are_inval_and_sizes_past_the_limit_fbig() -> None:
    ov, _ = make({"f": b"x"}, max_file_size=100)
    h = handle(ov.open("f"))
    assert ov.read(h, -1, 1) is Errno.INVAL
    assert ov.read(h, 0, -1) is Errno.INVAL
    assert ov.write(h, -1, b"y") is Errno.INVAL
    assert ov.set_size(h, -1) is Errno.INVAL
    assert ov.read(h, True, 1) is Errno.INVAL  # a bool is not an offset
    assert ov.write(h, 99, b"ab") is Errno.FBIG
    assert ov.set_size(h, 101) is Errno.FBIG
    assert ov.write(h, 98, b"ab") == 2
    assert ov.read(h, 1, 97) == bytes(97)
    stat = ov.stat(h)
    assert isinstance(stat, Stat) and stat.size == 100


def test_file_operations_on_a_directory_are_isdir_and_readdir_of_a_file_notdir() -> None:
    ov, _ = make({"d": None, "f": b"x"})
    d = handle(ov.open("d"))
    assert ov.read(d, 0, 1) is Errno.ISDIR
    assert ov.write(d, 0, b"x") is Errno.ISDIR
    assert ov.set_size(d, 0) is Errno.ISDIR
    assert ov.open("d", truncate=True) is Errno.ISDIR
    assert ov.open("d", create=True) is Errno.ISDIR
    assert ov.open("f", directory=True) is Errno.NOTDIR
    assert ov.open("f/") is Errno.NOTDIR
    assert ov.readdir(handle(ov.open("f"))) is Errno.NOTDIR
    assert ov.unlink("d") is Errno.ISDIR
    assert ov.rmdir("f") is Errno.NOTDIR


def test_every_kuro_fs_denial_reason_reads_as_an_errno() -> None:
    assert set(FS_REASON_ERRNO) == set(DENIAL_REASONS)


# ---- namespace rules (POSIX; the real-directory machine checks these against Linux too)


def test_rename_follows_the_posix_rules() -> None:
    ov, _ = make({"f": b"1", "g": b"2", "d/x": b"3", "e": None, "full/y": b"4"})
    assert ov.rename("f", "d") is Errno.ISDIR
    assert ov.rename("d", "f") is Errno.NOTDIR
    assert ov.rename("d", "full") is Errno.NOTEMPTY
    assert ov.rename("d", "d/sub") is Errno.INVAL
    assert ov.rename(".", "z") is Errno.BUSY
    assert ov.rename("nope", "z") is Errno.NOENT
    assert ov.rename("f", "nodir/z") is Errno.NOENT
    assert ov.rename("f", "f") is None
    assert ov.rename("d", "e") is None  # a directory replaces an empty one
    assert ov.rename("f", "g") is None  # a file replaces a file
    assert tree(committed(ov)) == {"e": None, "e/x": b"3", "full": None, "full/y": b"4", "g": b"1"}


def test_mkdir_rmdir_and_unlink_follow_the_posix_rules() -> None:
    ov, _ = make({"d/x": b"1", "e": None})
    assert ov.mkdir("d") is Errno.EXIST
    assert ov.mkdir(".") is Errno.EXIST
    assert ov.mkdir("no/such") is Errno.NOENT
    assert ov.rmdir("d") is Errno.NOTEMPTY
    assert ov.rmdir(".") is Errno.INVAL
    assert ov.rmdir("e/..") is Errno.INVAL  # as wasmtime's WASI; Linux says NOTEMPTY
    assert ov.rmdir("e/") is Errno.INVAL  # as wasmtime's WASI; Linux removes it
    assert ov.unlink("d/x/") is Errno.NOTDIR
    assert ov.unlink("d/x") is None
    assert ov.rmdir("d") is None
    assert ov.rmdir("e") is None
    assert tree(committed(ov)) == {}


def test_create_exclusive_and_truncate() -> None:
    ov, _ = make({"f": b"hello"})
    assert ov.open("f", create=True, exclusive=True) is Errno.EXIST
    assert ov.open("new/", create=True) is Errno.ISDIR
    h = handle(ov.open("f", truncate=True))
    assert ov.read(h, 0, 10) == b""
    assert ov.write(h, 2, b"x") == 1
    assert ov.read(h, 0, 10) == b"\0\0x"
    assert tree(committed(ov)) == {"f": b"\0\0x"}


def test_a_removed_directory_takes_no_new_entries() -> None:
    ov, _ = make({"d": None})
    d = handle(ov.open("d"))
    assert ov.rmdir("d") is None
    assert ov.open("x", d, create=True) is Errno.NOENT
    assert ov.mkdir("y", d) is Errno.NOENT
    assert ov.readdir(d) == []


# ---- handles are inodes


def test_an_unlinked_open_file_stays_usable_and_is_not_committed() -> None:
    ov, _ = make({"f": b"base"})
    h = handle(ov.open("f"))
    assert ov.unlink("f") is None
    assert ov.write(h, 4, b"+more") == 5
    assert ov.read(h, 0, 100) == b"base+more"
    assert ov.stat_path("f") is Errno.NOENT
    assert tree(committed(ov, ops=1)) == {}
    assert ov.read(h, 0, 100) == b"base+more"
    assert ov.close(h) is None
    assert ov.pending_bytes == 0


def test_an_open_file_follows_renames_and_keeps_its_writes_across_commits() -> None:
    ov, _ = make({"a/f": b"one"})
    h = handle(ov.open("a/f"))
    assert ov.rename("a", "b") is None
    assert ov.write(h, 3, b" two") == 4
    assert tree(committed(ov)) == {"b": None, "b/f": b"one two"}
    assert ov.rename("b/f", "g") is None
    assert ov.write(h, 7, b" three") == 6
    assert tree(committed(ov)) == {"b": None, "g": b"one two three"}


def test_inode_numbers_identify_entries_not_contents() -> None:
    ov, fs = make({"e1": b"", "e2": b"", "d/x": b"1"})
    one, two = ov.stat_path("e1"), ov.stat_path("e2")
    assert isinstance(one, Stat) and isinstance(two, Stat)
    assert one.ino != two.ino  # equal (empty) contents, one CID, two files
    h = handle(ov.open("e1"))
    assert ov.stat(h) == one
    assert ov.rename("e1", "d/moved") is None
    assert ov.stat_path("d/moved") == one
    committed(ov)
    assert ov.stat_path("d/moved") == one
    listing = ov.readdir(handle(ov.open("d")))
    assert isinstance(listing, list)
    assert DirEntry("moved", "file", one.ino) in listing
    again = Overlay(fs)  # the same tree gives the same numbers: they are derived, not allocated
    assert again.stat_path("e2") == two and again.stat_path("e1") == one


def test_reads_name_the_stored_files_whose_bytes_reached_the_reader() -> None:
    ov, fs = make({"a": b"AAAA", "b": b"BBBB", "c": b"CCCC"})
    cid = {p: fs.stat(p).value["cid"] for p in "abc"}
    a, b = handle(ov.open("a")), handle(ov.open("b"))
    assert ov.read(b, 10, 5) == b""  # nothing returned: nothing read
    assert ov.write(b, 0, b"bbbb") == 4
    assert ov.read(b, 0, 4) == b"bbbb"  # only the writer's own pending bytes
    assert ov.read(a, 1, 2) == b"AA"
    assert ov.reads == (cid["a"],)
    new = handle(ov.open("n", create=True))
    ov.write(new, 0, b"new")
    fs2 = committed(ov)
    assert ov.read(new, 0, 3) == b"new"
    assert ov.reads == (cid["a"], fs2.stat("n").value["cid"])


@pytest.mark.parametrize("then_cut", [False, True], ids=["folded", "folded-then-cut"])
def test_stored_bytes_folded_early_into_a_leaf_still_name_their_file_when_they_are_read(then_cut: bool) -> None:
    """Pending bytes past the budget are folded into leaf blocks with the stored bytes beneath them: a read of such a
    leaf reads the stored file, and so does a read of what a cut kept of it."""
    ov, fs = make({"F": bytes(range(256)) * 2048}, max_pending_bytes=1000)  # 512 KiB: two chunks
    f = handle(ov.open("F"))
    assert ov.write(f, 0, b"Z") == 1
    g = handle(ov.open("G", create=True))
    assert ov.write(g, 1, b"y" * 2000) == 2000  # past the budget: F's first chunk is folded over its stored bytes
    assert ov.pending_bytes == 0 and ov.reads == ()  # (and, that not being enough, G's partial one too)
    if then_cut:
        assert ov.set_size(f, 100) is None
        assert ov.set_size(f, 300000) is None  # grown again: zeros past the cut, as ever
        assert ov.read(f, 99, 2) == b"c\0"
    assert ov.read(f, 0, 4) == b"Z\x01\x02\x03"
    assert ov.reads == (fs.stat("F").value["cid"],)


# ---- commit


def test_commit_with_nothing_pending_returns_the_same_fs_and_no_ops() -> None:
    ov, fs = make({"a": b"1"})
    ov.read(handle(ov.open("a")), 0, 1)
    assert ov.commit() == Commit(fs, 0)
    h = handle(ov.open("b", create=True))
    assert ov.unlink("b") is None and ov.close(h) is None
    assert ov.commit().fs is fs


@pytest.mark.parametrize(
    ("steps", "ops"),
    [
        ([("write", "f", b"x" * 5000)], 1),
        ([("rename", "a", "b")], 1),
        ([("rename", "dir", "moved")], 1),
        ([("rename", "dir", "sub/deeper/moved")], 1),
        ([("unlink", "a", None)], 1),
        ([("mkdir", "empty", None)], 1),
        ([("mkdir", "new", None), ("write", "new/f", b"1")], 1),
        ([("write", "a", b"x"), ("rename", "a", "b")], 2),  # b is new bytes (link) and a goes (rm)
        ([("write", "t", b"v2"), ("rename", "t", "a")], 1),  # the atomic-save pattern
        ([("rename", "a", "dir/a"), ("rename", "dir", "d2")], 3),  # mv dir, then a: rm + link
    ],
)
def test_a_commit_costs_one_fs_operation_per_changed_entry(steps: list[tuple[str, str, Any]], ops: int) -> None:
    ov, _ = make({"a": b"1", "dir/x": b"2", "sub/deeper": None})
    for kind, path, arg in steps:
        if kind == "write":
            h = handle(ov.open(path, create=True))
            for i in range(0, len(arg), 7):  # many small writes, still one operation
                assert ov.write(h, i, arg[i : i + 7]) == len(arg[i : i + 7])
        elif kind == "rename":
            assert ov.rename(path, arg) is None
        elif kind == "unlink":
            assert ov.unlink(path) is None
        else:
            assert ov.mkdir(path) is None
    committed(ov, ops=ops)


def test_swapping_two_directories_goes_through_staging_and_leaves_no_trace() -> None:
    ov, _ = make({"x/1": b"one", "y/2": b"two"})
    assert ov.rename("x", "t") is None
    assert ov.rename("y", "x") is None
    assert ov.rename("t", "y") is None
    fs = committed(ov)
    assert tree(fs) == {"x": None, "x/2": b"two", "y": None, "y/1": b"one"}
    assert STAGING not in str(tree(fs))


def test_swapping_two_files_keeps_both_contents() -> None:
    ov, _ = make({"a": b"AAA", "b": b"BBB"})
    assert ov.rename("a", "t") is None and ov.rename("b", "a") is None and ov.rename("t", "b") is None
    assert tree(committed(ov)) == {"a": b"BBB", "b": b"AAA"}


def test_the_staging_name_steps_aside_for_an_entry_of_that_name() -> None:
    ov, _ = make({STAGING: b"mine", "x/1": b"1", "y/2": b"2"})
    assert ov.rename("x", "t") is None and ov.rename("y", "x") is None and ov.rename("t", "y") is None
    assert tree(committed(ov)) == {STAGING: b"mine", "x": None, "x/2": b"2", "y": None, "y/1": b"1"}


def test_a_commit_the_grant_refuses_changes_nothing_and_keeps_everything_pending() -> None:
    ov, fs = make({"f": b"1", "g": b"2"})
    narrowed = Overlay(fs.with_grant(["fs/ls", "fs/read", "fs/write"]))
    assert narrowed.unlink("f") is None
    h = handle(narrowed.open("g"))
    narrowed.write(h, 0, b"changed")
    result = narrowed.commit()
    assert not result.ok and result.denial is not None
    assert result.denial["kuro.fs/reason"] == "missing-capability"
    assert result.fs is narrowed.fs and narrowed.fs.root == fs.root
    assert narrowed.pending and narrowed.stat_path("f") is Errno.NOENT
    assert narrowed.read(h, 0, 10) == b"changed"
    assert ov.commit().fs is fs


def test_a_missing_base_block_is_io_on_read_and_a_refused_commit() -> None:
    store = MemoryBlockStore()
    fs = Fs.empty(store).write("big", bytes(range(256)) * 2000).fs
    leaves = [cid for _, cid, _ in iter_leaves(store.get, fs.stat("big").value["cid"])]
    assert len(leaves) == 2
    ov = Overlay(fs)
    h = handle(ov.open("big"))
    for cid in leaves:
        store.delete(cid)
    assert ov.read(h, 0, 10) is Errno.IO
    assert ov.write(h, 5, b"x") == 1
    result = ov.commit()
    assert result.denial is not None and result.denial["kuro.fs/reason"] == "block-missing"
    assert ov.pending


def test_pending_bytes_stay_within_the_budget_as_whole_chunks_are_folded() -> None:
    ov, fs = make(max_pending_bytes=300_000)
    handles = [handle(ov.open(name, create=True)) for name in "abc"]
    for h in handles:
        assert ov.set_size(h, 4 * 262144) is None  # every chunk whole, so every chunk may be folded
    for i in range(0, 1_000_000, 10_000):  # interleaved, scattered writes into three files
        for n, h in enumerate(handles):
            assert ov.write(h, (i * 7 + n * 333_333) % 1_000_000, bytes([n + 1]) * 10_000) == 10_000
            assert ov.pending_bytes <= 300_000
    before = {n: ov.read(h, 0, 2_000_000) for n, h in zip("abc", handles, strict=True)}
    fs = committed(ov, ops=3)
    for name, data in before.items():
        assert fs.read(name).value == data
    assert ov.pending_bytes == 0


def test_scattered_one_byte_writes_are_charged_their_bookkeeping_so_the_budget_bounds_host_memory(
    tmp_path: Path,
) -> None:
    """Each pending run costs ~105 bytes besides its bytes: 50 000 one-byte writes a few bytes apart held
    5.3 MB while ``pending_bytes`` said 50 000, under a 1 MiB budget that was never reached. The budget is
    charged what the host holds (:attr:`Overlay.held_bytes`), so folding starts in time. (Blocks go to a
    store on disk, so what is traced is what the overlay holds.)"""
    budget = 1 << 20
    ov = Overlay(Fs.empty(FileBlockStore(tmp_path / "blocks")), max_pending_bytes=budget)
    h = handle(ov.open("f", create=True))
    model = bytearray(200_003)
    assert ov.set_size(h, len(model)) is None
    tracemalloc.start()
    try:
        for i in range(50_000):
            offset = i * 4 if i % 2 else 200_000 - i * 4
            assert ov.write(h, offset, b"x") == 1
            model[offset] = ord("x")
            assert ov.held_bytes <= budget
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < budget + (1 << 20), held  # the budget, a chunk being folded, slack
    assert ov.read(h, 0, len(model)) == bytes(model)
    assert committed(ov).read("f").value == bytes(model)


def test_many_files_each_holding_a_partial_chunk_are_folded_too_so_the_budget_bounds_them_all(
    tmp_path: Path,
) -> None:
    """A file's partial last chunk, one run, stays pending so an appender is not re-stored at every fold; but
    60 files of 100 KB each (less than a 256 KiB chunk) held 6 MB under a 1 MiB budget no fold could meet.
    When whole chunks are not enough, the partial ones are folded too."""
    budget = 1 << 20
    ov = Overlay(Fs.empty(FileBlockStore(tmp_path / "blocks")), max_pending_bytes=budget)
    files = {f"f{n}": bytes([n]) * 100_000 for n in range(60)}
    tracemalloc.start()
    try:
        for name, data in files.items():
            h = handle(ov.open(name, create=True))
            for at in range(0, len(data), 10_000):  # appended in pieces, as a program writes
                assert ov.write(h, at, data[at : at + 10_000]) == 10_000
                assert ov.held_bytes <= budget
            assert ov.close(h) is None
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < budget + (1 << 20), held
    fs = committed(ov)
    assert all(fs.read(name).value == data for name, data in files.items())
