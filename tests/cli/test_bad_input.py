"""Bad input gets one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import GUESTS, Kuro, add_guest, one_error_line

from kuro_wasm.cli.context import error_line

EMPTY_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"  # a valid CID no store here holds


def test_a_malformed_cid_is_refused_in_one_line_naming_the_rule(kuro: Kuro) -> None:
    result = kuro("run", EMPTY_CID[:-1], "run")
    line = one_error_line(result)
    assert result.returncode == 2
    assert "[invalid-cid]" in line and EMPTY_CID[:-1] in line


def test_a_cidv0_is_read_as_a_guest_name_and_a_missing_one_is_a_guest_not_found_receipt(kuro: Kuro) -> None:
    # Issue 17: real IPFS names (CIDv0) are read; kuro still mints CIDv1.
    result = kuro("run", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "run")
    assert result.returncode == 127
    assert "guest-not-found" in result.stderr and "Traceback" not in result.stderr


def test_a_malformed_cidv0_is_refused_as_an_invalid_cid(kuro: Kuro) -> None:
    result = kuro("run", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbd", "run")
    assert result.returncode == 2
    assert "[invalid-cid]" in one_error_line(result)


def test_an_unknown_guest_cid_is_a_receipt_with_exit_127(kuro: Kuro) -> None:
    result = kuro("run", EMPTY_CID, "run")
    assert result.returncode == 127
    assert "guest-not-found" in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_receipt_cid_is_one_line_and_exit_1(kuro: Kuro) -> None:
    result = kuro("receipt", "show", EMPTY_CID)
    line = one_error_line(result)
    assert result.returncode == 1
    assert "no receipt" in line and "[not-found]" in line


def test_an_unknown_operation_id_is_one_line_and_exit_1(kuro: Kuro) -> None:
    result = kuro("receipt", "show", "op-that-never-ran")
    assert result.returncode == 1
    assert "op-that-never-ran" in one_error_line(result)


def test_a_missing_file_is_named_in_one_line(kuro: Kuro) -> None:
    result = kuro("guest", "add", "no-such-guest.wat")
    line = one_error_line(result)
    assert result.returncode == 2
    assert line == "kuro: error: no-such-guest.wat: No such file or directory"


def test_invalid_wat_shows_the_file_line_and_column(kuro: Kuro, tmp_path: Path) -> None:
    bad = tmp_path / "bad.wat"
    bad.write_text('(module\n  (func (export "run") (result i32)\n    i32.cnst 1))\n')
    line = one_error_line(kuro("guest", "add", str(bad)))
    assert line.startswith(f"kuro: error: {bad}:3:5: invalid WAT:"), line


def test_bytes_that_are_neither_wat_nor_wasm_are_a_load_error_naming_the_file(kuro: Kuro, tmp_path: Path) -> None:
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\x00asm\x01\x00\x00\x00\xff\xff")
    result = kuro("guest", "add", str(GUESTS / "hello.wat"), str(junk))
    assert result.returncode == 2  # bad input, like invalid WAT
    line = one_error_line(result)
    assert line.startswith(f"kuro: error: {junk}: not a valid wasm module") and line.endswith("[load-error]")


def test_wat_that_parses_but_does_not_validate_names_the_file(kuro: Kuro, tmp_path: Path) -> None:
    wat = tmp_path / "typo.wat"
    wat.write_text('(module (func (export "x") (result i32) (i32.add (i32.const 1))))')
    result = kuro("guest", "add", str(wat))
    assert result.returncode == 2
    assert one_error_line(result).startswith(f"kuro: error: {wat}: not a valid wasm module: type mismatch")


def test_an_unknown_capability_is_refused_with_the_known_ones(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--grant", "fs/teleport")
    line = one_error_line(result)
    assert result.returncode == 2
    assert "unknown capability 'fs/teleport'" in line and "fs/read" in line


def test_an_unknown_mode_is_refused_with_the_known_ones(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--mode", "terminal-safe")
    line = one_error_line(result)
    assert result.returncode == 2
    assert "terminal-safe" in line and "terminal-repo" in line


def test_an_argv_looking_command_is_denied_as_argv_not_a_process(kuro: Kuro) -> None:
    result = kuro("run", "ls", "-la", "/tmp")
    assert result.returncode == 77
    first = result.stderr.splitlines()[0]
    assert first == "kuro: denied: argv-not-a-process: `ls -la /tmp` looks like a shell command"
    assert "kuro guest add" in result.stderr and "Traceback" not in result.stderr


def test_an_argv_denial_under_an_op_id_is_recorded_in_the_ledger_as_the_library_records_it(kuro: Kuro) -> None:
    denied = kuro("run", "ls", "-la", "--op-id", "op-argv")
    assert denied.returncode == 77, denied.stderr
    shown = kuro("receipt", "show", "op-argv", "--json")
    assert shown.returncode == 0, shown.stderr
    recorded = json.loads(shown.stdout)
    assert (recorded["kuro/status"], recorded["kuro/reason"]) == ("done", "argv-not-a-process")
    assert recorded["kuro/receipt-cid"] in denied.stderr  # the block the command named
    again = kuro("run", "ls", "-la", "--op-id", "op-argv")
    assert again.returncode == 77 and "argv-not-a-process" in again.stderr  # replayed: the same operation
    other = kuro("run", "ls", "-l", "--op-id", "op-argv")
    assert other.returncode == 1 and "[operation-conflict]" in one_error_line(other)


def test_a_lone_program_name_is_denied_as_argv_too(kuro: Kuro) -> None:
    result = kuro("run", "python3")
    assert result.returncode == 77
    assert "argv-not-a-process" in result.stderr


def test_a_non_numeric_guest_argument_is_one_line(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "add", "two", "3")
    assert result.returncode == 2
    assert "'two' is not a number" in one_error_line(result)


def test_a_missing_export_is_one_line(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid)
    assert result.returncode == 2
    assert "missing EXPORT" in one_error_line(result)


def test_an_unknown_command_is_one_line_with_a_pointer_to_help(kuro: Kuro) -> None:
    result = kuro("teleport")
    line = one_error_line(result)
    assert result.returncode == 2
    assert "invalid choice: 'teleport'" in line and "--help" in line


def test_an_unknown_option_is_one_line(kuro: Kuro) -> None:
    result = kuro("fs", "ls", "--colour")
    assert result.returncode == 2
    assert "unrecognized arguments: --colour" in one_error_line(result)


def test_a_bad_fs_name_is_one_line(kuro: Kuro) -> None:
    result = kuro("fs", "ls", "--name", "../etc")
    assert result.returncode == 2
    assert "bad fs name" in one_error_line(result)


def test_a_missing_fs_path_is_a_refusal_with_its_reason(kuro: Kuro) -> None:
    result = kuro("fs", "cat", "nope.txt")
    assert result.returncode == 1
    assert one_error_line(result) == "kuro: error: cat nope.txt: not-found [fs-denied]"


def test_a_traversal_path_is_refused_as_bad_path(kuro: Kuro) -> None:
    result = kuro("fs", "mkdir", "../escape")
    assert result.returncode == 1
    assert "bad-path" in one_error_line(result)


def test_a_checkout_of_a_history_entry_that_does_not_exist_is_one_line(kuro: Kuro) -> None:
    assert kuro("fs", "mkdir", "docs").returncode == 0
    result = kuro("fs", "checkout", "7")
    assert result.returncode == 2
    assert "no history entry 7" in one_error_line(result)


def test_the_log_of_a_name_never_written_is_one_line(kuro: Kuro) -> None:
    result = kuro("fs", "log", "--name", "scratch")
    assert result.returncode == 1
    assert "no history" in one_error_line(result)


def test_a_corrupt_ref_log_is_one_line_naming_the_line(kuro: Kuro, home: Path) -> None:
    (home / "refs").mkdir()
    (home / "refs" / "main.log").write_text("[1, 2]\n{}\n")  # not a history: a typed error, still one line
    result = kuro("fs", "log")
    assert result.returncode != 0
    assert "ref log line 1" in one_error_line(result)


def test_an_unexpected_exception_is_one_line_that_says_it_is_a_bug() -> None:
    line, code = error_line(TypeError("unsupported operand"))
    assert code == 70
    assert line == "internal error: TypeError: unsupported operand (set KURO_DEBUG=1 for the traceback)"


def test_a_guest_file_given_instead_of_its_cid_says_to_add_it_first(kuro: Kuro, tmp_path: Path) -> None:
    wat = tmp_path / "hello.wat"
    wat.write_text("(module)")
    result = kuro("run", "hello.wat", "run")
    assert result.returncode == 2
    assert "kuro guest add hello.wat" in one_error_line(result)


def test_receipt_show_of_a_block_that_is_not_a_receipt_is_one_line(kuro: Kuro) -> None:
    guest_cid = add_guest(kuro, "hello.wat")  # a raw block: the guest's bytes
    result = kuro("receipt", "show", guest_cid)
    assert result.returncode == 2
    assert one_error_line(result) == (
        f"kuro: error: {guest_cid} is a raw block in the store, but not a receipt [usage]"
    )
    assert kuro("fs", "mkdir", "docs").returncode == 0
    root = kuro("fs", "log").stdout.split()[2]  # a dag-cbor block, but a directory
    result = kuro("receipt", "show", root)
    assert result.returncode == 2
    assert "is a dag-cbor block in the store, but not a receipt" in one_error_line(result)


def test_the_host_mode_is_refused_in_terms_a_shell_user_can_act_on(kuro: Kuro) -> None:
    cid = add_guest(kuro, "hello.wat")
    result = kuro("run", cid, "run", "--mode", "terminal-host")
    line = one_error_line(result)
    assert result.returncode == 2
    assert "--mode terminal-host needs a signed opt-in" in line and "terminal-repo" in line
    assert "signed_opt_in=True" not in line  # the library's hint is a Python keyword, not a CLI option


@pytest.mark.parametrize("limit", ["99999999999999999999999", "9223372036854775808", "0", "-3", "ten"])
def test_a_ledger_page_size_out_of_range_is_a_usage_line(kuro: Kuro, limit: str) -> None:
    result = kuro("ledger", "list", "--limit", limit)
    assert result.returncode == 2
    assert "--limit" in one_error_line(result) and "from 1 to 9223372036854775807" in result.stderr
