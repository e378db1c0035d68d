"""Every guests/c program, on hypothesis-generated trees, arguments, environments and stdin, does what its oracle says.

For each case the reference runner (wasmtime's built-in WASI over a temporary directory) must produce
exactly the oracle's outcome — exit code, stdout, stderr and the resulting tree, compared by CID —
and every other runner in ``wasikit.RUNNERS`` (kuro's WASI over kuro.fs, which must be among them:
without it nothing is compared) must produce exactly the reference's. The oracles (``oracles.py``)
model the tree with ``kuro_fs.overlay``, so a disagreement is either a runner bug or an overlay choice
that differs from wasmtime's.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import oracle
from wasikit import (
    C_GUESTS,
    RUNNERS,
    WasiCase,
    WasiOutcome,
    differences,
    run_all,
    run_builtin,
    run_kuro,
    write_tree,
)

NAMES = ["a", "b.txt", "dir", "é", "x y", "-"]
CONTENT = st.one_of(
    st.lists(st.sampled_from(["", "alpha", "beta gamma", "10", "-3", " 7 ", "zz", "é"]), max_size=6).map(
        lambda lines: "\n".join(lines).encode()
    ),
    st.binary(max_size=64),
)
TREE_PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
TREES = st.dictionaries(TREE_PATHS, st.none() | CONTENT, max_size=8)
PATH_ARGS = st.one_of(
    TREE_PATHS, st.sampled_from([".", "/", "missing", "dir/", "/a", "./b.txt", "dir/../a", "../a", "a/.."])
)
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def materialize(tree: dict[str, bytes | None], folder: Path) -> None:
    """Write what fits of ``tree`` (a path under a file is skipped, as a real directory would refuse it)."""
    for path, data in sorted(tree.items(), key=lambda item: item[0].count("/")):
        parts = path.split("/")
        if any((folder / "/".join(parts[:i])).is_file() for i in range(1, len(parts) + 1)):
            continue
        if data is None and (folder / path).exists():
            continue
        write_tree(folder, {path: data})


def _reference_and_others(outcomes: dict[str, WasiOutcome]) -> tuple[WasiOutcome, dict[str, WasiOutcome]]:
    """The reference's outcome and the others'; kuro's WASI must be among the others (or nothing is compared)."""
    reference = outcomes.pop("builtin")
    assert "kuro" in outcomes, f"kuro's WASI is not a runner (only {sorted(outcomes)}): nothing would be compared"
    return reference, outcomes


def test_kuros_wasi_is_one_of_the_runners_compared() -> None:
    assert RUNNERS["builtin"] is run_builtin and RUNNERS["kuro"] is run_kuro


def check(program: str, tree: dict[str, bytes | None], args: list[str], **more: object) -> None:
    with tempfile.TemporaryDirectory(prefix="kuro-wasi-diff-") as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        materialize(tree, root)
        case = WasiCase(C_GUESTS / f"{program}.wasm", tuple(args), root=root, **more)  # type: ignore[arg-type]
        expected = oracle(case)
        reference, outcomes = _reference_and_others(run_all(case))
        assert differences(expected, reference) == [], "the reference runner disagrees with the oracle"
        for name, outcome in outcomes.items():
            assert differences(reference, outcome) == [], f"runner {name} disagrees with the reference"


@SETTINGS
@given(tree=TREES, args=st.lists(st.one_of(PATH_ARGS, st.just("-")), max_size=4), stdin=st.binary(max_size=40))
def test_cat(tree: dict[str, bytes | None], args: list[str], stdin: bytes) -> None:
    check("cat", tree, args, stdin=stdin)


@SETTINGS
@given(tree=TREES, args=st.lists(PATH_ARGS, max_size=4), stdin=CONTENT)
def test_wc(tree: dict[str, bytes | None], args: list[str], stdin: bytes) -> None:
    check("wc", tree, args, stdin=stdin)


@SETTINGS
@given(tree=TREES, args=st.lists(PATH_ARGS, max_size=3))
def test_ls_recursive(tree: dict[str, bytes | None], args: list[str]) -> None:
    check("ls", tree, args)


@SETTINGS
@given(
    tree=TREES,
    options=st.lists(st.sampled_from(["-r", "-u", "-n", "-nr", "-x"]), max_size=2),
    files=st.lists(st.one_of(PATH_ARGS, st.just("-")), max_size=2),
    stdin=CONTENT,
)
def test_sort(tree: dict[str, bytes | None], options: list[str], files: list[str], stdin: bytes) -> None:
    check("sort", tree, [*options, *files], stdin=stdin)


@SETTINGS
@given(
    args=st.lists(TEXT, max_size=4),
    env=st.dictionaries(TEXT.filter(lambda k: k != "" and "=" not in k), TEXT, max_size=4),
    argv0=st.one_of(st.none(), TEXT.filter(bool)),
    lookup=st.booleans(),
)
def test_envargs(args: list[str], env: dict[str, str], argv0: str | None, lookup: bool) -> None:
    check("envargs", {}, (["-g", *env, "UNSET"] if lookup else args), env=env, argv0=argv0)


@SETTINGS
@given(tree=TREES, args=st.lists(PATH_ARGS, max_size=2))
def test_walk_in_rust(tree: dict[str, bytes | None], args: list[str]) -> None:
    check("walk", tree, args)


FSOPS_PATHS = st.one_of(st.sampled_from(["a", "b.txt", "dir", "dir/a", "dir/sub", "new", "dir/"]), PATH_ARGS)
NUMBERS = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(["300000", "x", ""]))
FSOPS = st.one_of(
    st.tuples(st.sampled_from(["write", "append", "unlinkopen"]), FSOPS_PATHS, TEXT),
    st.tuples(st.sampled_from(["create", "read", "sum", "stat", "ls", "mkdir", "rmdir", "unlink"]), FSOPS_PATHS),
    st.tuples(st.just("pwrite"), FSOPS_PATHS, NUMBERS, TEXT),
    st.tuples(st.just("seekwrite"), FSOPS_PATHS, NUMBERS, st.sampled_from(["set", "cur", "end"]), TEXT),
    st.tuples(st.just("truncate"), FSOPS_PATHS, NUMBERS),
    st.tuples(st.just("pread"), FSOPS_PATHS, NUMBERS, NUMBERS),
    st.tuples(st.just("big"), FSOPS_PATHS, st.sampled_from(["0", "262143", "262145", "600000"]), st.just("3")),
    st.tuples(st.just("rename"), FSOPS_PATHS, FSOPS_PATHS),
    st.tuples(st.just("renameopen"), FSOPS_PATHS, FSOPS_PATHS, TEXT),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES, ops=st.lists(FSOPS, max_size=8))
def test_fsops_writes_renames_and_removes_like_the_overlay(
    tree: dict[str, bytes | None], ops: list[tuple[str, ...]]
) -> None:
    # unlinkopen prints what it reads back escaped (up to 4 characters a byte): 8 ops over a 600,000-byte
    # file print up to ~19 MB, past kuro's default 1 MiB cap (found by hypothesis: output-capped vs all of it)
    check("fsops", tree, [arg for op in ops for arg in op], max_output_bytes=64 << 20)


@pytest.mark.parametrize(
    "args",
    [
        ["write", "a", "x", "rename", "a", "dir/b", "stat", "dir/b", "ls", "dir"],
        ["mkdir", "d", "mkdir", "d/e", "rmdir", "d", "rename", "d/e", "f", "rmdir", "d", "ls", "."],
        ["big", "f", "600000", "5", "pwrite", "f", "300000", "Z", "sum", "f", "truncate", "f", "262145", "sum", "f"],
        ["write", "a", "base", "unlinkopen", "a", "zz", "stat", "a", "renameopen", "b.txt", "moved", "+tail"],
        ["seekwrite", "b.txt", "5", "end", "far", "pread", "b.txt", "0", "64", "pread", "b.txt", "-1", "1"],
        ["rmdir", "dir/", "unlink", ".", "rename", ".", "z", "mkdir", "../x", "read", "/b.txt", "read", "dir"],
        ["rmdir", "dir/sub/", "rmdir", "dir/..", "rmdir", "b.txt/", "rmdir", "missing/", "rmdir", "dir/sub"],
        [
            "rename",
            "dir/a",
            "dir",
            "rename",
            "dir",
            "dir/sub/y",
            "rename",
            "b.txt",
            "dir/..",
            "rename",
            "dir/a",
            "b.txt/",
        ],
        ["bogus"],
        ["pwrite", "b.txt"],
        ["pwrite", "b.txt", "1x", "text"],
    ],
)
def test_fsops_scripts_that_cover_every_rule(args: list[str]) -> None:
    check("fsops", {"b.txt": b"hello\n", "dir/a": b"in dir", "dir/sub": None}, args)


def test_clockrand_sees_working_clocks_sleep_and_random() -> None:
    check("clockrand", {}, [])
    verbose = run_builtin(WasiCase(C_GUESTS / "clockrand.wasm", ("-v",)))
    assert verbose.exit_code == 0
    assert re.fullmatch(
        rb"clock ok\nsleep ok\nrandom ok\nrealtime \d+\nmonotonic \d+ \d+\nres \d+ \d+\nrandom [0-9a-f]{64}\n",
        verbose.stdout,
    )


@pytest.mark.parametrize(("program", "args"), [("hello", []), ("writeloop", ["37"]), ("writeloop", [])])
def test_the_benchmark_programs(program: str, args: list[str]) -> None:
    check(program, {}, args)


@pytest.mark.parametrize(
    ("mode", "stdin"), [("exit", b""), ("sync", b""), ("wait", b"read to its end"), ("bogus", b"")]
)
def test_commit_points_leave_the_tree_a_real_directory_holds(mode: str, stdin: bytes) -> None:
    """Where a run ends normally, or a file is fsynced before a trap, kuro's commit points keep every write,
    as a real directory does. (A trap, kill or cap with a write pending differs by design: docs/wasi.md,
    the fixture cases and tests/host/test_wasi.py.)"""
    check("commit", {"kept.txt": b"old", "pending.txt": b"old too"}, [mode], stdin=stdin)


@SETTINGS
@given(ms=st.one_of(st.integers(-2500, 15).map(str), st.sampled_from(["", "x", " 3", "4ms", "-1000", "-0"])))
def test_sleep(ms: str) -> None:
    check("sleep", {}, [ms])


SPEW_TARGETS = st.sampled_from(["1", "2", "out", "dir/out", "missing/out", "dir"])


@SETTINGS
@given(
    args=st.one_of(
        st.tuples(SPEW_TARGETS, st.integers(0, 30).map(str), st.integers(1, 3000).map(str)).map(list),
        st.tuples(
            SPEW_TARGETS, st.integers(0, 5).map(str), st.integers(1, 500).map(str), st.integers(1, 40).map(str)
        ).map(list),
        st.lists(st.sampled_from(["0", "3", "1", "2", "-1", "x", "", " 2", "2 ", "1025", "99999999999"]), max_size=5),
    )
)
def test_spew_many_writes_to_stdout_stderr_or_a_file(args: list[str]) -> None:
    """Below the cap, every write to either stream — one iovec or many over one buffer — is kept whole, in order;
    to a file, every byte lands where a real directory puts it."""
    check("spew", {"dir/out": b"old"}, args)


@SETTINGS
@given(tree=TREES, path=PATH_ARGS, size=st.sampled_from(["1", "7", "65536", "0", "x"]))
def test_readfile(tree: dict[str, bytes | None], path: str, size: str) -> None:
    check("readfile", {**tree, "big": bytes(range(256)) * 40}, [path, size])


def test_the_harness_catches_a_runner_that_differs() -> None:
    """A runner that loses one byte of stdout is reported: the differential check can fail."""

    def lossy(case: WasiCase) -> WasiOutcome:
        outcome = run_builtin(case)
        return WasiOutcome(outcome.exit_code, outcome.stdout[:-1], outcome.stderr, outcome.tree, outcome.files)

    RUNNERS["lossy"] = lossy
    try:
        with pytest.raises(AssertionError, match="runner lossy disagrees"):
            check("hello", {}, [])
    finally:
        del RUNNERS["lossy"]


def test_raw_wasi_edge_cases_agree_with_wasmtime(tmp_path: Path) -> None:
    """guests/c/wasiedge calls the preview 1 functions directly (no libc between): every answer, and the tree
    left behind, must be wasmtime's. (Its ``kuro`` mode, where the hosts differ by design, is a fixture case.)"""
    root = tmp_path / "root"
    write_tree(root, {"keep.txt": b"kept"})
    case = WasiCase(C_GUESTS / "wasiedge.wasm", ("common",), root=root)
    reference, outcomes = _reference_and_others(run_all(case))
    assert reference.exit_code == 0 and b"remove the scratch directory ok" in reference.stdout
    for name, outcome in outcomes.items():
        assert differences(reference, outcome) == [], f"runner {name} disagrees with the reference"


def test_every_call_a_capability_governs_succeeds_as_on_wasmtime_when_granted(tmp_path: Path) -> None:
    """``wasiedge deny`` with every capability granted: readdir, stat, read, create, truncate, mkdir, rename,
    unlink, rmdir, stdin read and poll answer and leave what wasmtime's WASI does. (Under partial grants the
    refusals are kuro's own: the fixture cases grant-*.)"""
    root = tmp_path / "root"
    write_tree(root, {"f": b"hello", "e": b"y", "d/keep": b"z"})
    case = WasiCase(C_GUESTS / "wasiedge.wasm", ("deny",), root=root, stdin=b"input")
    reference, outcomes = _reference_and_others(run_all(case))
    assert reference.exit_code == 0 and b"rmdir d ok\nread stdin = 5\npoll stdin: errno 0, event error 0\n" in (
        reference.stdout
    )
    for name, outcome in outcomes.items():
        assert differences(reference, outcome) == [], f"runner {name} disagrees with the reference"
