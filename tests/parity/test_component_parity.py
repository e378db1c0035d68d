"""The same component, two engines: every component fixture gives the same answer on wasmtime and on V8.

Each ``guests/components/fixtures/*.toml`` case whose guest is a component runs through
``kuro_wasm.run`` (wasmtime) and through ``tools/component_host.mjs`` (node: the
component transpiled by ``jco transpile --instantiation async``, with kuro:host
written in JavaScript over the same blocks). Compared: the exit code, the
stdout and stderr CIDs, the typed result (``kuro/result``), ``kuro/reads``, the
denials, ``kuro/fs-root-after`` (fs writes mint the same kuro.fs blocks), which
output bound stopped the run (``kuro/capped-by``: bytes or chunks) and a trap's kind
(``stack-overflow``, ``unreachable``, … — never its engine's message).
``max_value_bytes`` is enforced by both. Not compared, and why, per case: fuel
and memory limits (V8 has neither), and load errors (kuro's model decides them
before any engine runs). Needs ``node`` and ``tools/node_modules``; without them
it is skipped, saying why (CI may not skip).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.cache import cache_for
from kuro_wasm.host.engine import EngineConfig
from kuro_wasm.host.fixtures import load_case
from kuro_wasm.host.kinds.component import KIND
from kuro_wasm.host.loader import LoadFailure, add_guest, prepare
from kuro_wasm.model.fixture import Case, generated_files, parse_case
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.sessions import guest, session

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS = ROOT / "tools"
HOST = TOOLS / "component_host.mjs"
JCO = TOOLS / "node_modules" / ".bin" / "jco"
ALL_CAPS = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]
_COMPONENT_FIXTURES = sorted(
    p for p in (ROOT / "guests" / "components" / "fixtures").glob("*.toml") if 'guest = "component:' in p.read_text()
)

pytestmark = pytest.mark.parity
sys.path.insert(0, str(TOOLS))


def _why_skip() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not JCO.exists():
        return "tools/node_modules has no jco: run `npm ci --prefix tools`"
    return None


class _Recording(MemoryBlockStore):
    """A memory store that remembers every block, to hand the same blocks to the node host."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[str, bytes] = {}

    def put(self, data: bytes, codec: str = "raw") -> str:
        cid = super().put(data, codec)
        self.blocks[cid] = bytes(data)
        return cid


@pytest.fixture(scope="module")
def transpiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name → the jco-transpiled module of each component guest (built from guests/components/)."""
    reason = _why_skip()
    if reason is not None:
        pytest.skip(reason)
    import build_components

    out = tmp_path_factory.mktemp("jco")
    found = {}
    for name, wasm in build_components.build(ROOT / "build" / "components").items():
        subprocess.run(
            [str(JCO), "transpile", str(wasm), "-o", str(out / name), "--name", name,
             "--instantiation", "async", "--no-typescript", "-q"],
            check=True, timeout=300,
        )  # fmt: skip
        found[name] = out / name / f"{name}.js"
    return found


def _lowered_json(value: Any) -> Any:
    """The lowered form as JSON: tuples as lists, bytes as DAG-JSON bytes, ints past 2**53 as strings."""
    if isinstance(value, bytes):
        return {"/": {"bytes": base64.b64encode(value).decode()}}
    if isinstance(value, (list, tuple)):
        return [_lowered_json(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**53:
        return {"$big": str(value)}
    return value


def _from_js(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"/"} and set(value["/"]) == {"bytes"}:
            return base64.b64decode(value["/"]["bytes"])
        if set(value) == {"$big"}:
            return int(value["$big"])
        return {k: _from_js(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_js(v) for v in value]
    return value


def _left_out(case: dict[str, Any]) -> str | None:
    """Why a component fixture is not compared across engines, or None (it is)."""
    expect, limits = case["expect"], case.get("limits", {})
    if expect["outcome"] == "load-error":
        return "a load error is decided by kuro's model before any engine runs"
    if "fuel" in limits or "max_memory_bytes" in limits:
        return "V8 has no fuel or memory limit"
    return None


def _case(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


FIXTURES = [p for p in _COMPONENT_FIXTURES if _left_out(_case(p)) is None]


def test_only_load_errors_and_limits_v8_lacks_are_left_out_of_parity() -> None:
    left = {p.stem: _left_out(_case(p)) for p in _COMPONENT_FIXTURES if _left_out(_case(p)) is not None}
    assert len(FIXTURES) >= 30 and len(left) < len(FIXTURES)
    for stem, reason in left.items():
        case = _case(ROOT / "guests" / "components" / "fixtures" / f"{stem}.toml")
        wasmtime_only = {"fuel", "max_memory_bytes"}
        assert case["expect"]["outcome"] == "load-error" or wasmtime_only & set(case.get("limits", {}))
        assert reason


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_component_fixture_gives_the_same_answer_on_wasmtime_and_v8(
    path: Path, transpiled: dict[str, Path], tmp_path: Path
) -> None:
    _both_engines_agree(_case(path), load_case(path), transpiled, tmp_path)


def test_denials_past_the_bound_fold_alike_on_both_engines(transpiled: dict[str, Path], tmp_path: Path) -> None:
    """300 refused fs.read calls on distinct paths: 256 entries naming their path, then one counted path-less entry
    (kuro_wasm.host.context.RunContext.deny) — on V8 too. A case too long to be a fixture file (256 denials)."""
    paths = [f"p{i}" for i in range(300)]
    data = {
        "description": "300 distinct refused reads",
        "guest": "component:typed",
        "export": "run",
        "args": ["many", *paths],
        "grant": ["guest/invoke"],
        "expect": {"exit_code": 0, "outcome": "ok"},
    }
    receipt = _both_engines_agree(data, parse_case("denials-past-the-bound", data), transpiled, tmp_path)
    read = "kuro:host/fs@1.0.0#read"
    assert receipt["kuro/denials"] == [
        *({"kuro/import": read, "kuro/capability": "fs/read", "kuro/path": p} for p in paths[:256]),
        {"kuro/import": read, "kuro/capability": "fs/read", "kuro/count": 44},
    ]


@pytest.mark.parametrize(
    ("export", "n", "max_value_bytes"),
    [("write", 1000, 1000), ("write", 1001, 1000), ("write-twice", 600, 1000), ("write-unchecked", 5, 1000),
     ("blocking", 1000, 1000), ("blocking", 4097, 8192)],
)  # fmt: skip
def test_a_wasi_write_past_its_permit_traps_on_both_engines(
    export: str, n: int, max_value_bytes: int, transpiled: dict[str, Path], tmp_path: Path
) -> None:
    """WASI 0.2's write permits (check-write, at most 4096 bytes a blocking-write-and-flush): the same trap on
    V8 (guests/components/text/stream-permits.wat; tests/host/test_component_hostile.py says which trap)."""
    data = {"description": "d", "guest": "text:stream-permits", "export": export, "args": [n],
            "limits": {"max_value_bytes": max_value_bytes}, "expect": {"exit_code": 0, "outcome": "ok"}}  # fmt: skip
    _both_engines_agree(data, parse_case("permits", data), transpiled, tmp_path)


@pytest.mark.parametrize("name", ["poll-nothing", "exit-at-start", "fault-at-start", "handles-after-a-drop"])
def test_a_component_breaking_or_ending_in_wasi_ends_alike_on_both_engines(
    name: str, transpiled: dict[str, Path], tmp_path: Path
) -> None:
    """Component text of tests/host/test_component_hostile.py, each export ``f``: a poll of no pollables (the
    guest's trap, never a wait), wasi:cli/exit or a call past a bound in a start function (exit 1, a trap),
    handles reused after a drop (0)."""
    data = {"description": "d", "guest": f"text:{name}", "export": "f", "limits": {"timeout_ms": 20_000},
            "expect": {"exit_code": 0, "outcome": "ok"}}  # fmt: skip
    _both_engines_agree(data, parse_case(name, data), transpiled, tmp_path)


def _guest(named: str, transpiled: dict[str, Path], tmp_path: Path) -> tuple[bytes, Path]:
    """The component's bytes and its jco-transpiled module: ``component:NAME`` built from guests/components/,
    ``text:NAME`` the component text guests/components/text/NAME.wat (transpiled here)."""
    kind, name = named.split(":", 1)
    if kind == "component":
        import build_components

        return build_components.build(ROOT / "build" / "components", [name])[name].read_bytes(), transpiled[name]
    wasm = bytes(wasmtime.wat2wasm((ROOT / "guests" / "components" / "text" / f"{name}.wat").read_text("utf-8")))
    (tmp_path / f"{name}.wasm").write_bytes(wasm)
    subprocess.run(
        [str(JCO), "transpile", str(tmp_path / f"{name}.wasm"), "-o", str(tmp_path / name), "--name", name,
         "--instantiation", "async", "--no-typescript", "-q"],
        check=True, timeout=300,
    )  # fmt: skip
    return wasm, tmp_path / name / f"{name}.js"


def _both_engines_agree(
    case: dict[str, Any], parsed: Case, transpiled: dict[str, Path], tmp_path: Path, *, break_import: str | None = None
) -> dict[str, Any]:
    """Run ``case`` on wasmtime and on V8 over the same blocks, assert they agree, and return wasmtime's receipt.

    ``break_import`` names an import of the V8 host that throws a JavaScript error of its own."""
    wasm, module = _guest(case["guest"], transpiled, tmp_path)
    store = _Recording()
    fs = Fs.empty(store)
    for file, data in generated_files(parsed.name, "fs_generated", parsed.fs_generated, parsed.fs).items():
        fs = fs.write(file, data).fs
    grant = case.get("grant", None if "mode" in case else ALL_CAPS)
    sess = session("s-parity", fs.root, case.get("mode", "terminal-repo"), grant=grant)
    cid = add_guest(store, wasm)
    args = case.get("args", [])
    stdin = case.get("stdin")
    limits = case.get("limits", {})
    spec = guest(cid, case["export"], args, env=case.get("env"), argv0=case.get("argv0"))
    receipt = run(sess, spec, store=store, fs=fs,
                  stdin=None if stdin is None else stdin.encode(), home=tmp_path / "home", **limits)  # fmt: skip
    ready = prepare(store, cid, EngineConfig(), cache_for(tmp_path / "home"))
    assert not isinstance(ready, LoadFailure), ready
    entry = KIND.entry(ready.shape, case["export"], args)
    assert not isinstance(entry, str), entry
    request = {
        "module": str(module),
        "export": case["export"],
        "func": entry.typed.to_data(),
        "args": _lowered_json(entry.args),
        "grant": sorted(sess.grant),
        "stdin": None if stdin is None else base64.b64encode(stdin.encode()).decode(),
        "root": fs.root,
        "blocks": {c: base64.b64encode(b).decode() for c, b in store.blocks.items()},
        "max_output_bytes": Limits.from_options(limits).max_output_bytes,
        "max_output_chunks": Limits.from_options(limits).max_output_chunks,
        "timeout_ms": limits.get("timeout_ms", 120_000),
        "env": case.get("env", {}),
        "argv0": case.get("argv0", cid),
        "spec_args": args if all(isinstance(a, str) for a in args) else [],
        "max_value_bytes": Limits.from_options(limits).value_bound(),
        "break_import": break_import,
    }
    done = subprocess.run(
        ["node", "--experimental-wasm-extended-const", str(HOST)],
        input=json.dumps(request), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    v8 = json.loads(done.stdout)
    assert (v8["exit_code"], v8["outcome"]) == (receipt["kuro/exit-code"], receipt["kuro/outcome"]), (v8, receipt)
    assert v8["stdout_cid"] == receipt["kuro/stdout-cid"], (base64.b64decode(v8["stdout"]), receipt["kuro/stdout"])
    assert v8["stderr_cid"] == receipt["kuro/stderr-cid"], (base64.b64decode(v8["stderr"]), receipt["kuro/stderr"])
    assert _from_js(v8.get("result")) == receipt.get("kuro/result")
    assert v8["reads"] == receipt["kuro/reads"]
    assert v8["denials"] == receipt["kuro/denials"]
    assert v8["fs_root_after"] == receipt.get("kuro/fs-root-after")  # fs.write / fs.rm mint the same blocks
    assert v8["capped_by"] == receipt.get("kuro/capped-by")  # the same bound (bytes, chunks) stopped the output
    trap = receipt.get("kuro/trap")
    want, kind = (trap["kind"] if trap is not None else None), v8.get("trap_kind")
    # a pair where V8 names two kinds with one message (test_v8_parity.V8_AMBIGUOUS_TRAPS): either agrees
    assert want in kind if isinstance(kind, list) else kind == want, (v8, trap)
    return receipt


@pytest.mark.parametrize(
    ("n", "stdin", "max_value_bytes"),
    [(0, "", 1000), (0, "abc", 1000), (3, "", 1000), (5000, "x" * 4000, 1000), (10, "x" * 4000, 1000)],
)
def test_a_wasi_stdin_read_answers_alike_on_both_engines(
    n: int, stdin: str, max_value_bytes: int, transpiled: dict[str, Path], tmp_path: Path
) -> None:
    """One input-stream.read of n bytes (guests/components/text/stdin-read.wat): a read of 0 asks for nothing (never
    "closed", even at the end of input), and what one read hands back is bounded by max_value_bytes."""
    data = {"description": "d", "guest": "text:stdin-read", "export": "read", "args": [n], "stdin": stdin,
            "limits": {"max_value_bytes": max_value_bytes}, "expect": {"exit_code": 0, "outcome": "ok"}}  # fmt: skip
    receipt = _both_engines_agree(data, parse_case("stdin-read", data), transpiled, tmp_path)
    assert receipt["kuro/result"] == (2**32 - 1 if stdin == "" and n else min(n, len(stdin), max_value_bytes))


def test_a_host_functions_own_error_is_a_host_error_on_both_engines(
    transpiled: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a host function (made on purpose in stdin's read) is the host's error (70), not the guest's trap."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise TypeError("broken on purpose")

    monkeypatch.setattr("kuro_wasm.host.wasi_p2._read", broken)
    data = {"description": "d", "guest": "text:stdin-read", "export": "read", "args": [1], "stdin": "x",
            "expect": {"exit_code": 70, "outcome": "host-error"}}  # fmt: skip
    receipt = _both_engines_agree(
        data, parse_case("broken", data), transpiled, tmp_path, break_import="wasi:io/streams#InputStream.read"
    )
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (70, "host-error")
