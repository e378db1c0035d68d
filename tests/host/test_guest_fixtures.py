"""Every file in guests/fixtures/*.toml is one case; this one parametrized test runs them all.

Fixture format (TOML, one case per file; adding a case is adding a file)::

    description = "what the case shows"
    guest = "hello"            # guests/<name>.wat, or "c/<name>" (guests/c/<name>.wasm, a WASI command),
                               # or "@absent" (a CID not in the store), or "@bytes:<text>" (those bytes as a raw block)
    export = "run"
    args = [40, 2]             # optional: numbers, or strings (a WASI command's argv[1:])
    env = { LANG = "C" }       # optional: a WASI command's environment
    argv0 = "cat"              # optional: a WASI command's argv[0] (default: the guest's CID)
    mode = "terminal-build"    # optional (default terminal-repo)
    grant = ["guest/invoke"]   # optional: replaces the mode's grant (default: the mode's grant
                               # when mode is given, else every capability)
    stdin = "text"             # optional
    [fs]                       # optional: path = "content" written into the session's fs root
    [limits]                   # optional: timeout_ms, max_output_bytes, max_memory_bytes, fuel
    [expect]                   # exit_code, outcome (required); stdout, stderr, timed_out, truncated,
                               # stdout_bytes, trap_kind, error_contains, denials (list of
                               # {import, capability, path?}; default none), reads (count), fuel_consumed,
                               # fs_after (false = no write; a table = exact file contents after)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hostkit import ALL_CAPS, GUESTS, make_fs, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.receipt import KEYS
from kuro_wasm.model.sessions import guest, session

FIXTURES = sorted((GUESTS / "fixtures").glob("*.toml"))
_CASE_KEYS = {
    "description", "guest", "export", "args", "env", "argv0", "mode", "grant", "stdin", "fs", "limits", "expect",
}  # fmt: skip
_LIMIT_KEYS = {"timeout_ms", "max_output_bytes", "max_memory_bytes", "fuel"}
_EXPECT_KEYS = {
    "exit_code",
    "outcome",
    "stdout",
    "stderr",
    "timed_out",
    "truncated",
    "stdout_bytes",
    "trap_kind",
    "error_contains",
    "denials",
    "reads",
    "fuel_consumed",
    "fs_after",
}


def _guest(store: MemoryBlockStore, spec: str) -> str:
    if spec == "@absent":
        return raw_cid(b"a guest nobody stored")
    if spec.startswith("@bytes:"):
        return store.put(spec.removeprefix("@bytes:").encode("utf-8"))
    if spec.startswith("c/"):
        return add_guest(store, (GUESTS / f"{spec}.wasm").read_bytes())
    return add_guest(store, wat(spec))


def _files(fs: Fs) -> dict[str, bytes]:
    walked = fs.walk(".")
    assert walked.ok, walked.receipt
    out = {}
    for entry in walked.value:
        if entry["kind"] == "file":
            read = fs.read(entry["path"])
            assert read.ok
            out[entry["path"]] = read.value
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_guest_fixture(path: Path, home: Path) -> None:
    case: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    expect = case["expect"]
    # A misspelt key would silently check nothing: every key must be one this test reads.
    assert set(case) <= _CASE_KEYS and {"description", "guest", "export", "expect"} <= set(case), set(case)
    assert set(case.get("limits", {})) <= _LIMIT_KEYS and set(expect) <= _EXPECT_KEYS, (case.get("limits"), expect)
    assert {"exit_code", "outcome"} <= set(expect)
    store = MemoryBlockStore()
    fs = make_fs(store, case.get("fs", {}))
    grant = case.get("grant", None if "mode" in case else ALL_CAPS)
    sess = session("s-fixture", fs.root, case.get("mode", "terminal-repo"), grant=grant)
    cid = _guest(store, case["guest"])
    command = guest(cid, case["export"], case.get("args", []), case.get("env"), case.get("argv0"))
    stdin = case.get("stdin")
    receipt = run(
        sess,
        command,
        store=store,
        stdin=None if stdin is None else stdin.encode("utf-8"),
        home=home,
        **case.get("limits", {}),
    )

    assert receipt["kuro/type"] == "kuro/receipt", receipt
    assert set(receipt) <= {f"kuro/{k}" for k in KEYS}
    assert receipt["kuro/isolation"] == "wasmtime"
    assert receipt["kuro/exit-code"] == expect["exit_code"], receipt
    assert receipt["kuro/outcome"] == expect["outcome"], receipt
    assert receipt["kuro/engine"]["name"] == "wasmtime"
    assert receipt["kuro/engine"]["version"].split(".")[0] == "50"
    bounds = {"max_table_elements": 1_000_000, "max_instances": 64, "max_tables": 64, "max_memories": 16}
    bounds["max_output_chunks"] = 100_000
    limits = {"timeout_ms": 120_000, "max_output_bytes": 1_048_576} | bounds | case.get("limits", {})
    assert receipt["kuro/limits"] == {k.replace("_", "-"): v for k, v in limits.items()}  # the limits applied
    assert isinstance(receipt["kuro/reads"], list) and isinstance(receipt["kuro/denials"], list)
    if "stdout" in expect:
        assert receipt["kuro/stdout"] == expect["stdout"].encode("utf-8")
        assert receipt["kuro/stdout-cid"] == raw_cid(expect["stdout"].encode("utf-8"))
    if "stderr" in expect:
        assert receipt["kuro/stderr"] == expect["stderr"].encode("utf-8")
    assert receipt.get("kuro/timed-out?", False) is expect.get("timed_out", False)
    assert receipt.get("kuro/truncated?", False) is expect.get("truncated", False)
    if "stdout_bytes" in expect:
        assert receipt["kuro/stdout-bytes"] == expect["stdout_bytes"]
    if "trap_kind" in expect:
        assert receipt["kuro/trap"]["kind"] == expect["trap_kind"]
        assert receipt["kuro/trap"]["message"]
    else:
        assert "kuro/trap" not in receipt
    if "error_contains" in expect:
        assert expect["error_contains"] in receipt["kuro/error"]
    want = [{f"kuro/{k}": v for k, v in d.items()} for d in expect.get("denials", [])]
    assert receipt["kuro/denials"] == want  # no denial a fixture did not expect
    if "reads" in expect:
        assert len(receipt["kuro/reads"]) == expect["reads"]
    if "fuel_consumed" in expect:
        assert receipt["kuro/fuel-consumed"] == expect["fuel_consumed"]
    else:
        assert "kuro/fuel-consumed" not in receipt
    after = expect.get("fs_after")
    if after is False:
        assert "kuro/fs-root-after" not in receipt
    elif isinstance(after, dict):
        root = receipt["kuro/fs-root-after"]
        assert root != fs.root
        assert _files(Fs(store, root)) == {k: v.encode("utf-8") for k, v in after.items()}
