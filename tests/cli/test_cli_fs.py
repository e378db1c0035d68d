"""``kuro fs``, ``kuro car`` and ``kuro cid`` over a named root kept in the home."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ROOT, Kuro, one_error_line
from dagkit import diamond_file

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import export_car, write_car
from kuro_fs.cid import ParsedCID
from kuro_fs.fsdir import Entry, encode_dir, write_dir
from kuro_fs.importer import import_path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.txt").write_text("beta\n")
    return root


def _log(kuro: Kuro, *name: str) -> list[list[str]]:
    result = kuro("fs", "log", *name)
    assert result.returncode == 0, result.stderr
    return [line.lstrip("* ").split(maxsplit=3) for line in result.stdout.splitlines()]


def test_put_imports_a_tree_and_ls_cat_show_it(kuro: Kuro, tree: Path) -> None:
    put = kuro("fs", "put", str(tree))
    assert put.returncode == 0, put.stderr
    assert put.stdout.split()[1] == "tree"
    assert kuro("fs", "ls").stdout == "tree/\n"
    assert kuro("fs", "ls", "tree").stdout == "a.txt\nsub/\n"
    assert kuro("fs", "cat", "tree/sub/b.txt").stdout == "beta\n"


def test_a_put_file_has_the_cid_the_importer_and_kuro_cid_give(kuro: Kuro, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(700_000))  # three chunks: a dag-pb root
    expected = import_path(MemoryBlockStore(), big)
    put = kuro("fs", "put", str(big), "data/big.bin")
    assert put.stdout.split() == [expected, "data/big.bin"]
    assert kuro("cid", str(big)).stdout.split() == [expected, str(big)]
    assert kuro("fs", "ls", "-l", "data").stdout.split() == ["700000", expected, "big.bin"]


def test_cid_raw_matches_the_independent_mint(kuro: Kuro, tmp_path: Path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * 300_000)
    mint = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "cid_mint.py"), str(f)], capture_output=True, text=True, check=True
    )
    assert kuro("cid", "--raw", str(f)).stdout == mint.stdout


def test_get_copies_files_and_trees_back_byte_for_byte(kuro: Kuro, tree: Path, tmp_path: Path) -> None:
    big = tree / "big.bin"
    big.write_bytes(os.urandom(600_000))
    assert kuro("fs", "put", str(tree)).returncode == 0
    out = tmp_path / "out"
    assert kuro("fs", "get", "tree", str(out)).returncode == 0
    assert (out / "big.bin").read_bytes() == big.read_bytes()
    assert (out / "sub" / "b.txt").read_text() == "beta\n"
    assert kuro("fs", "get", "tree/a.txt", "-").stdout == "alpha\n"


def test_every_write_moves_the_name_and_is_logged_with_its_op(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    assert kuro("fs", "mv", "tree/a.txt", "tree/renamed.txt").returncode == 0
    assert kuro("fs", "rm", "tree/renamed.txt").returncode == 0
    assert kuro("fs", "mkdir", "empty/deeper").returncode == 0
    log = _log(kuro)
    assert [row[0] for row in log] == ["0", "1", "2", "3"]
    assert [row[3].split()[0] for row in log] == ["put", "mv", "rm", "mkdir"]
    assert kuro("fs", "ls", "tree").stdout == "sub/\n"


def test_a_refused_op_moves_nothing(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    before = _log(kuro)
    refused = kuro("fs", "rm", "tree/sub")
    assert refused.returncode == 1 and "directory-not-empty" in refused.stderr
    assert _log(kuro) == before


def test_checkout_moves_back_and_is_itself_logged(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    assert kuro("fs", "rm", "tree/a.txt").returncode == 0
    assert kuro("fs", "cat", "tree/a.txt").returncode == 1
    assert kuro("fs", "checkout", "0").returncode == 0
    assert kuro("fs", "cat", "tree/a.txt").stdout == "alpha\n"
    log = _log(kuro)
    assert len(log) == 3 and log[2][1] == log[0][1] and log[2][3] == "checkout 0"
    assert kuro("fs", "checkout", log[1][1]).returncode == 0  # by CID too
    assert kuro("fs", "cat", "tree/a.txt").returncode == 1


def test_checkout_refuses_a_cid_that_is_not_a_directory_in_the_store(kuro: Kuro, tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("x")
    file_cid = kuro("fs", "put", str(f)).stdout.split()[0]
    result = kuro("fs", "checkout", file_cid)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(_log(kuro)) == 1


def test_checkout_refuses_a_raw_cid_whose_bytes_read_as_a_directory(kuro: Kuro, tmp_path: Path) -> None:
    # A file holding exactly the bytes of a directory block: its raw CID names those bytes, but a
    # name pointing at a raw CID is no fs root (every later command would fail on it).
    f = tmp_path / "dir.bin"
    f.write_bytes(encode_dir({}))
    file_cid = kuro("fs", "put", str(f)).stdout.split()[0]
    result = kuro("fs", "checkout", file_cid)
    assert result.returncode == 2 and "not a kuro.fs directory" in one_error_line(result)
    assert len(_log(kuro)) == 1
    assert kuro("fs", "ls").stdout == "dir.bin\n"


def test_a_sharded_root_can_be_named_listed_and_checked_out(kuro: Kuro, tmp_path: Path) -> None:
    # A root of more than 256 entries is a sharded directory block: still a kuro.fs directory to the CLI.
    store = MemoryBlockStore()
    files = {f"f{i:03d}": Entry(store.put(b"%d" % i), len(b"%d" % i)) for i in range(300)}
    root = write_dir(store, files)
    export_car(store, root, tmp_path / "big.car")
    imported = kuro("car", "import", str(tmp_path / "big.car"), "--name", "big")
    assert imported.returncode == 0, imported.stderr
    assert kuro("fs", "ls", "-n", "big").stdout.split() == sorted(files)
    assert kuro("fs", "cat", "f123", "-n", "big").stdout == "123"
    assert kuro("fs", "rm", "f000", "-n", "big").returncode == 0
    assert kuro("fs", "checkout", "0", "-n", "big").returncode == 0
    assert kuro("fs", "cat", "f000", "-n", "big").stdout == "0"


def test_names_are_independent(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree), "-n", "other").returncode == 0
    assert kuro("fs", "ls", "-n", "other").stdout == "tree/\n"
    assert kuro("fs", "log").returncode == 1  # main was never written


def test_a_car_export_imports_into_a_fresh_home_with_the_same_tree(kuro: Kuro, tree: Path, tmp_path: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    car = tmp_path / "tree.car"
    exported = kuro("car", "export", str(car))
    assert exported.returncode == 0, exported.stderr
    root = exported.stdout.split()[0]
    other_home = tmp_path / "other-home"
    env = {"KURO_HOME": str(other_home)}
    imported = kuro("car", "import", str(car), "--name", "restored", env=env)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == [root]
    assert kuro("fs", "cat", "tree/sub/b.txt", "-n", "restored", env=env).stdout == "beta\n"


def test_a_car_export_to_dev_stdout_redirected_to_a_file_is_the_car_alone(
    kuro: Kuro, home: Path, tree: Path, tmp_path: Path
) -> None:
    # `kuro car export /dev/stdout > x.car`: the export opens the file afresh (at offset 0), and the
    # "ROOT  FILE" line then went to stdout too, over the CAR's first bytes: an invalid CAR.
    assert kuro("fs", "put", str(tree)).returncode == 0
    car = tmp_path / "out.car"
    with car.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-m", "kuro_wasm", "car", "export", "/dev/stdout"],
            stdout=out,
            stderr=subprocess.PIPE,
            env={**os.environ, "KURO_HOME": str(home)},
            cwd=tmp_path,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    root = done.stderr.decode().split()[0]  # the line for people, on stderr
    imported = kuro("car", "import", str(car), env={"KURO_HOME": str(tmp_path / "other")})
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == [root]


def test_a_tampered_car_imports_nothing_and_says_so_in_one_line(kuro: Kuro, tree: Path, tmp_path: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    car = tmp_path / "tree.car"
    assert kuro("car", "export", str(car)).returncode == 0
    data = bytearray(car.read_bytes())
    data[-3] ^= 0xFF
    car.write_bytes(bytes(data))
    other = tmp_path / "other-home"
    result = kuro("car", "import", str(car), env={"KURO_HOME": str(other)})
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "[invalid-car]" in result.stderr
    blocks = other / "blocks"
    assert not blocks.exists() or not any(p.is_file() for p in blocks.rglob("*"))


def test_export_of_an_unknown_name_is_one_line(kuro: Kuro, tmp_path: Path) -> None:
    result = kuro("car", "export", str(tmp_path / "x.car"), "nothing-here")
    assert result.returncode == 1
    assert "neither a CID nor a named fs" in result.stderr


@pytest.mark.parity
@pytest.mark.skipif(shutil.which("node") is None or not (ROOT / "tools" / "node_modules").is_dir(), reason="no node")
def test_kuro_cid_agrees_with_the_javascript_importer(kuro: Kuro, tmp_path: Path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(1_000_000))
    request = json.dumps({"cases": [{"kind": "file", "path": str(f), "chunk": 262144, "width": 174}]})
    js = subprocess.run(
        ["node", str(ROOT / "tools" / "unixfs_ref.mjs")], input=request, capture_output=True, text=True, check=True
    )
    assert kuro("cid", str(f)).stdout.split()[0] == json.loads(js.stdout)["results"][0]["cid"]


def test_a_put_whose_destination_is_blocked_by_a_file_is_refused_and_moves_nothing(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree / "a.txt"), "notes").returncode == 0
    before = _log(kuro)
    result = kuro("fs", "put", str(tree / "sub" / "b.txt"), "notes/b.txt")
    assert result.returncode == 1
    assert "path-blocked" in result.stderr and len(result.stderr.splitlines()) == 1
    assert _log(kuro) == before


def test_a_put_onto_an_existing_directory_is_refused(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    result = kuro("fs", "put", str(tree / "a.txt"), "tree/sub")
    assert result.returncode == 1 and "is-a-directory" in result.stderr


def test_a_put_replaces_an_existing_file(kuro: Kuro, tree: Path) -> None:
    assert kuro("fs", "put", str(tree / "a.txt"), "f.txt").returncode == 0
    assert kuro("fs", "put", str(tree / "sub" / "b.txt"), "f.txt").returncode == 0
    assert kuro("fs", "cat", "f.txt").stdout == "beta\n"


@pytest.mark.parametrize("command", [("fs", "cat", "big.bin"), ("fs", "get", "big.bin", "-")])
def test_a_reader_that_leaves_early_ends_the_command_silently_with_sigpipes_status(
    kuro: Kuro, home: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`kuro fs cat big | head -c 10`: exit 141 (as `cat` killed by SIGPIPE), nothing at all on stderr."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # far more than a pipe buffer holds
    assert kuro("fs", "put", str(big)).returncode == 0
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=tmp_path,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(10)) == 10
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    assert proc.returncode == 141
    assert err == b""


def test_car_import_refuses_to_point_a_name_at_a_root_that_is_not_a_directory(kuro: Kuro, tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("just a file\n")
    file_cid = kuro("fs", "put", str(f)).stdout.split()[0]
    car = tmp_path / "f.car"
    assert kuro("car", "export", str(car), file_cid).returncode == 0
    env = {"KURO_HOME": str(tmp_path / "other-home")}
    result = kuro("car", "import", str(car), "--name", "weird", env=env)
    assert result.returncode == 2
    assert "is not one" in result.stderr and "Traceback" not in result.stderr
    assert kuro("fs", "log", "-n", "weird", env=env).returncode == 1  # the name was never set


def test_an_export_into_a_missing_directory_names_that_directory(kuro: Kuro, tree: Path, tmp_path: Path) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    result = kuro("car", "export", str(tmp_path / "nowhere" / "x.car"))
    assert result.returncode == 2
    assert result.stderr == f"kuro: error: {tmp_path / 'nowhere'}: No such directory\n"


def test_ls_escapes_names_that_would_lie_on_a_terminal(kuro: Kuro, home: Path) -> None:
    # A tree made elsewhere (by an older kuro, or by hand) may hold names with control characters.
    from kuro_fs.cid import raw_cid
    from kuro_fs.filestore import default_store
    from kuro_fs.fsdir import Entry, encode_dir
    from kuro_wasm.cli.refs import Refs

    store = default_store(home)
    leaf = store.put(b"x")
    names = {"evil\nfake": Entry(leaf, 1), "title\x1b]0;pwned\x07": Entry(leaf, 1), "plain.txt": Entry(leaf, 1)}
    root = store.put(encode_dir(names), "dag-cbor")
    assert leaf == raw_cid(b"x")
    Refs(home / "refs").set("odd", root, "a hand-made tree")
    listed = kuro("fs", "ls", "-n", "odd")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["evil\\x0afake", "plain.txt", "title\\x1b]0;pwned\\x07"]
    assert "\x1b" not in listed.stdout


def _fs_car(tmp_path: Path, files: dict[str, bytes], links: dict[str, str] | None = None,
            store: MemoryBlockStore | None = None) -> Path:  # fmt: skip
    """A CAR of a kuro.fs root holding ``files`` (path → bytes) and ``links`` (path → a file CID in ``store``)."""
    from kuro_fs.fs import Fs

    fs = Fs.empty(store or MemoryBlockStore())
    for path, cid in (links or {}).items():
        fs = fs.link(path, cid).fs
    for path, data in files.items():
        fs = fs.write(path, data).fs
    car = tmp_path / "fs.car"
    export_car(fs.store, fs.root, car)
    return car


def test_cat_and_get_refuse_a_file_over_the_byte_budget_before_writing(kuro: Kuro, tmp_path: Path) -> None:
    store = MemoryBlockStore()
    car = _fs_car(tmp_path, {}, {"big": diamond_file(store, 3)[0]}, store)  # 4 blocks claiming 5.4 GB
    assert kuro("car", "import", str(car), "--name", "main").returncode == 0
    cat = kuro("fs", "cat", "big")
    assert (cat.stdout, cat.returncode) == ("", 1)
    line = one_error_line(cat)
    assert f"cat big: over-budget ({1024 * 174**3} bytes claimed, budget {4 << 30} bytes; --max-bytes" in line
    get = kuro("fs", "get", "big", str(tmp_path / "out.bin"))
    assert "over-budget" in one_error_line(get) and not (tmp_path / "out.bin").exists()
    assert kuro("fs", "cat", "big", "--max-bytes", "-1").returncode == 2


def test_get_of_a_tree_counts_every_byte_it_would_write(kuro: Kuro, tmp_path: Path) -> None:
    car = _fs_car(tmp_path, {"d/a": b"x" * 1000, "d/b": b"y" * 1000})
    assert kuro("car", "import", str(car), "--name", "main").returncode == 0
    out = tmp_path / "out"
    refused = kuro("fs", "get", "d", str(out), "--max-bytes", "1999")
    assert "get d: over-budget (2000 bytes claimed, budget 1999 bytes" in one_error_line(refused)
    assert not out.exists()
    walk = kuro("fs", "get", "d", str(out), "--max-entries", "1")
    assert "more than 1 entries; --max-entries" in one_error_line(walk) and not out.exists()
    assert kuro("fs", "get", "d", str(out), "--max-bytes", "2000").returncode == 0
    assert (out / "a").read_bytes() == b"x" * 1000 and (out / "b").read_bytes() == b"y" * 1000
    assert kuro("fs", "cat", "d/a", "--max-bytes", "999").returncode == 1
    assert kuro("fs", "cat", "d/a", "--max-bytes", "1000").stdout == "x" * 1000
    shown = " ".join(kuro("fs", "get", "--help").stdout.split())
    assert f"more than N bytes (default {4 << 30})" in shown and "more than N entries (default 500000)" in shown


def test_get_refuses_a_tree_holding_a_name_with_a_control_character(kuro: Kuro, tmp_path: Path) -> None:
    # A directory written before kuro.fs refused such names: the local copy would be a lying file name.
    from kuro_fs import dagcbor

    store = MemoryBlockStore()
    legacy = {"evil\nfake": {"cid": dagcbor.Link(store.put(b"x")), "size": 1}}
    old = store.put(dagcbor.encode({"entries": legacy, "type": "kuro.fs/dir", "version": 1}), "dag-cbor")
    car = _fs_car(tmp_path, {"ok.txt": b"fine"}, {"d": old}, store)
    assert kuro("car", "import", str(car), "--name", "main").returncode == 0
    out = tmp_path / "out"
    got = kuro("fs", "get", ".", str(out))
    assert "get .: bad-path (d/evil\\x0afake has a control character; nothing written)" in one_error_line(got)
    assert not out.exists()
    assert kuro("fs", "ls", "d").stdout == "evil\\x0afake\n"


def test_a_car_of_sha2_512_blocks_imports_and_its_directory_reads(kuro: Kuro, tmp_path: Path) -> None:
    # Real IPFS data may name blocks by other hashes: the CLI's import files them (it once refused any
    # but sha2-256), and a kuro.fs directory named by one is read like any other.
    store = MemoryBlockStore()
    leaf = store.put(b"alpha\n")
    block = encode_dir({"a.txt": Entry(leaf, 6)})
    root = str(ParsedCID("dag-cbor", hashlib.sha512(block).digest(), hash="sha2-512"))
    with (tmp_path / "512.car").open("wb") as f:
        for piece in write_car([root], [(root, block), (leaf, b"alpha\n")]):
            f.write(piece)
    imported = kuro("car", "import", str(tmp_path / "512.car"), "--name", "foreign")
    assert imported.returncode == 0, imported.stderr
    assert kuro("fs", "ls", "-n", "foreign").stdout == "a.txt\n"
    assert kuro("fs", "cat", "a.txt", "-n", "foreign").stdout == "alpha\n"


@pytest.mark.parametrize(("damage", "said"), [("rot", "do not hash to this CID"), ("remove", "not in the store")])
def test_block_missing_says_whether_the_block_is_absent_or_corrupt(
    kuro: Kuro, tree: Path, home: Path, damage: str, said: str
) -> None:
    assert kuro("fs", "put", str(tree)).returncode == 0
    (leaf,) = [p for p in (home / "blocks").rglob("bafkrei*") if p.read_bytes() == b"alpha\n"]
    if damage == "rot":
        leaf.write_bytes(b"alphA\n")
    else:
        leaf.unlink()
    result = kuro("fs", "cat", "tree/a.txt")
    assert result.returncode == 1
    assert "block-missing" in one_error_line(result) and said in one_error_line(result)


def test_a_get_that_fails_part_way_leaves_the_local_file_as_it_was(kuro: Kuro, home: Path, tmp_path: Path) -> None:
    # The second leaf of a two-leaf file is gone: the root and the first leaf read, then the copy stops.
    # What was at LOCAL before is kept (no truncated file under the final name, no temporary left over).
    data = os.urandom(300_000)
    (tmp_path / "big.bin").write_bytes(data)
    assert kuro("fs", "put", str(tmp_path / "big.bin")).returncode == 0
    (leaf,) = [p for p in (home / "blocks").rglob("bafkrei*") if p.read_bytes() == data[262144:]]
    leaf.unlink()
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.bin").write_bytes(b"precious")
    result = kuro("fs", "get", "big.bin", str(out / "kept.bin"))
    assert result.returncode == 1 and "block-missing" in one_error_line(result)
    assert (out / "kept.bin").read_bytes() == b"precious"
    result = kuro("fs", "get", "big.bin", str(out / "new.bin"))
    assert result.returncode == 1
    assert sorted(p.name for p in out.iterdir()) == ["kept.bin"]


def test_a_get_onto_a_symlink_writes_through_it_and_keeps_the_link(kuro: Kuro, tmp_path: Path) -> None:
    # Replacing LOCAL by a renamed temporary file must not replace a link (`/dev/stdout` is one).
    (tmp_path / "f.txt").write_text("data")
    assert kuro("fs", "put", str(tmp_path / "f.txt")).returncode == 0
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert kuro("fs", "get", "f.txt", str(tmp_path / "link")).returncode == 0
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "data"


def test_put_of_a_directory_at_a_path_ending_in_a_slash_imports_it_there(kuro: Kuro, tree: Path) -> None:
    # DEST/ names a directory, which a tree is: kuro.fs links it (a file there stays not-a-directory).
    put = kuro("fs", "put", str(tree), "docs/")
    assert put.returncode == 0, put.stderr
    assert kuro("fs", "ls", "docs").stdout.split() == ["a.txt", "sub/"]
    refused = kuro("fs", "put", str(tree / "a.txt"), "file/")
    assert refused.returncode == 1 and "not-a-directory" in one_error_line(refused)
    assert len(_log(kuro)) == 1


def test_the_log_shows_a_note_escaped(kuro: Kuro, tmp_path: Path) -> None:
    # A note names the local file a put came from; its name may hold a terminal escape (a download's
    # name), which `kuro fs log` must not send raw to the terminal that shows it.
    local = tmp_path / "evil\x1b]0;pwned\x07.txt"
    local.write_text("x")
    assert kuro("fs", "put", str(local), "ok.txt").returncode == 0
    shown = kuro("fs", "log").stdout
    assert "\\x1b]0;pwned\\x07.txt" in shown and "\x1b" not in shown and "\x07" not in shown


def test_get_writes_in_place_where_no_temporary_file_can_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A LOCAL that may be written in a directory that takes no new file (no write permission on the
    # directory, as for a user who owns only the file): written in place, as before, not refused
    # naming a temporary file the user never asked for.
    import kuro_fs.atomic as atomic
    from kuro_wasm.cli import fs as cli_fs

    real_open = os.open

    def no_new_files(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        if os.path.basename(os.fspath(path)).startswith(atomic.TMP_PREFIX):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, mode, **kw)

    target = tmp_path / "kept.bin"
    target.write_bytes(b"old")
    monkeypatch.setattr(atomic.os, "open", no_new_files)
    cli_fs._write_local(target, iter([b"new ", memoryview(b"bytes")]))
    assert target.read_bytes() == b"new bytes"


def test_a_damaged_ref_file_leaves_the_history_readable_and_a_checkout_repairs_it(
    kuro: Kuro, tree: Path, home: Path
) -> None:
    # The history is intact: `kuro fs log` shows it and `kuro fs checkout N` points the name back,
    # instead of both failing on the ref file they would replace.
    from kuro_fs.home import refs_dir

    assert kuro("fs", "put", str(tree)).returncode == 0
    (refs_dir(home) / "main.ref").write_text("not a cid\n")
    broken = kuro("fs", "ls")
    assert broken.returncode == 2 and "invalid-cid" in one_error_line(broken)
    shown = kuro("fs", "log")
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 1
    assert kuro("fs", "checkout", "0").returncode == 0
    assert kuro("fs", "ls").stdout == "tree/\n"
