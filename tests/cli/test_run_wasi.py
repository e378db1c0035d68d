"""``kuro run CID _start ARGS... [--env K=V ...]``: WASI commands from the command line, with live output.

A WASI command's words are its argv as typed (a word starting with ``-`` included; after ``--`` even
one that looks like a kuro option); a kuro ABI v1 export's words are still numbers.
"""

from __future__ import annotations

from pathlib import Path

from cli_helpers import GUESTS, Kuro, add_guest, one_error_line


def _c(kuro: Kuro, name: str) -> str:
    result = kuro("guest", "add", str(GUESTS / "c" / f"{name}.wasm"))
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[0]


def test_a_c_program_reads_a_kuro_fs_file_and_its_stdout_is_ours(kuro: Kuro, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one two\nthree\n")
    assert kuro("fs", "put", str(tmp_path / "notes.txt")).returncode == 0
    cid = _c(kuro, "wc")
    result = kuro("run", cid, "_start", "notes.txt")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "      2       3      14 notes.txt\n"
    assert "ok" in result.stderr  # the receipt summary


def test_dash_words_env_and_argv0_reach_the_program_as_typed(kuro: Kuro) -> None:
    cid = _c(kuro, "envargs")
    result = kuro("run", cid, "_start", "-n", "--env", "LANG=C", "--argv0", "envargs", "--", "--grant", "x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "argc 4\nargv[0] = <envargs>\nargv[1] = <-n>\nargv[2] = <--grant>\nargv[3] = <x>\nenvc 1\nenv <LANG=C>\n"
    )


def test_a_wasi_program_that_writes_advances_the_named_fs(kuro: Kuro) -> None:
    cid = _c(kuro, "fsops")
    result = kuro("run", cid, "_start", "write", "out.txt", "made by C", "--mode", "terminal-build")
    assert result.returncode == 0, result.stderr
    assert kuro("fs", "cat", "out.txt").stdout == "made by C"
    refused = kuro("run", cid, "_start", "write", "other.txt", "x")  # terminal-repo: no fs/write
    assert refused.returncode == 1
    assert "refused path_open other.txt (missing fs/write)" in refused.stderr


def test_a_deterministic_run_prints_the_same_clock_and_random_bytes_twice(kuro: Kuro) -> None:
    cid = _c(kuro, "clockrand")
    first = kuro("run", cid, "_start", "-v", "--deterministic", "--seed", "3")
    second = kuro("run", cid, "_start", "-v", "--deterministic", "--seed", "3")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout and "random " in first.stdout


def test_bad_run_options_are_one_line_each(kuro: Kuro) -> None:
    cid = _c(kuro, "envargs")
    assert "--env takes NAME=VALUE" in one_error_line(kuro("run", cid, "_start", "--env", "NOEQUALS"))
    twice = kuro("run", cid, "_start", "--env", "A=1", "--env", "B=x", "--env", "A=2")
    assert twice.returncode == 2 and "--env A is given twice ('1' and '2')" in one_error_line(twice)
    json_twice = one_error_line(kuro("run", cid, "_start", "--args-json", '[{"k": 1, "k": 2}]'))
    assert "key 'k' is given twice" in json_twice
    typo = one_error_line(kuro("run", cid, "_start", "--gnat", "fs/read"))
    assert "unrecognized option '--gnat'" in typo and "after `--`" in typo
    seeded = kuro("run", cid, "_start", "--seed", "4")
    assert seeded.returncode == 2 and "a seed is for deterministic runs" in one_error_line(seeded)


def test_numbers_still_go_to_a_kuro_abi_export_and_words_do_not(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    assert kuro("run", cid, "add", "40", "2").returncode == 42
    assert "is not a number" in one_error_line(kuro("run", cid, "add", "forty", "2"))
