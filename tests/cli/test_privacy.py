"""A secret a guest prints is found nowhere under the home afterwards — unless keeping output was asked for.

The whole home is searched byte for byte (blocks, the ledger's SQLite files and
journal, refs, the module cache): the receipts the CLI persists keep the output's
CID, byte count and a redacted preview, never the raw bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Kuro

SECRET = b"AKIAQZ4SECRETKEY7X2M"  # an AWS-access-key shape the redactor knows
# The guest holds the line shifted by one and shifts it back as it runs, so the secret is not in the guest's
# own bytes (nor in its compiled module): whatever the search below finds came from the output.
LEAKY = """(module
  (import "kuro" "write" (func $w (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\\6c\\66\\7a\\3b\\21\\42\\4c\\4a\\42\\52\\5b\\35\\54"
    "\\46\\44\\53\\46\\55\\4c\\46\\5a\\38\\59\\33\\4e\\0b")
  (func (export "run") (result i32) (local $i i32)
    (loop $l
      (i32.store8 (local.get $i) (i32.sub (i32.load8_u (local.get $i)) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 26))))
    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 26))) (i32.const 0)))"""


def _found_under(home: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture
def leaky(kuro: Kuro, tmp_path: Path) -> str:
    source = tmp_path / "leaky.wat"
    source.write_text(LEAKY)
    added = kuro("guest", "add", str(source))
    assert added.returncode == 0, added.stderr
    return added.stdout.split()[0]


@pytest.mark.parametrize("ledgered", [False, True])
def test_a_printed_secret_is_not_on_disk_after_the_run(kuro: Kuro, home: Path, leaky: str, ledgered: bool) -> None:
    extra = ["--op-id", "op-secret"] if ledgered else []
    ran = kuro("run", leaky, "run", *extra)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.encode() == b"key: " + SECRET + b"\n"  # the person at the terminal sees it, live
    assert _found_under(home, SECRET) == []
    if ledgered:
        replay = kuro("run", leaky, "run", *extra)
        assert SECRET.decode() not in replay.stdout  # a replay shows the redacted preview
    shown = kuro("receipt", "show", "op-secret" if ledgered else ran.stderr.split("receipt ")[-1].split()[0])
    assert shown.returncode == 0, shown.stderr
    assert SECRET.decode() not in shown.stdout and "redacted preview" in shown.stdout


@pytest.mark.parametrize("ledgered", [False, True])
def test_keep_output_keeps_it_in_the_private_output_store_only(
    kuro: Kuro, home: Path, leaky: str, ledgered: bool
) -> None:
    extra = ["--op-id", "op-kept"] if ledgered else []
    ran = kuro("run", leaky, "run", "--keep-output", *extra)
    assert ran.returncode == 0, ran.stderr
    found = _found_under(home, SECRET)
    assert found and all(path.startswith("output/") for path in found), found
    shown = kuro("receipt", "show", "op-kept" if ledgered else ran.stderr.split("receipt ")[-1].split()[0])
    assert SECRET.decode() in shown.stdout
