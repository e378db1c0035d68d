"""Numbers and input too large for the machine are refused with the bound named, before anything starts;
a run whose receipt the home cannot take still shows it, says so, and exits 74."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cli_helpers import GUESTS, Kuro, add_guest, one_error_line

from kuro_fs.errors import BlockStoreError
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.home import blocks_dir
from kuro_wasm.cli.kuro import main
from kuro_wasm.cli.run import DEFAULT_MAX_STDIN, EXIT_NOT_STORED
from kuro_wasm.model.limits import MAX_WORKERS


def test_kuro_workers_above_the_maximum_is_refused_naming_it(kuro: Kuro) -> None:
    cat = add_guest(kuro, "cat.wat")
    result = kuro("run", cat, "run", "--isolation", "process", env={"KURO_WORKERS": str(MAX_WORKERS + 1)})
    line = one_error_line(result)
    assert f"KURO_WORKERS must be an integer from 1 to {MAX_WORKERS}" in line and "[host-error]" in line


def test_under_an_op_id_a_pool_that_cannot_exist_records_no_operation(kuro: Kuro) -> None:
    # Refused before the operation is claimed: nothing ran, so it must not be burned as unknown.
    cat = add_guest(kuro, "cat.wat")
    env = {"KURO_WORKERS": str(MAX_WORKERS + 1)}
    result = kuro("run", cat, "run", "--isolation", "process", "--op-id", "w1", env=env)
    assert "[host-error]" in one_error_line(result)
    assert "w1" not in kuro("ledger", "list").stdout
    retried = kuro("run", cat, "run", "--op-id", "w1")  # in-process this time: its first run
    assert retried.returncode == 0, retried.stderr


def test_batch_local_above_the_maximum_is_a_usage_error_before_anything_runs(kuro: Kuro, tmp_path: Path) -> None:
    hello = add_guest(kuro, "hello.wat")
    lines = tmp_path / "one.jsonl"
    lines.write_text(json.dumps({"guest": hello, "export": "run"}) + "\n", encoding="utf-8")
    result = kuro("batch", str(lines), "--local", str(10**8))
    assert result.returncode == 2
    assert f"--local takes 1 to {MAX_WORKERS} workers, got 100000000" in one_error_line(result)


def test_stdin_from_a_file_larger_than_the_bound_is_refused_before_the_run(kuro: Kuro, tmp_path: Path) -> None:
    cat = add_guest(kuro, "cat.wat")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 11)
    result = kuro("run", cat, "run", "--stdin", str(big), "--max-stdin", "10")
    line = one_error_line(result)
    assert result.returncode == 2 and "more than --max-stdin 10 bytes" in line and "[stdin-too-large]" in line
    assert result.stdout == ""  # nothing ran
    exact = kuro("run", cat, "run", "--stdin", str(big), "--max-stdin", "11")
    assert exact.returncode == 0 and exact.stdout == "x" * 11


def test_stdin_read_whole_for_an_operation_is_bounded_and_no_operation_is_recorded(kuro: Kuro) -> None:
    cat = add_guest(kuro, "cat.wat")
    result = kuro("run", cat, "run", "--stdin", "-", "--op-id", "op-big", "--max-stdin", "4", input="hello\n")
    assert result.returncode == 2 and "[stdin-too-large]" in one_error_line(result)
    assert kuro("receipt", "show", "op-big").returncode == 1  # the operation was never started


def test_the_default_stdin_bound_is_documented() -> None:
    assert f"default {DEFAULT_MAX_STDIN}" in " ".join((GUESTS.parent / "docs" / "cli.md").read_text().split())


def _refuse_puts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The home's block store refuses every write from now on (a full or read-only disk)."""

    def refuse(self: FileBlockStore, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        raise BlockStoreError("No space left on device")

    monkeypatch.setattr(FileBlockStore, "put", refuse)


def _main(home: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--home", str(home), *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _hello(home: Path) -> tuple[str, str]:
    """hello.wat added to the home, and the empty fs root, stored there before the disk fills."""
    code, out, err = _main(home, "guest", "add", str(GUESTS / "hello.wat"))
    assert code == 0, err
    return out.split()[0], str(Fs.empty(FileBlockStore(blocks_dir(home))).root)


def test_a_receipt_the_home_cannot_store_is_still_shown_and_exits_74(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hello, empty = _hello(home)
    _refuse_puts(monkeypatch)
    code, out, err = _main(home, "run", hello, "run", "--fs", empty)
    assert code == EXIT_NOT_STORED == 74
    assert out == "hello, kuro\n"
    assert "ok · exit code 0" in err and "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith("could not be stored in " + str(home) + " (read-only or full?) [receipt-not-stored]")
    )


def test_an_unstorable_receipt_is_still_printed_as_json(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hello, empty = _hello(home)
    _refuse_puts(monkeypatch)
    code, out, err = _main(home, "run", hello, "run", "--fs", empty, "--json")
    assert code == 74
    receipt = json.loads(out)
    assert receipt["kuro/outcome"] == "ok" and receipt["kuro/exit-code"] == 0
    assert "[receipt-not-stored]" in err


def test_an_unstorable_denial_is_still_shown_and_exits_74(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, empty = _hello(home)
    _refuse_puts(monkeypatch)
    code, _, err = _main(home, "run", "ls", "-la", "--fs", empty)
    assert code == 74
    assert "argv-not-a-process" in err and "[receipt-not-stored]" in err


def test_an_export_name_that_is_not_unicode_is_refused_before_the_guest_loads(kuro: Kuro) -> None:
    hello = add_guest(kuro, "hello.wat")
    result = kuro("run", hello, "\udcff")  # what a shell passes for the byte 0xff
    line = one_error_line(result)
    assert result.returncode == 2 and "export is not valid Unicode" in line


def _refuse_new_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The home's block store takes no new block from now on (a full disk: a block it holds is not rewritten)."""
    from kuro_fs.cid import cid_for

    def refuse(self: FileBlockStore, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        known = cid_for(data, codec)
        if self.has(known):
            return known
        raise BlockStoreError("No space left on device")

    monkeypatch.setattr(FileBlockStore, "put", refuse)


def _batch_file(tmp_path: Path, lines: list[dict[str, object]]) -> str:
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("json_output", [False, True])
def test_batch_receipts_the_home_cannot_store_are_all_still_shown_and_exit_74(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_output: bool
) -> None:
    code, out, err = _main(home, "guest", "add", str(GUESTS / "batch.wat"))
    assert code == 0, err
    guest = out.split()[0]
    Fs.empty(FileBlockStore(blocks_dir(home)))  # the default fs root, there before the disk fills
    monkeypatch.setattr("kuro_wasm.batch.driver.dask_available", lambda: False)  # this machine's pool: no cluster
    path = _batch_file(tmp_path, [{"guest": guest, "export": "echo", "args": [n]} for n in range(3)])
    _refuse_new_blocks(monkeypatch)
    code, out, err = _main(home, "batch", path, "--local", "1", *(["--json"] if json_output else []))
    assert code == EXIT_NOT_STORED and "Traceback" not in err, err
    if json_output:
        shown = [json.loads(line) for line in out.splitlines()]
        assert [r["kuro/args"] for r in shown] == [[n] for n in range(3)]  # every line, in input order
        assert all(r["kuro/outcome"] == "ok" for r in shown)
    else:
        rows = sorted(line.split("\t") for line in out.splitlines())
        assert rows == [[str(n + 1), "ok", "0", "-"] for n in range(3)]  # shown, with no receipt CID
    assert "3 receipt(s) could not be stored in " + str(home) in err and "[receipt-not-stored]" in err
