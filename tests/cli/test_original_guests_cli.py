"""``kuro run`` with the original kuro's guests and grant names: the browser guests, --fs-read-path, aliases."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import Kuro, add_guest, one_error_line

from kuro_wasm.model.receipt import from_json


def test_the_original_stream_guest_prints_sum_42_and_exits_42(kuro: Kuro) -> None:
    result = kuro("run", add_guest(kuro, "stream.wat"), "run", "40", "2")
    assert (result.returncode, result.stdout) == (42, "sum=42")


def test_the_original_fs_guest_reads_the_file_named_by_fs_read_path_under_the_originals_grant(
    kuro: Kuro, tmp_path: Path
) -> None:
    (tmp_path / "greeting.txt").write_text("guest reads via cap")
    assert kuro("fs", "put", str(tmp_path / "greeting.txt")).returncode == 0
    cid = add_guest(kuro, "guest-fs.wat")
    result = kuro(
        "run", cid, "run", "19", "--fs-read-path", "greeting.txt", "--grant", "guest/invoke", "--grant", "repo/read",
        "--json",
    )  # fmt: skip
    receipt = from_json(result.stdout)
    assert receipt["kuro/exit-code"] == 1803 and result.returncode == 1  # 1803 does not fit an exit status
    assert receipt["kuro/command"]["kuro/fs-read-path"] == "greeting.txt"
    assert receipt["kuro/effective-capabilities"] == ["fs/ls", "fs/read", "guest/invoke"]
    assert receipt["kuro/grant-aliases"] == {"repo/read": ["fs/ls", "fs/read"]}


def test_without_fs_read_path_the_fs_guest_is_a_load_error_that_says_what_is_missing(kuro: Kuro) -> None:
    result = kuro("run", add_guest(kuro, "guest-fs.wat"), "run", "19")
    assert result.returncode == 126
    assert "kuro/fs-read-path" in result.stderr


def test_a_name_in_neither_vocabulary_is_one_error_line_listing_both(kuro: Kuro) -> None:
    result = kuro("run", add_guest(kuro, "stream.wat"), "run", "1", "2", "--grant", "repo/delete")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "repo/delete" in line and "fs/read" in line and "repo/read" in line
