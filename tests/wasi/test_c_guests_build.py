"""guests/c: every committed ``.wasm`` is exactly what its C or Rust source builds with Debian's toolchain.

``guests/c/build.sh --check`` rebuilds everything in a scratch folder and compares bytes. CI installs
the toolchain (.ci/run), so there these tests may not skip (marker ``toolchain``, see tests/conftest.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from wasikit import C_GUESTS

TOOLCHAIN = [
    Path("/usr/bin/clang"),
    Path("/usr/include/wasm32-wasi"),
    Path("/usr/bin/rustc"),
    Path("/usr/lib/rustlib/wasm32-wasi"),
]
needs_toolchain = pytest.mark.skipif(
    not all(p.exists() for p in TOOLCHAIN), reason="the Debian WASI toolchain is not installed (see .ci/run)"
)
SOURCES = sorted([*C_GUESTS.glob("*.c"), *C_GUESTS.glob("*.rs")])


def check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(folder / "build.sh"), "--check"], capture_output=True, text=True, timeout=300)


def test_every_source_has_its_committed_wasm_and_every_wasm_a_source() -> None:
    assert sorted(p.with_suffix(".wasm") for p in SOURCES) == sorted(C_GUESTS.glob("*.wasm"))
    assert {p.stem for p in SOURCES} >= {"cat", "wc", "ls", "fsops", "envargs", "sort", "clockrand", "walk"}


@pytest.mark.toolchain
@needs_toolchain
def test_the_committed_guests_are_what_their_sources_build() -> None:
    result = check(C_GUESTS)
    assert result.returncode == 0, result.stderr
    assert "every guests/c/*.wasm is what its source builds" in result.stdout


@pytest.mark.toolchain
@needs_toolchain
def test_the_check_names_a_changed_a_missing_and_an_orphan_wasm(tmp_path: Path) -> None:
    copy = tmp_path / "c"
    shutil.copytree(C_GUESTS, copy)
    tampered = bytearray((copy / "cat.wasm").read_bytes())
    tampered[-1] ^= 1
    (copy / "cat.wasm").write_bytes(bytes(tampered))
    (copy / "wc.wasm").unlink()
    (copy / "orphan.wasm").write_bytes(b"\0asm\1\0\0\0")
    result = check(copy)
    assert result.returncode == 1
    assert "guests/c/cat.wasm differs from what its source builds" in result.stderr
    assert "guests/c/wc.wasm is not committed" in result.stderr
    assert "orphan.wasm has no source" in result.stderr
