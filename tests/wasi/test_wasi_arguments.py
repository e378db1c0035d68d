"""Arguments that are no value of their witx type trap, on kuro's WASI as on wasmtime's — never an errno.

A flags argument with a bit its witx type does not name (``fd_fdstat_set_flags`` with 0x20,
``fd_filestat_set_times`` with 0x10), an enum argument past its last case (a clock id of 4, whence 3,
advice 6) and a pointer not aligned to what it points at (``fd_fdstat_get`` into an odd address) end
the guest: wasmtime's WASI (50.0.1) fails the call before it does anything, and the witx rules say a
misaligned pointer shall trap. kuro answered ``EINVAL`` for the first two and wrote the struct anyway
for the third. The trap is the guest's (outcome ``trap``, exit 134, the call and the rule in its
message), never a host error, and what the guest wrote before it stays written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import wasmtime
from wasikit import WasiCase, run_builtin, run_kuro, write_tree

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.importer import import_path
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import wasi
from kuro_wasm.model.sessions import guest, session


def _program(name: str, args: tuple[int, ...]) -> str:
    """Print "before", make the call, print "after" (so a call that answers, whatever, prints both)."""
    params = wasi.FUNCTIONS[name].params
    imports = f'(import "wasi_snapshot_preview1" "{name}" (func $call (param {" ".join(params)}) (result i32)))'
    if name != "fd_write":
        imports += '(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))'
    else:
        imports = imports.replace("$call", "$fd_write")
    call = "(drop (call ${} {}))".format(
        "fd_write" if name == "fd_write" else "call",
        " ".join(f"({t}.const {v})" for t, v in zip(params, args, strict=True)),
    )
    return f"""(module {imports} (memory (export "memory") 1)
      (data (i32.const 3000) "before\\n") (data (i32.const 3008) "after\\n")
      (func $say (param i32 i32)
        (i32.store (i32.const 2000) (local.get 0)) (i32.store (i32.const 2004) (local.get 1))
        (drop (call $fd_write (i32.const 1) (i32.const 2000) (i32.const 1) (i32.const 2008))))
      (func (export "_start")
        (call $say (i32.const 3000) (i32.const 7))
        {call}
        (call $say (i32.const 3008) (i32.const 6))))"""


TRAPPING = [
    ("fd_fdstat_set_flags", (3, 0x20)),  # a bit fdflags does not name
    ("fd_fdstat_set_flags", (1, 0x20)),  # on stdio, and on a number not open: before the descriptor
    ("fd_fdstat_set_flags", (99, 0x20)),
    ("fd_fdstat_set_flags", (3, 0x10000)),  # past the u16
    ("fd_filestat_set_times", (3, 0, 0, 0x10)),
    ("fd_filestat_set_times", (1, 0, 0, 0x10)),
    ("fd_filestat_set_times", (3, 0, 0, -1)),
    ("path_filestat_set_times", (3, 0, 400, 1, 0, 0, 0x10)),
    ("path_filestat_set_times", (3, 2, 400, 1, 0, 0, 0)),  # lookupflags: only symlink_follow
    ("path_filestat_get", (3, 2, 400, 1, 512)),
    ("path_open", (3, 0, 400, 1, 0x10, 0, 0, 0, 512)),  # oflags
    ("path_open", (3, 0, 400, 1, 0, 0, 0, 0x20, 512)),  # fdflags
    ("path_open", (3, 0, 400, 1, 0, 1 << 30, 0, 0, 512)),  # rights: 30 of them
    ("fd_fdstat_set_rights", (3, 1 << 30, 0)),
    ("clock_time_get", (4, 0, 512)),  # clockid: four cases
    ("clock_res_get", (4, 512)),
    ("fd_seek", (3, 0, 3, 512)),  # whence: three
    ("fd_advise", (3, 0, 0, 6)),  # advice: six
    ("sock_shutdown", (3, 4)),  # sdflags: rd, wr
    ("sock_recv", (3, 0, 0, 8, 512, 516)),  # riflags: recv_peek, recv_waitall
    ("sock_accept", (3, 0x20, 512)),  # fdflags
    ("proc_raise", (31,)),  # signal: none … sys, 31 cases
    ("fd_fdstat_get", (1, 1)),  # fdstat: aligned to 8
    ("fd_fdstat_get", (3, 4)),
    ("fd_filestat_get", (1, 4)),  # filestat: 8
    ("fd_prestat_get", (3, 2)),  # prestat: 4
    ("args_sizes_get", (1, 512)),  # size: 4
    ("fd_write", (1, 2, 1, 512)),  # the iovec array: 4
    ("fd_write", (1, 3000, 0, 513)),  # nwritten: 4
    ("fd_read", (0, 3000, 0, 514)),
    ("clock_time_get", (1, 0, 516)),  # timestamp: 8
]


@pytest.mark.parametrize(("name", "args"), TRAPPING, ids=[f"{n}{a}" for n, a in TRAPPING])
def test_an_argument_no_witx_value_traps_on_both(tmp_path: Path, name: str, args: tuple[int, ...]) -> None:
    wasm = tmp_path / "case.wasm"
    wasm.write_bytes(wasmtime.wat2wasm(_program(name, args)))
    root = tmp_path / "root"
    write_tree(root, {"a": b"x"})
    case = WasiCase(wasm, root=root)
    builtin, kuro = run_builtin(case), run_kuro(case)
    assert builtin.trap is not None and builtin.stdout == b"before\n"
    assert kuro.trap is not None and kuro.stdout == b"before\n"
    assert kuro.files == builtin.files == {"a": b"x"}
    assert name in kuro.trap


def test_the_trap_is_the_guests_and_names_the_rule(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    root = tmp_path / "root"
    write_tree(root, {"a": b"x"})
    cid = add_guest(store, wasmtime.wat2wasm(_program("fd_fdstat_set_flags", (3, 0x20))))
    sess = session("s", import_path(store, root, workers=1), "terminal-build", grant=["guest/invoke", "fs/read"])
    receipt = run(sess, guest(cid, "_start"), store=store, home=False)
    assert receipt["kuro/outcome"] == "trap" and receipt["kuro/exit-code"] == 134
    assert receipt["kuro/trap"]["kind"] == "trap"
    message = receipt["kuro/trap"]["message"]
    assert "fd_fdstat_set_flags" in message and "fdflags" in message and "0x20" in message
    assert receipt["kuro/stdout"] == b"before\n"
    assert "kuro/error" not in receipt


def test_the_same_calls_with_witx_values_answer(tmp_path: Path) -> None:
    """The rule is the type's, not a blanket: every defined bit, the last enum case, an aligned pointer answer."""
    for name, args in [
        ("fd_fdstat_set_flags", (3, 0x1F)),
        ("fd_filestat_set_times", (3, 0, 0, 0x5)),
        ("clock_time_get", (3, 0, 512)),
        ("fd_seek", (3, 0, 2, 512)),
        ("fd_advise", (3, 0, 0, 5)),
        ("fd_fdstat_get", (1, 8)),
        ("fd_fdstat_set_rights", (3, 0, 0)),
    ]:
        wasm = tmp_path / f"{name}.wasm"
        wasm.write_bytes(wasmtime.wat2wasm(_program(name, args)))
        root = tmp_path / f"root-{name}"
        write_tree(root, {"a": b"x"})
        kuro = run_kuro(WasiCase(wasm, root=root))
        assert kuro.trap is None and kuro.stdout == b"before\nafter\n", name


def test_a_start_function_given_an_argument_no_witx_value_traps_as_the_entry_would(tmp_path: Path) -> None:
    """The module's start function runs inside instantiation and may call WASI: the same trap, the same receipt."""
    wat = """(module
      (import "wasi_snapshot_preview1" "fd_fdstat_set_flags" (func $set (param i32 i32) (result i32)))
      (memory (export "memory") 1)
      (func $init (drop (call $set (i32.const 1) (i32.const 0x20))))
      (start $init)
      (func (export "_start")))"""
    store = MemoryBlockStore()
    cid = add_guest(store, wasmtime.wat2wasm(wat))
    sess = session("s", import_path(store, _root(tmp_path), workers=1), "terminal-build", grant=["guest/invoke"])
    receipt = run(sess, guest(cid, "_start"), store=store, home=False)
    assert receipt["kuro/outcome"] == "trap" and receipt["kuro/exit-code"] == 134
    message = receipt["kuro/trap"]["message"]
    assert "fd_fdstat_set_flags" in message and "fdflags 0x20" in message


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "start-root"
    write_tree(root, {"a": b"x"})
    return root
