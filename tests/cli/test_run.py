"""``kuro run`` as a user drives it: live output, the receipt, its exit status, stored receipts, the ledger."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_helpers import GUESTS, ROOT, Kuro, add_guest, crashed_run, kuro_runner, one_error_line

from kuro_fs.cid import raw_cid
from kuro_wasm.model.receipt import from_json


def test_guest_add_prints_the_cid_and_the_file_for_each_guest(kuro: Kuro) -> None:
    result = kuro("guest", "add", str(GUESTS / "hello.wat"), str(GUESTS / "spin.wat"))
    assert result.returncode == 0
    lines = [line.split() for line in result.stdout.splitlines()]
    assert [name for _, name in lines] == [str(GUESTS / "hello.wat"), str(GUESTS / "spin.wat")]
    assert all(cid.startswith("bafkrei") for cid, _ in lines)


def test_guest_output_goes_to_stdout_and_stderr_and_the_summary_to_stderr(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run")
    assert result.returncode == 0
    assert result.stdout == "hello, kuro\n"
    assert result.stderr.startswith("note: stderr works\n")
    assert "ok · exit code 0" in result.stderr and "isolation wasmtime" in result.stderr


def test_the_exit_status_is_the_receipts_exit_code(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    assert kuro("run", cid, "exit", "3").returncode == 3
    assert kuro("run", cid, "add", "40", "2").returncode == 42


def test_an_exit_code_outside_a_byte_exits_1_and_the_receipt_keeps_it(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "exit", "256", "--json")
    assert result.returncode == 1  # not 0, which is what 256 would become
    assert from_json(result.stdout)["kuro/exit-code"] == 256


def test_a_deadline_exits_124_with_a_timeout_receipt(kuro: Kuro) -> None:
    cid = add_guest(kuro, "spin.wat")
    result = kuro("run", cid, "run", "--timeout-ms", "50")
    assert result.returncode == 124
    assert "timeout · exit code 124" in result.stderr


def test_json_prints_only_the_receipt_on_stdout(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--json")
    receipt = from_json(result.stdout)
    assert receipt["kuro/stdout"] == b"hello, kuro\n"
    assert receipt["kuro/isolation"] == "wasmtime"
    assert result.stderr == ""


def test_every_receipt_is_stored_and_shown_again_by_its_cid(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    ran = kuro("run", cid, "run")
    receipt_cid = ran.stderr.split("receipt ", 1)[1].split()[0]
    shown = kuro("receipt", "show", receipt_cid)
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"receipt {receipt_cid}  ok · exit code 0")
    assert "hello, kuro" in shown.stdout and "note: stderr works" in shown.stdout
    as_json = json.loads(kuro("receipt", "show", receipt_cid, "--json").stdout)
    assert as_json["kuro/guest"] == cid


def test_receipt_show_colours_output_only_when_asked_and_never_passes_raw_escapes(kuro: Kuro, tmp_path: Path) -> None:
    wat = tmp_path / "colour.wat"
    wat.write_text(
        '(module (import "kuro" "write" (func $w (param i32 i32 i32) (result i32)))\n'
        '  (memory (export "memory") 1)\n'
        '  (data (i32.const 0) "\\1b[31mred\\1b[0m \\1b]0;title\\07\\1b[2Jok\\n")\n'
        '  (func (export "run") (result i32)\n'
        "    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 30))) (i32.const 0)))\n"
    )
    cid = add_guest(kuro, str(wat))
    stored = kuro("run", cid, "run").stderr.split("receipt ", 1)[1].split()[0]
    plain = kuro("receipt", "show", stored, "--color", "never").stdout
    assert "red ok" in plain and "\x1b" not in plain
    coloured = kuro("receipt", "show", stored, "--color", "always").stdout
    assert "\x1b[0;31mred" in coloured
    assert "title" not in coloured and "\x1b]" not in coloured and "\x1b[2J" not in coloured


def test_receipt_show_can_write_the_output_as_html(kuro: Kuro, tmp_path: Path) -> None:
    cid = add_guest(kuro, "hello.wat")
    stored = kuro("run", cid, "run").stderr.split("receipt ", 1)[1].split()[0]
    page = tmp_path / "out.html"
    assert kuro("receipt", "show", stored, "--html", str(page)).returncode == 0
    assert "hello, kuro" in page.read_text()


def test_a_refused_import_call_is_listed_in_the_summary(kuro: Kuro) -> None:
    cid = add_guest(kuro, "fs-write.wat")
    result = kuro("run", cid, "run")
    assert result.returncode == 1  # the guest returns the negated -1 (denied)
    assert "refused fs_write out/hello.txt (missing fs/write)" in result.stderr


def test_a_guest_that_writes_advances_the_named_fs_and_logs_why(kuro: Kuro) -> None:
    cid = add_guest(kuro, "fs-write.wat")
    result = kuro("run", cid, "run", "--mode", "terminal-build")
    assert result.returncode == 0, result.stderr
    assert kuro("fs", "cat", "out/hello.txt").stdout == "written by a guest"
    log = kuro("fs", "log").stdout
    assert "run " in log and "receipt bafyrei" in log


def test_a_guest_reads_the_fs_given_by_cid(kuro: Kuro, tmp_path: Path) -> None:
    (tmp_path / "greeting.txt").write_text("hi from a file\n")
    assert kuro("fs", "put", str(tmp_path / "greeting.txt")).returncode == 0
    root = kuro("fs", "log").stdout.splitlines()[-1].split()[2]
    cid = add_guest(kuro, "fs-cat.wat")
    result = kuro("run", cid, "run", "--fs", root)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi from a file\n"


def test_stdin_is_passed_from_a_file_or_from_our_stdin(kuro: Kuro, tmp_path: Path) -> None:
    cid = add_guest(kuro, "cat.wat")
    export = "run"
    (tmp_path / "in.txt").write_text("from a file\n")
    assert kuro("run", cid, export, "--stdin", str(tmp_path / "in.txt")).stdout == "from a file\n"
    assert kuro("run", cid, export, "--stdin", "-", input="from a pipe\n").stdout == "from a pipe\n"


def test_an_operation_id_runs_once_and_replays_after(kuro: Kuro) -> None:
    cid = add_guest(kuro, "fs-write.wat")
    first = kuro("run", cid, "run", "--mode", "terminal-build", "--op-id", "op-1", "--fs", "main-empty-root")
    assert first.returncode == 2  # not a CID and no such fs name: refused before the ledger
    empty = kuro("fs", "mkdir", ".")
    assert empty.returncode == 0
    root = kuro("fs", "log").stdout.split()[2]
    ran = kuro("run", cid, "run", "--mode", "terminal-build", "--op-id", "op-1", "--fs", root)
    again = kuro("run", cid, "run", "--mode", "terminal-build", "--op-id", "op-1", "--fs", root)
    assert ran.returncode == again.returncode == 0
    assert "replayed" not in ran.stderr and "replayed" in again.stderr
    listed = kuro("ledger", "list").stdout.split()
    assert listed[:2] == ["op-1", "done"]
    shown = kuro("receipt", "show", "op-1")
    assert shown.returncode == 0 and "ok · exit code 0" in shown.stdout
    stored = ran.stderr.split("receipt ", 1)[1].split()[0]  # the CID the run printed
    assert shown.stdout.splitlines()[0].startswith(f"receipt {stored}  ok")  # the same, never blank


def test_retrying_the_same_command_on_a_named_fs_replays_although_the_run_moved_the_name(kuro: Kuro) -> None:
    cid = add_guest(kuro, "fs-write.wat")
    command = ("run", cid, "run", "--mode", "terminal-build", "--op-id", "op-w")
    first = kuro(*command)
    assert first.returncode == 0, first.stderr
    log = kuro("fs", "log").stdout
    again = kuro(*command)  # main now points at the root the first run wrote
    assert again.returncode == 0, again.stderr
    assert "· replayed" in again.stderr and "operation-conflict" not in again.stderr
    assert kuro("fs", "log").stdout == log  # the name is not moved a second time
    assert kuro("fs", "cat", "out/hello.txt").stdout == "written by a guest"
    different = kuro("run", cid, "run", "--mode", "terminal-repo", "--op-id", "op-w")
    assert different.returncode == 1 and "[operation-conflict]" in different.stderr


def test_an_operation_id_reused_for_different_arguments_is_a_conflict(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    assert kuro("run", cid, "exit", "1", "--op-id", "op-2").returncode == 1
    result = kuro("run", cid, "exit", "2", "--op-id", "op-2")
    assert result.returncode == 1
    assert "[operation-conflict]" in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_ledger_list_of_a_fresh_home_is_empty_and_successful(kuro: Kuro) -> None:
    result = kuro("ledger", "list")
    assert result.returncode == 0 and result.stdout == ""


def test_ledger_list_shows_a_page_and_says_how_to_see_the_next(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    for i in range(3):
        assert kuro("run", cid, "run", "--op-id", f"op-{i}").returncode == 0
    first = kuro("ledger", "list", "--limit", "2")
    assert [line.split()[0] for line in first.stdout.splitlines()] == ["op-0", "op-1"]
    more = first.stderr.strip().splitlines()[-1]
    assert more.startswith("more: kuro ledger list --after")
    rest = kuro("ledger", "list", "--limit", "2", *shlex.split(more.removeprefix("more: "))[3:])
    assert [line.split()[0] for line in rest.stdout.splitlines()] == ["op-2"] and "more:" not in rest.stderr
    bad = kuro("ledger", "list", "--after", "not-a-cursor")
    assert bad.returncode == 2 and bad.stderr.startswith("kuro: error:")
    not_utf8 = kuro("ledger", "list", "--after", "r1:\udcff")  # argv byte 0xff: a usage error, never an internal one
    assert not_utf8.returncode == 2 and "[usage]" in not_utf8.stderr
    assert kuro("ledger", "list", "--limit", "0").returncode == 2


def test_the_next_page_command_is_one_a_shell_runs_as_printed_whatever_the_op_id(kuro: Kuro) -> None:
    # an op id is any printable text: the printed command must not become two commands (or lose a word)
    cid = add_guest(kuro, "hello.wat")
    hostile = ["a b; touch pwned", "it's $(touch pwned)", 'x"y`z`']
    for op_id in [*hostile, "last"]:
        assert kuro("run", cid, "run", "--op-id", op_id).returncode == 0
    seen = []
    after: list[str] = []
    for _ in range(5):
        page = kuro("ledger", "list", "--limit", "1", "--json", *after)
        assert page.returncode == 0, page.stderr
        seen += [json.loads(line)["kuro/op-id"] for line in page.stdout.splitlines()]
        more = page.stderr.strip().splitlines()[-1:] or [""]
        if not more[0].startswith("more: "):
            break
        words = shlex.split(more[0].removeprefix("more: "))
        assert words[:3] == ["kuro", "ledger", "list"] and "--json" in words
        after = [w for w in words[3:] if w != "--json"]
    assert seen == [*hostile, "last"]


def test_ledger_list_shows_a_bidirectional_control_in_an_op_id_as_its_escape(kuro: Kuro) -> None:
    # printable, so a valid op id; printed raw it would turn the rest of the row around on screen
    cid = add_guest(kuro, "hello.wat")
    assert kuro("run", cid, "run", "--op-id", "op\u202e ko 0 enod").returncode == 0
    listed = kuro("ledger", "list")
    assert listed.stdout.splitlines() == ["op\\u202e ko 0 enod  done  0  ok"]
    assert json.loads(kuro("ledger", "list", "--json").stdout)["kuro/op-id"] == "op\u202e ko 0 enod"


def test_the_largest_page_limit_the_command_takes_lists_everything(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    assert kuro("run", cid, "run", "--op-id", "op-1").returncode == 0
    result = kuro("ledger", "list", "--limit", str(2**63 - 1))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "op-1" and "more:" not in result.stderr


def test_output_is_streamed_while_the_guest_still_runs(home: Path, tmp_path: Path) -> None:
    flood_cid = _add_in(home, GUESTS / "flood.wat")
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "run", flood_cid, "run", "--timeout-ms", "20000",
         "--max-output", str(1 << 30)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=tmp_path,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            first = proc.stdout.read(4096)  # arrives long before the 20 s deadline ends the run
            assert len(first) == 4096
            assert proc.poll() is None
        finally:
            proc.kill()
            proc.wait()


def _add_in(home: Path, path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "guest", "add", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=ROOT,
        check=True,
    )
    return out.stdout.split()[0]


def test_stdin_dash_reaches_the_guest_while_our_stdin_is_still_open(home: Path, tmp_path: Path) -> None:
    cid = _add_in(home, GUESTS / "cat.wat")
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "run", cid, "run", "--stdin", "-", "--timeout-ms", "30000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=tmp_path,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"first line\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"first line\n"  # echoed before our stdin ends
        proc.stdin.write(b"second\n")
        proc.stdin.close()
        assert proc.stderr is not None
        rest, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=60)
    assert rest == b"second\n"
    assert proc.returncode == 0, err


def test_a_wasm_binary_is_added_under_the_same_cid_as_its_wat(kuro: Kuro, tmp_path: Path) -> None:
    import wasmtime

    binary = tmp_path / "hello.wasm"
    binary.write_bytes(wasmtime.wat2wasm((GUESTS / "hello.wat").read_text()))
    from_wat = add_guest(kuro, "hello.wat")
    added = kuro("guest", "add", str(binary))
    assert added.returncode == 0, added.stderr
    assert added.stdout.split() == [from_wat, str(binary)]
    assert kuro("run", from_wat, "run").stdout == "hello, kuro\n"


PROMPT_WAT = """(module
  (import "kuro" "read" (func $read (param i32 i32) (result i32)))
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "name? ")
  (data (i32.const 16) "asking\\n")
  (func (export "run") (result i32)
    (local $n i32)
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 6)))
    (drop (call $write (i32.const 2) (i32.const 16) (i32.const 7)))
    (local.set $n (call $read (i32.const 100) (i32.const 100)))
    (drop (call $write (i32.const 1) (i32.const 100) (local.get $n)))
    (i32.const 0)))
"""


def test_a_prompt_reaches_the_terminal_while_the_guest_blocks_on_stdin(home: Path, tmp_path: Path) -> None:
    """The guest writes a prompt with no newline, then blocks reading: both streams show it before stdin ends."""
    wat = tmp_path / "prompt.wat"
    wat.write_text(PROMPT_WAT)
    cid = _add_in(home, wat)
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "run", cid, "run", "--stdin", "-", "--timeout-ms", "60000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=tmp_path,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        assert os.read(proc.stdout.fileno(), 100) == b"name? "  # blocks until it arrives; stdin still open
        assert os.read(proc.stderr.fileno(), 100) == b"asking\n"
        assert proc.poll() is None  # the guest is still waiting for us
        proc.stdin.write(b"kuro\n")
        proc.stdin.close()
        rest, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=60)
    assert rest == b"kuro\n"
    assert proc.returncode == 0 and b"ok \xc2\xb7 exit code 0" in err


def test_when_the_reader_of_the_output_leaves_the_guest_is_stopped_and_its_receipt_kept(
    home: Path, tmp_path: Path
) -> None:
    """`kuro run CID run | head -c 10`: no hang until the deadline, no traceback, a stored `cancelled` receipt."""
    flood_cid = _add_in(home, GUESTS / "flood.wat")
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "run", flood_cid, "run", "--timeout-ms", "60000",
         "--max-output", str(1 << 30)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=tmp_path,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert len(proc.stdout.read(10)) == 10
        proc.stdout.close()  # what `head -c 10` does next
        err = proc.stderr.read().decode()
        proc.wait(timeout=60)
    assert proc.returncode == 130, err
    assert "cancelled · exit code 130" in err
    assert "Traceback" not in err and "Exception ignored" not in err and "on_chunk raised" not in err
    stored = err.split("receipt ", 1)[1].split()[0]
    shown = kuro_runner(home, tmp_path)("receipt", "show", stored, "--json")
    assert json.loads(shown.stdout)["kuro/outcome"] == "cancelled"


def _component_cid(kuro: Kuro) -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_components", ROOT / "tools" / "build_components.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.build(ROOT / "build" / "components", ["typed"])["typed"]
    result = kuro("guest", "add", str(path))
    assert result.returncode == 0, result.stderr
    return str(result.stdout.split()[0])


def test_args_json_passes_typed_args_to_a_component_and_the_result_comes_back(kuro: Kuro) -> None:
    cid = _component_cid(kuro)
    result = kuro("run", cid, "echo-point", "--args-json", '[{"x": 1, "y": -2, "label": "é"}]', "--json")
    assert result.returncode == 0, result.stderr
    assert from_json(result.stdout)["kuro/result"] == {"x": 1, "y": -2, "label": "é"}
    argv = kuro("run", cid, "run", "--args-json", '["a", "b", "c"]')
    assert argv.returncode == 3 and argv.stdout == "hello, kuro\n"


def test_args_json_that_is_not_a_json_list_is_bad_input(kuro: Kuro) -> None:
    cid = _component_cid(kuro)
    for bad in ("[1", '{"a": 1}', "[1e400]"):
        result = kuro("run", cid, "add", "--args-json", bad)
        assert result.returncode == 2 and result.stderr.startswith("kuro: error:"), (bad, result.stderr)
    both = kuro("run", cid, "add", "1", "--args-json", "[1]")
    assert both.returncode == 2 and "not both" in both.stderr


def test_isolation_process_runs_the_guest_in_a_worker_and_the_summary_says_so(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--isolation", "process")
    assert (result.returncode, result.stdout) == (0, "hello, kuro\n")
    assert "isolation process" in result.stderr
    receipt = from_json(kuro("run", cid, "add", "40", "2", "--isolation", "process", "--json").stdout)
    assert (receipt["kuro/isolation"], receipt["kuro/exit-code"]) == ("process", 42)
    assert "seccomp" in receipt["kuro/worker"]["hardening"]


def test_an_unknown_isolation_is_bad_input(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--isolation", "vm")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_a_component_exports_words_are_read_by_its_wit_parameter_types(kuro: Kuro) -> None:
    cid = _component_cid(kuro)

    def result(*words: str) -> Any:
        got = kuro("run", cid, *words, "--json")
        assert got.returncode == 0, got.stderr
        return from_json(got.stdout).get("kuro/result")  # none for an option that is none

    assert result("add", "40", "-0x2") == 38
    assert result("echo-color", "green") == "green"
    assert result("echo-opt", "7") == 7 and result("echo-opt", "null") is None
    assert result("echo-list", "[1, 2, 3]") == [1, 2, 3]
    assert result("echo-point", '{"x": 1, "y": 2, "label": "a b"}') == {"x": 1, "y": 2, "label": "a b"}
    assert result("echo-shape", '{"circle": 0.5}') == {"circle": 0.5}
    assert result("sum-bytes", '{"/": {"bytes": "AQID"}}') == 6
    assert result("kuro:fixtures/calc@1.0.0#double", "21") == 42  # interface#function
    argv = kuro("run", cid, "run", "a", "-b", "c")  # run(args: list<string>): the words as they are
    assert argv.returncode == 3 and argv.stdout == "hello, kuro\n"


def test_a_word_that_does_not_fit_its_wit_parameter_is_one_typed_line(kuro: Kuro) -> None:
    cid = _component_cid(kuro)
    for words, why in [
        (["add", "3", "x"], "argument 1 'x' is not a s32 (parameter b of func(a: s32, b: s32) -> s32)"),
        (["add", "3"], "func(a: s32, b: s32) -> s32 takes 2 argument(s), 1 given"),
        (["add", "3", "0x100000000"], "parameter b (s32): 4294967296 does not fit s32"),
        (["echo-color", "purple"], "'purple' is not one of ['red', 'green', 'blue']"),
        (["echo-list", "[1, 2"], "argument 0 '[1, 2' is not JSON"),
        (["echo-list", '["a"]'], "parameter l (list<u32>)[0]: 'a' is not an integer"),
        (["echo-list", "[" * 100_000], "is not JSON (JSON nested too deeply to read)"),
        (["echo-list", "[" * 500 + "]" * 500], "nested too deeply"),
        (["echo-point", '"x"'], "parameter p (record"),
    ]:
        got = kuro("run", cid, *words)
        assert got.returncode == 2, (words, got)
        line = one_error_line(got)
        assert line.startswith("kuro: error:") and why in line, (words[:1], line)


def _blocks(home: Path) -> set[str]:
    return {p.name for p in (home / "blocks").rglob("*") if p.is_file()}


def test_an_op_id_answered_unknown_stores_no_receipt_block_and_names_none(
    kuro: Kuro, home: Path, tmp_path: Path
) -> None:
    # `unknown` is the ledger's answer, not a receipt: nothing is stored for it as if it were one
    spin = add_guest(kuro, "spin.wat")
    argv = ["run", spin, "run", "--op-id", "crashed", "--timeout-ms", "60000"]
    crashed_run(home, tmp_path, argv, "crashed")
    before = _blocks(home)
    again = kuro(*argv)
    assert again.returncode == 1 and "status unknown" in again.stderr
    assert "receipt-not-stored" not in again.stderr and "bafy" not in again.stderr
    as_json = kuro(*argv, "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["kuro/status"] == "unknown"
    assert _blocks(home) == before


# ---- an op id that reads as a CID is still an op id: `kuro receipt show` resolves REF explicitly

_CID_LIKE_OP = str(raw_cid(b"an operation id, not a block"))  # a valid CID no block here has


def test_an_op_id_that_parses_as_a_cid_is_shown_as_the_operation_when_no_receipt_block_has_that_cid(
    kuro: Kuro,
) -> None:
    cid = add_guest(kuro, "hello.wat")
    for op_id in (_CID_LIKE_OP, "bafyop-not-a-cid-but-looks-like-one"):
        ran = kuro("run", cid, "run", "--op-id", op_id)
        assert ran.returncode == 0, ran.stderr
        shown = kuro("receipt", "show", op_id, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["kuro/op-id"] == op_id
        explicit = kuro("receipt", "show", "--op-id", op_id, "--json")
        assert explicit.returncode == 0 and json.loads(explicit.stdout)["kuro/op-id"] == op_id


def test_a_ref_that_is_both_a_stored_receipt_cid_and_an_op_id_shows_the_receipt_and_says_how_to_see_the_op(
    kuro: Kuro,
) -> None:
    cid = add_guest(kuro, "hello.wat")
    first = kuro("run", cid, "run")
    receipt_cid = first.stderr.split("receipt ", 1)[1].split()[0]
    assert kuro("run", cid, "exit", "3", "--op-id", receipt_cid).returncode == 3  # an op id named like that CID
    by_cid = kuro("receipt", "show", receipt_cid, "--json")
    assert by_cid.returncode == 0 and json.loads(by_cid.stdout)["kuro/exit-code"] == 0
    assert f"kuro receipt show --op-id {receipt_cid}" in by_cid.stderr
    by_op = kuro("receipt", "show", "--op-id", receipt_cid, "--json")
    assert by_op.returncode == 0 and json.loads(by_op.stdout)["kuro/exit-code"] == 3


def test_a_receipt_cid_is_shown_whatever_state_the_ledger_is_in(kuro: Kuro, home: Path) -> None:
    # a receipt by its CID needs no ledger: looking there too (is it also an op id?) must not cost the receipt
    cid = add_guest(kuro, "hello.wat")
    receipt_cid = kuro("run", cid, "run").stderr.split("receipt ", 1)[1].split()[0]
    (home / "ledger.sqlite").write_bytes(b"not a database, a damaged ledger file" * 100)
    shown = kuro("receipt", "show", receipt_cid, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["kuro/exit-code"] == 0
    assert "ledger" in shown.stderr and len(shown.stderr.splitlines()) == 1  # why the op-id check was not made
    by_op = kuro("receipt", "show", "--op-id", receipt_cid)  # an operation does need it: said in one line
    assert by_op.returncode == 1 and "[ledger-corrupt]" in by_op.stderr and len(by_op.stderr.splitlines()) == 1


def test_receipt_show_takes_a_ref_or_an_op_id_not_both_nor_neither(kuro: Kuro) -> None:
    for args in (("receipt", "show"), ("receipt", "show", "x", "--op-id", "y")):
        refused = kuro(*args)
        assert refused.returncode == 2 and "error:" in refused.stderr and len(refused.stderr.splitlines()) == 1
    missing = kuro("receipt", "show", "--op-id", _CID_LIKE_OP)
    assert missing.returncode == 1 and "no operation" in missing.stderr
