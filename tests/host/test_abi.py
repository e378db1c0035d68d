"""The ABI table, error codes, bounds checks and reason mapping (pure: no wasmtime needed)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.fs import DENIAL_REASONS
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode

ROOT = Path(__file__).resolve().parents[2]
I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def test_error_codes_are_minus_one_to_minus_eight() -> None:
    assert sorted(int(c) for c in ErrorCode) == list(range(-9, 0))


def test_every_import_is_in_module_kuro_and_returns_one_i32() -> None:
    assert abi.IMPORT_MODULE == "kuro"
    assert [s.name for s in abi.IMPORTS] == ["write", "read", "fs_read", "fs_read_at", "fs_write", "fs_ls", "fs_rm"]
    assert all(s.results == ("i32",) for s in abi.IMPORTS)


def test_capabilities_are_the_documented_ones() -> None:
    assert {s.name: s.capability for s in abi.IMPORTS} == {
        "write": None,
        "read": "stdin/read",
        "fs_read": "fs/read",
        "fs_read_at": "fs/read",
        "fs_write": "fs/write",
        "fs_ls": "fs/ls",
        "fs_rm": "fs/rm",
    }


def test_every_kuro_fs_denial_reason_has_an_error_code() -> None:
    assert set(DENIAL_REASONS) <= set(abi.REASON_CODES)
    assert abi.REASON_CODES["missing-capability"] == ErrorCode.DENIED
    assert abi.REASON_CODES["not-found"] == ErrorCode.NOT_FOUND
    assert abi.REASON_CODES["directory-not-empty"] == ErrorCode.NOT_EMPTY
    assert abi.REASON_CODES["block-missing"] == ErrorCode.IO


def test_an_unknown_reason_is_io_not_a_crash() -> None:
    assert abi.error_for_reason("a-reason-from-the-future") == ErrorCode.IO
    assert abi.error_for_reason(None) == ErrorCode.IO


@settings(max_examples=200, deadline=None)
@given(size=st.integers(min_value=0, max_value=2**32), ptr=I32, length=I32)
def test_a_checked_range_never_leaves_memory(size: int, ptr: int, length: int) -> None:
    found = abi.checked_range(size, ptr, length)
    if found is not None:
        start, end = found
        assert 0 <= start <= end <= size
        assert end - start == length % 2**32


def test_negative_lengths_and_pointers_are_huge_not_small() -> None:
    assert abi.checked_range(65536, 0, -1) is None
    assert abi.checked_range(65536, -1, 0) is None
    assert abi.checked_range(2**32, -1, 1) == (2**32 - 1, 2**32)
    assert abi.checked_range(65536, -16, 32) is None  # wraps to 16 in u32 arithmetic: still outside
    assert abi.checked_range(2**32, 2**31 - 1, 2**31 + 2) is None  # one past 4 GiB


def test_an_empty_range_at_the_end_is_in_bounds() -> None:
    assert abi.checked_range(65536, 65536, 0) == (65536, 65536)
    assert abi.checked_range(65536, 65537, 0) is None


def test_imports_outside_the_table_are_named() -> None:
    assert "module 'env'" in (abi.check_import("env", "write", ("i32",) * 3, ("i32",), "func") or "")
    assert "not in the kuro ABI" in (abi.check_import("kuro", "exec", (), (), "func") or "")
    assert "expected a function" in (abi.check_import("kuro", "write", (), (), "memory") or "")
    mismatch = abi.check_import("kuro", "fs_read_at", ("i32",) * 5, ("i32",), "func")
    assert mismatch is not None and "kuro.fs_read_at" in mismatch and "i64" in mismatch


def test_every_abi_import_passes_its_own_check() -> None:
    for spec in abi.IMPORTS:
        assert abi.check_import("kuro", spec.name, spec.params, spec.results, "func") is None


def test_args_must_fit_the_signature() -> None:
    assert abi.check_args(("i32", "i64", "f32", "f64"), [1, -(2**63), 1, 2.5]) is None
    assert abi.check_args(("i32",), [2**32 - 1]) is None
    assert "does not fit" in (abi.check_args(("i32",), [-(2**31) - 1]) or "")
    assert "not an integer" in (abi.check_args(("i32",), [1.5]) or "")
    assert "not a number" in (abi.check_args(("i32",), [True]) or "")
    assert "not a number" in (abi.check_args(("f64",), ["1"]) or "")
    assert "not supported" in (abi.check_args(("v128",), [1]) or "")
    assert "1 argument" in (abi.check_args(("i32",), []) or "")


def test_the_abi_document_names_every_import_and_error_code() -> None:
    text = (ROOT / "docs" / "abi.md").read_text(encoding="utf-8")
    for spec in abi.IMPORTS:
        assert f"`{spec.name}`" in text
        assert f'(import "kuro" "{spec.name}"' in text  # a WAT example per import
    for code in ErrorCode:
        assert f"| {int(code)} |" in text and code.name in text


def test_every_wat_example_in_the_abi_document_loads_and_uses_only_the_abi() -> None:
    import re

    import wasmtime

    from kuro_wasm.host.loader import check_imports

    text = (ROOT / "docs" / "abi.md").read_text(encoding="utf-8")
    examples = re.findall(r"```wat\n(.*?)```", text, re.S)
    used = set()
    for source in examples:
        module = wasmtime.Module(wasmtime.Engine(), source)
        assert check_imports(wasmtime.wat2wasm(source)) is None, source
        assert any(e.name == "run" for e in module.exports)
        used |= {imp.name for imp in module.imports}
    assert used == {spec.name for spec in abi.IMPORTS}
