"""kuro-browser-v0: the original kuro's browser guests run unchanged; only modules of exactly their shape are theirs.

The ported guests and their expected values are fixtures (``guests/fixtures/the-original-*.toml``);
these tests pin the classification boundary against kuro ABI v1 and the edges of the protocol.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
import wasmtime
from hostkit import make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import run
from kuro_wasm.host.kinds import KURO_ABI_V1, KURO_BROWSER_V0, classify
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wasm_shape import WasmShape, read_shape

FS_READ2 = '(import "kuro" "fs_read" (func $fs_read (param i32 i32) (result i32)))'
MEMORY = '(memory (export "memory") 1)'
RUN2 = '(func (export "run") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1)))'
RUN1 = '(func (export "run") (param i32) (result i32) (local.get 0))'


def _shape(body: str) -> WasmShape:
    return read_shape(bytes(wasmtime.wat2wasm(f"(module {body})")))


def _run(body: str, export: str = "run", args: list[Any] | None = None, **kw: Any) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = make_fs(store, kw.pop("files", {"greeting.txt": "guest reads via cap"}))
    spec = guest(add_guest(store, f"(module {body})"), export, args or [], fs_read_path=kw.pop("fs_read_path", None))
    return run(make_session(fs, kw.pop("grant", None)), spec, store=store, fs=fs, home=False, **kw)


# ---- which kind: exactly the original's shape is browser-v0, everything else stays kuro ABI v1


@pytest.mark.parametrize(
    "body",
    [f"{MEMORY} {RUN2}", f"{FS_READ2} {MEMORY} {RUN1}", f"{FS_READ2} {MEMORY} {RUN2}",
     f'{FS_READ2} {MEMORY} (func (export "run") (result i32) (i32.const 0))'],
)  # fmt: skip
def test_the_originals_shapes_are_browser_v0(body: str) -> None:
    assert classify(_shape(body)) is KURO_BROWSER_V0


@pytest.mark.parametrize(
    "body",
    [RUN2, f"{MEMORY} {RUN1}", f'{MEMORY} (func (export "run") (param i32 i32))', f'{MEMORY} (func (export "main")'
     " (param i32 i32) (result i32) (i32.const 0))", f'{MEMORY} (func (export "run") (param i64 i32) (result i32)'
     " (i32.const 0))", "", f'(import "kuro" "write" (func (param i32 i32 i32) (result i32))) {MEMORY} {RUN2}'],
)  # fmt: skip
def test_import_free_modules_of_any_other_shape_and_abi_v1_modules_stay_kuro_abi_v1(body: str) -> None:
    assert classify(_shape(body)) is KURO_ABI_V1


def test_the_two_parameter_fs_read_without_memory_is_browser_v0s_own_load_error() -> None:
    reason = classify(_shape(f"{FS_READ2} {RUN1}"))
    assert isinstance(reason, str) and "kuro-browser-v0" in reason and "memory" in reason


def test_the_two_parameter_fs_read_with_a_wrong_run_says_what_run_must_be() -> None:
    reason = classify(_shape(f'{FS_READ2} {MEMORY} (func (export "run") (param f32) (result i32) (i32.const 0))'))
    assert isinstance(reason, str) and "run(i32 ...) -> i32" in reason


def test_the_two_parameter_fs_read_beside_an_abi_v1_import_gets_abi_v1s_reason() -> None:
    reason = classify(_shape(f'{FS_READ2} (import "kuro" "write" (func (param i32 i32 i32) (result i32))) {MEMORY}'))
    assert isinstance(reason, str) and "kuro.fs_read" in reason and "signature" in reason


def test_an_abi_v1_error_is_not_hidden_behind_the_browser_profile() -> None:
    reason = classify(_shape('(import "kuro" "exec" (func))'))
    assert isinstance(reason, str) and "kuro.exec" in reason and "browser" not in reason


# ---- the protocol


def test_text_without_a_nul_runs_to_the_end_of_memory() -> None:
    fill = f'{MEMORY} (func (export "run") (param i32 i32) (result i32) (memory.fill (i32.const 2048) (i32.const 97) (i32.const 63488)) (i32.const 0))'  # noqa: E501
    r = _run(fill, args=[0, 0])
    assert r["kuro/exit-code"] == 0 and r["kuro/stdout"] == b"a" * (65536 - 2048)


def test_text_longer_than_the_output_cap_is_measured_not_copied() -> None:
    """32 MiB of text without a NUL and a 1 KiB cap: the run is output-capped with nothing kept, and the host never
    holds the text (it once gathered all of it, then joined it: twice the guest's memory, up to 8 GiB)."""
    pages = 512
    body = f'(memory (export "memory") {pages}) (func (export "run") (param i32 i32) (result i32) (memory.fill (i32.const 2048) (i32.const 97) (i32.const {pages * 65536 - 2048})) (i32.const 0))'  # noqa: E501
    tracemalloc.start()
    try:
        r = _run(body, args=[0, 0], max_output_bytes=1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = pages * 65536 - 2048
    assert (r["kuro/outcome"], r["kuro/stdout"], r["kuro/dropped-bytes"]) == ("output-capped", b"", text)
    assert peak < 4 << 20, f"the host held {peak} bytes"


def test_nothing_at_2048_is_no_output_and_a_zero_result_is_ok() -> None:
    r = _run(f"{MEMORY} {RUN2}", args=[0, 0])
    assert (r["kuro/exit-code"], r["kuro/outcome"], r["kuro/stdout"], r["kuro/stdout-bytes"]) == (0, "ok", b"", 0)


def test_a_trap_leaves_no_chunk_even_with_text_at_2048() -> None:
    body = f'{MEMORY} (data (i32.const 2048) "partial") (func (export "run") (param i32 i32) (result i32) unreachable)'
    r = _run(body, args=[1, 2])
    assert (r["kuro/outcome"], r["kuro/trap"]["kind"], r["kuro/stdout"]) == ("trap", "unreachable", b"")


def test_text_that_is_not_utf8_is_kept_as_written() -> None:
    body = f'{MEMORY} (data (i32.const 2048) "\\ff\\fe ok") {RUN2}'
    assert _run(body, args=[1, 1])["kuro/stdout"] == b"\xff\xfe ok"


def test_the_spec_names_the_export_that_runs_and_its_text_is_read_too() -> None:
    body = f'{MEMORY} {RUN2} (data (i32.const 2048) "other") (func (export "other") (result i32) (i32.const 3))'
    r = _run(body, "other")
    assert (r["kuro/export"], r["kuro/exit-code"], r["kuro/stdout"]) == ("other", 3, b"other")


def test_args_follow_abi_v1s_rules() -> None:
    r = _run(f"{MEMORY} {RUN2}", args=[1])
    assert r["kuro/outcome"] == "load-error" and "2 argument" in r["kuro/error"]


# ---- fs_read(buf_ptr, len): the file the spec names


FS_GUEST = f'{FS_READ2} {MEMORY} (func (export "run") (param $ptr i32) (param $len i32) (result i32) (call $fs_read (local.get $ptr) (local.get $len)))'  # noqa: E501


def test_fs_read_copies_at_most_len_and_returns_the_files_size() -> None:
    r = _run(FS_GUEST, args=[2048, 5], fs_read_path="greeting.txt")
    assert (r["kuro/exit-code"], r["kuro/stdout"]) == (19, b"guest")
    assert len(r["kuro/reads"]) == 1 and r["kuro/command"]["kuro/fs-read-path"] == "greeting.txt"


@pytest.mark.parametrize(
    ("path", "args", "code"),
    [("nope.txt", [2048, 5], -2), ("docs", [2048, 5], -3), ("greeting.txt", [65530, 100], -5),
     ("greeting.txt", [-1, 1], -5)],
)  # fmt: skip
def test_fs_read_failures_are_abi_v1_error_codes(path: str, args: list[int], code: int) -> None:
    r = _run(FS_GUEST, args=args, fs_read_path=path, files={"greeting.txt": "hi", "docs/a.txt": "A"})
    assert r["kuro/exit-code"] == code and r["kuro/reads"] == [] and r["kuro/denials"] == []


def test_fs_read_without_fs_read_is_minus_one_and_recorded_with_the_specs_path() -> None:
    r = _run(FS_GUEST, args=[2048, 5], fs_read_path="greeting.txt", grant=["guest/invoke"])
    assert r["kuro/exit-code"] == -1
    assert r["kuro/denials"] == [{"kuro/import": "fs_read", "kuro/capability": "fs/read", "kuro/path": "greeting.txt"}]


def test_a_named_file_under_tmp_with_fs_scratch_is_the_empty_scratch_not_the_root() -> None:
    r = _run(
        FS_GUEST, args=[2048, 5], fs_read_path="tmp/a.txt", grant=["guest/invoke", "fs/scratch"],
        files={"tmp/a.txt": "in the root"},
    )  # fmt: skip
    assert r["kuro/exit-code"] == -2 and r["kuro/denials"] == [] and r["kuro/reads"] == []


def test_a_browser_guest_without_fs_read_needs_no_path_in_its_spec() -> None:
    assert _run(f"{MEMORY} {RUN2}", args=[40, 2])["kuro/exit-code"] == 42
