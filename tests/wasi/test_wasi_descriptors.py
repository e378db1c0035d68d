"""Descriptor numbers and what a directory may be opened with, on kuro's WASI and on wasmtime's, alike.

Each case is a small WAT program calling preview 1 directly; it runs on both runners of
:mod:`wasikit` over the same tree, and both must agree with each other and with the answer written here:

- ``path_open`` gives the **lowest** free descriptor number, as POSIX ``open`` and wasmtime's WASI do: a
  program that closes its stdout and opens a file gets fd 1, and what it then prints goes to the file.
- a directory opened with rights that are not ``fd_write`` (``fd_datasync``, ``fd_allocate``,
  ``fd_filestat_set_size``: the ones wasi-libc and Rust ask for with "write") opens; only ``fd_write``
  makes it ``EISDIR``.
- a positional read of stdout or stderr, or a positional write of stdin, is ``EBADF`` (the descriptor
  is not open that way), before ``ESPIPE`` (it cannot seek), as wasmtime answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import wasmtime
from wasikit import WasiCase, WasiOutcome, differences, run_builtin, run_kuro, write_tree

from kuro_wasm.host.wasi_state import WasiState, initial_fds
from kuro_wasm.model import wasi

_IMPORTS = """
 (import "wasi_snapshot_preview1" "path_open" (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
 (import "wasi_snapshot_preview1" "fd_close" (func $close (param i32) (result i32)))
 (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
 (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
"""
FD_WRITE = 0x40
ALL_RIGHTS = (1 << 29) - 1


def _both(tmp_path: Path, wat: str, files: dict[str, bytes | None]) -> WasiOutcome:
    """Run ``wat`` on both runners over ``files``: what they agree on."""
    wasm = tmp_path / "case.wasm"
    wasm.write_bytes(wasmtime.wat2wasm(wat))
    root = tmp_path / "root"
    write_tree(root, files)
    case = WasiCase(wasm, root=root)
    builtin, kuro = run_builtin(case), run_kuro(case)
    assert differences(builtin, kuro) == []
    return kuro


def test_a_closed_stdout_is_the_number_the_next_open_gets_and_prints_go_to_that_file(tmp_path: Path) -> None:
    wat = f"""(module {_IMPORTS} (memory (export "memory") 1)
      (data (i32.const 0) "out") (data (i32.const 16) "hi\\n")
      (func (export "_start") (local $e i32)
        (drop (call $close (i32.const 1)))
        (local.set $e (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 3) (i32.const 1)
          (i64.const {FD_WRITE}) (i64.const 0) (i32.const 0) (i32.const 100)))
        (if (local.get $e) (then (call $exit (i32.add (i32.const 100) (local.get $e)))))
        (i32.store (i32.const 200) (i32.const 16)) (i32.store (i32.const 204) (i32.const 3))
        (drop (call $write (i32.const 1) (i32.const 200) (i32.const 1) (i32.const 300)))
        (call $exit (i32.load (i32.const 100)))))"""
    done = _both(tmp_path, wat, {})
    assert done.exit_code == 1
    assert done.files == {"out": b"hi\n"}


@pytest.mark.parametrize(
    ("rights", "errno"),
    [(0x1, 0), (0x100, 0), (0x400000, 0), (ALL_RIGHTS & ~FD_WRITE, 0), (FD_WRITE, 31)],
    ids=["fd_datasync", "fd_allocate", "fd_filestat_set_size", "all-but-fd_write", "fd_write-EISDIR"],
)
def test_only_fd_write_keeps_a_directory_from_opening(tmp_path: Path, rights: int, errno: int) -> None:
    wat = f"""(module {_IMPORTS} (memory (export "memory") 1) (data (i32.const 0) "d")
      (func (export "_start")
        (call $exit (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 0)
          (i64.const {rights}) (i64.const 0) (i32.const 0) (i32.const 100)))))"""
    assert _both(tmp_path, wat, {"d/x": b"1"}).exit_code == errno


def _errnos(tmp_path: Path, calls: Sequence[tuple[str, Sequence[int]]], files: dict[str, bytes | None]) -> bytes:
    """The errno of each call (a byte each, printed to stdout), on both runners alike."""
    names = sorted({name for name, _ in calls} | {"fd_write"})
    imports = "".join(
        f'(import "wasi_snapshot_preview1" "{n}" (func ${n} (param {" ".join(wasi.FUNCTIONS[n].params)}) (result i32)))'
        for n in names
    )
    body = "".join(
        f"(i32.store8 (i32.const {4096 + i}) (call ${name} "
        + " ".join(f"({t}.const {v})" for t, v in zip(wasi.FUNCTIONS[name].params, args, strict=True))
        + "))"
        for i, (name, args) in enumerate(calls)
    )
    wat = f"""(module {imports} (memory (export "memory") 1)
      (data (i32.const 200) "\\90\\01\\00\\00\\01\\00\\00\\00") (data (i32.const 400) "a") (data (i32.const 410) "d")
      (func (export "_start") {body}
        (i32.store (i32.const 64) (i32.const 4096)) (i32.store (i32.const 68) (i32.const {len(calls)}))
        (drop (call $fd_write (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 72)))))"""
    return _both(tmp_path, wat, files).stdout


def test_a_positional_read_of_an_output_or_write_of_stdin_is_ebadf_before_espipe(tmp_path: Path) -> None:
    iov, nread = 200, 128  # one iovec: 1 byte at 400
    calls = [
        ("fd_pread", (1, iov, 1, 0, nread)),
        ("fd_pread", (2, iov, 1, 0, nread)),
        ("fd_pwrite", (0, iov, 1, 0, nread)),
        ("fd_pread", (0, iov, 1, 0, nread)),  # stdin and the outputs the way they are open: ESPIPE
        ("fd_pwrite", (1, iov, 1, 0, nread)),
    ]
    assert _errnos(tmp_path, calls, {"a": b"x"}) == bytes([8, 8, 8, 70, 70])


class _Probed(dict[int, object]):
    """A descriptor table that counts the numbers looked up in it."""

    probes = 0

    def __contains__(self, key: object) -> bool:
        _Probed.probes += 1
        return super().__contains__(key)


def test_finding_a_free_descriptor_number_does_not_rescan_the_table() -> None:
    """Opening n descriptors costs O(n) lookups in all, not O(n**2): a program that opens 16384 files
    must not make the host scan 134 million numbers."""
    fds = _Probed(initial_fds(frozenset({"fs/read"})))
    st = WasiState((), (), fds)  # type: ignore[arg-type]
    _Probed.probes = 0
    for _ in range(2000):
        number = st.next_fd()
        assert number is not None
        fds[number] = object()
    assert _Probed.probes < 3 * 2000
    st.release(7)
    assert st.next_fd() == 7


def test_fd_advise_on_stdio_a_directory_or_a_closed_number_is_ebadf_as_on_wasmtime(tmp_path: Path) -> None:
    """``fd_advise`` on stdin, stdout or stderr is ``EBADF`` on wasmtime's WASI (50.0.1: its preview 1 advises
    only a file descriptor), not the ``ESPIPE`` of POSIX ``posix_fadvise`` on a pipe; kuro answers as wasmtime
    does, as for a directory or a number not open. (A file accepts any advice: the fixture cases.)"""
    calls = [("fd_advise", (fd, 0, 0, 0)) for fd in (0, 1, 2)]
    calls += [("fd_advise", (fd, 0, 16, 4)) for fd in (0, 1, 2)]  # DONTNEED over a range, not only NORMAL
    calls += [("fd_advise", (3, 0, 0, 0)), ("fd_advise", (99, 0, 0, 0))]
    assert _errnos(tmp_path, calls, {"a": b"x"}) == bytes([8] * 8)


def test_calls_on_stdio_answer_what_wasmtime_answers(tmp_path: Path) -> None:
    """Every preview 1 call on a descriptor, made on stdin, stdout and stderr: the errno kuro answers is
    wasmtime's (50.0.1). Setting flags (even ones it already has) or times on stdio is ``EBADF`` — kuro
    answered success for flags 0 and any times, and let stdin be made nonblocking —, a bad time-flag pair is
    ``EINVAL`` first; sizing, allocating, syncing, advising, reading a directory of stdio is ``EBADF``;
    seeking and telling ``ESPIPE``; stat succeeds; renumbering moves stdio like any descriptor."""
    iov, out = 200, 1024  # one iovec: 1 byte at 400; where a call's result goes
    calls: list[tuple[str, tuple[int, ...]]] = []
    want: list[int] = []
    for fd in (0, 1, 2):
        calls += [
            ("fd_fdstat_set_flags", (fd, 0)),
            ("fd_fdstat_set_flags", (fd, wasi.FDFLAG_APPEND)),
            ("fd_fdstat_set_flags", (fd, wasi.FDFLAG_NONBLOCK)),
            ("fd_filestat_set_times", (fd, 0, 0, 0)),
            ("fd_filestat_set_times", (fd, 5, 5, wasi.FSTFLAG_ATIM | wasi.FSTFLAG_MTIM)),
            ("fd_filestat_set_times", (fd, 0, 0, wasi.FSTFLAG_MTIM | wasi.FSTFLAG_MTIM_NOW)),
            ("fd_allocate", (fd, 0, 1)),
            ("fd_filestat_set_size", (fd, 0)),
            ("fd_sync", (fd,)),
            ("fd_datasync", (fd,)),
            ("fd_advise", (fd, 0, 0, 0)),
            ("fd_readdir", (fd, out, 64, 0, out + 64)),
            ("fd_prestat_get", (fd, out)),
            ("fd_seek", (fd, 0, 0, out)),
            ("fd_tell", (fd, out)),
            ("fd_filestat_get", (fd, out)),
            ("fd_fdstat_get", (fd, out)),
            ("fd_pread", (fd, iov, 1, 0, out)),
            ("fd_pwrite", (fd, iov, 1, 0, out)),
        ]
        want += [8, 8, 8, 8, 8, 28, 8, 8, 8, 8, 8, 8, 8, 70, 70, 0, 0]
        want += [70, 8] if fd == 0 else [8, 70]
    calls += [("fd_renumber", (0, 0)), ("fd_renumber", (1, 99)), ("fd_renumber", (99, 1)), ("fd_renumber", (2, 3))]
    want += [0, 8, 8, 0]
    assert _errnos(tmp_path, calls, {"a": b"x"}) == bytes(want)


@pytest.mark.parametrize(
    ("fd", "right"), [(0, wasi.Rights.FD_READ), (1, wasi.Rights.FD_WRITE), (2, wasi.Rights.FD_WRITE)]
)
def test_stdio_fdstat_shows_the_rights_wasmtime_shows(tmp_path: Path, fd: int, right: int) -> None:
    """``fd_fdstat_get`` on stdio: unknown filetype, no flags, and one right, base and inheriting alike, as on
    wasmtime (50.0.1; kuro showed ``poll_fd_readwrite`` too and no inheriting rights)."""
    wat = f"""(module
      (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $get (param i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 1)
      (func (export "_start")
        (i32.store8 (i32.const 120) (call $get (i32.const {fd}) (i32.const 96)))
        (i32.store (i32.const 0) (i32.const 96)) (i32.store (i32.const 4) (i32.const 25))
        (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"""
    got = _both(tmp_path, wat, {}).stdout
    assert got == bytes(8) + int(right).to_bytes(8, "little") * 2 + b"\x00"


def test_fd_fdstat_set_rights_answers_what_wasmtime_answers_whatever_the_rights(tmp_path: Path) -> None:
    """``fd_fdstat_set_rights`` on wasmtime's WASI (50.0.1) changes nothing: ``EBADF`` on stdio and on a number
    not open, ``ENOTSUP`` on the preopen, a directory or a file it opened — dropping every right, keeping
    one, or asking for all alike. kuro answered 0 to a narrowing (and ``ENOTCAPABLE`` to a widening); it now
    answers as wasmtime does, so a program behaves the same on both (rights are cut at ``path_open``)."""
    all_rights = int(wasi.ALL_RIGHTS)
    asks = [(0, 0), (int(wasi.Rights.FD_READ), 0), (all_rights, all_rights)]
    fds = (0, 1, 2, 3, 4, 5, 99)  # stdio, the preopen, the directory d and the file a opened first, none
    calls = [("fd_fdstat_set_rights", (fd, base, inheriting)) for fd in fds for base, inheriting in asks]
    want = [8] * 9 + [58] * 9 + [8] * 3
    opens = [
        ("path_open", (3, 0, 410, 1, wasi.OFLAG_DIRECTORY, 0x2000, 0, 0, 3000)),
        ("path_open", (3, 0, 400, 1, 0, int(wasi.Rights.FD_READ), 0, 0, 3004)),
    ]
    got = _errnos(tmp_path, opens + calls, {"a": b"x", "d/x": b"1"})
    assert got == bytes([0, 0, *want])


def test_where_rights_show_wasmtime_and_kuro_differ_as_docs_wasi_md_says(tmp_path: Path) -> None:
    """The differences docs/wasi.md lists ("Descriptor rights"), each runner held to its own answer: wasmtime's
    built-in WASI (50.0.1) ignores the rights ``path_open`` asks for and shows rights made up from the open mode;
    kuro refuses a right the directory does not pass on and shows the rights it enforces."""
    fd_read, path_open = int(wasi.Rights.FD_READ), int(wasi.Rights.PATH_OPEN)
    wat = f"""(module
      (import "wasi_snapshot_preview1" "path_open"
        (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $get (param i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 1)
      (data (i32.const 400) "a") (data (i32.const 410) "d") (data (i32.const 420) "x")
      (func (export "_start")
        (i32.store8 (i32.const 1000) (call $open (i32.const 3) (i32.const 0) (i32.const 400) (i32.const 1)
          (i32.const 0) (i64.const {fd_read}) (i64.const 0) (i32.const 0) (i32.const 500)))
        (i32.store8 (i32.const 1001) (call $open (i32.const 3) (i32.const 0) (i32.const 410) (i32.const 1)
          (i32.const {wasi.OFLAG_DIRECTORY}) (i64.const {path_open}) (i64.const {fd_read}) (i32.const 0)
          (i32.const 504)))
        (i32.store8 (i32.const 1002) (call $open (i32.load (i32.const 504)) (i32.const 0) (i32.const 420)
          (i32.const 1) (i32.const 0) (i64.const {int(wasi.Rights.FD_WRITE)}) (i64.const 0) (i32.const 0)
          (i32.const 508)))
        (drop (call $get (i32.const 3) (i32.const 1008)))
        (drop (call $get (i32.load (i32.const 500)) (i32.const 1032)))
        (i32.store (i32.const 0) (i32.const 1000)) (i32.store (i32.const 4) (i32.const 56))
        (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"""
    wasm = tmp_path / "case.wasm"
    wasm.write_bytes(wasmtime.wat2wasm(wat))
    root = tmp_path / "root"
    write_tree(root, {"a": b"x", "d/x": b"1"})
    case = WasiCase(wasm, root=root)

    def seen(stdout: bytes) -> tuple[list[int], tuple[int, int], tuple[int, int]]:
        """The three errnos, then (base, inheriting) of the preopen and of the file opened for reading."""
        rights = [int.from_bytes(stdout[at : at + 8], "little") for at in (16, 24, 40, 48)]
        return list(stdout[:3]), (rights[0], rights[1]), (rights[2], rights[3])

    every = (1 << 30) - 1
    assert seen(run_builtin(case).stdout) == ([0, 0, 0], (0x7B7FE00, 0xFF7FFFF), (every & ~0x40, every & ~0x40))
    # kuro's preopen: every directory right, passing on every right but the sockets' (docs/wasi.md)
    assert seen(run_kuro(case).stdout) == ([0, 0, 76], (0xFBFFE98, 0xFFFFFFF), (fd_read, 0))
