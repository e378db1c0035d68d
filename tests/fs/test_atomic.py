"""kuro_fs.atomic: a named file is either the old content or the new, never torn."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuro_fs.atomic import TMP_PREFIX, start_writeback, sync_filesystem, write_atomic


def test_bytes_land_under_the_final_name(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    assert write_atomic(target, b"hello") == 5
    assert target.read_bytes() == b"hello"


def test_an_iterable_of_chunks_is_written_in_order(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    assert write_atomic(target, [b"ab", b"", b"cd"]) == 4
    assert target.read_bytes() == b"abcd"


def test_a_failure_midway_keeps_the_old_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    target.write_bytes(b"old")

    def chunks() -> Iterator[bytes]:
        yield b"new-part"
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        write_atomic(target, chunks())
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_temporary_files_carry_the_prefix_readers_skip(tmp_path: Path) -> None:
    seen: list[str] = []

    def chunks() -> Iterator[bytes]:
        seen.extend(p.name for p in tmp_path.iterdir())
        yield b"x"

    write_atomic(tmp_path / "x.bin", chunks())
    assert len(seen) == 1 and seen[0].startswith(TMP_PREFIX)


def test_the_mode_is_applied_to_the_new_file(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    write_atomic(target, b"k", mode=0o600)
    assert target.stat().st_mode & 0o777 == 0o600


# ---- the batch primitives


def test_sync_filesystem_syncs_or_says_it_cannot(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert sync_filesystem(fd) in (True, False)  # False only where there is no error-reporting syncfs
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs is Linux's")
def test_a_failed_sync_is_an_os_error_not_a_silent_success(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    can = sync_filesystem(fd)
    os.close(fd)
    if not can:
        pytest.skip("this kernel has no syncfs that reports errors")
    with pytest.raises(OSError):
        sync_filesystem(fd)  # closed: EBADF


def test_start_writeback_is_only_a_hint(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"x" * 100_000)
        start_writeback(fd)
    finally:
        os.close(fd)
    start_writeback(fd)  # even a closed descriptor: nothing raised, nothing promised
    assert target.read_bytes() == b"x" * 100_000
