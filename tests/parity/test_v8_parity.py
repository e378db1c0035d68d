"""Two engines, one fixture suite: every bundled case runs on wasmtime (this host) and on V8
(``tools/kuro_v8_host.mjs``: the same ABIs as JS imports over the same blocks), and the receipts agree.

Compared (:func:`kuro_wasm.model.fixture.parity_view`): exit code, outcome, stdout/stderr CIDs,
``kuro/reads``, ``kuro/denials``, ``kuro/fs-root-after`` (fs writes in JS must mint the same dag-cbor
and UnixFS blocks), the trap kind, timed-out and truncated — never host text or wasmtime's fuel. Two
pairs of trap kinds V8 names with one message (:data:`V8_AMBIGUOUS_TRAPS`) are both in the V8 view, and
wasmtime's kind must be one of the pair.
A case V8 cannot express is marked ``[unsupported] v8 = "why"`` in its file; it is listed here with
its reason, and a case that sets a wasmtime-only limit (fuel, a memory cap, the table/instance/memory
bounds) without that mark fails.
Needs ``node`` and ``tools/node_modules`` (``npm ci --prefix tools``); without them it is skipped,
saying why (CI installs both, so CI does not skip).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kuro_fs.car import write_car
from kuro_fs.fs import Fs
from kuro_wasm.host.fixtures import CaseResult, Setup, bundled_dir, case_files, load_case, run_case, setup
from kuro_wasm.model.fixture import Case, parity_view
from kuro_wasm.model.limits import Limits

ROOT = Path(__file__).resolve().parent.parent.parent
HOST = ROOT / "tools" / "kuro_v8_host.mjs"
CASES = {p.stem: load_case(p) for p in case_files(bundled_dir())}
ON_V8 = sorted(name for name, case in CASES.items() if "v8" not in case.unsupported)
#: Limits the JS API cannot impose (a case setting one must be marked unsupported on v8).
WASMTIME_ONLY_LIMITS = {"fuel", "max_memory_bytes", "max_table_elements", "max_instances", "max_tables", "max_memories"}

pytestmark = pytest.mark.parity


def _why_skip() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH"
    for package in ("@ipld/car", "@ipld/dag-cbor", "@ipld/dag-pb", "ipfs-unixfs", "multiformats"):
        if not (ROOT / "tools" / "node_modules" / package).is_dir():
            return f"tools/node_modules/{package} is missing: run `npm ci --prefix tools`"
    return None


def _node(args: list[str], request: dict[str, Any] | None = None) -> dict[str, Any]:
    why = _why_skip()
    if why is not None:
        print(f"V8 parity skipped: {why}")
        pytest.skip(why)
    proc = subprocess.run(
        ["node", str(HOST), *args],
        input=None if request is None else json.dumps(request).encode(),
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _request(case: Case, ready: Setup, car: Path) -> dict[str, Any]:
    store = ready.store
    with car.open("wb") as out:
        for piece in write_car([ready.fs.root], ((cid, store.get(cid) or b"") for cid in store.cids())):
            out.write(piece)
    limits = Limits.from_options(case.limits)
    args = [{"int": str(a)} if isinstance(a, int) else {"float": a} for a in ready.command["kuro/args"]]
    return {
        "name": case.name,
        "car": str(car),
        "guest": ready.command["kuro/guest"],
        "export": case.export,
        "args": args,
        "fs_root": ready.fs.root,
        "grant": sorted(ready.session.grant),
        "stdin": None if case.stdin is None else base64.b64encode(case.stdin).decode("ascii"),
        "fs_read_path": ready.command.get("kuro/fs-read-path"),
        "env": ready.command.get("kuro/env"),
        "argv0": ready.command.get("kuro/argv0"),
        "limits": {
            "timeout_ms": limits.timeout_ms,
            "max_output_bytes": limits.max_output_bytes,
            "max_output_chunks": limits.max_output_chunks,
        },
    }


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[CaseResult, dict[str, Any]]]:
    """case name → (the wasmtime result, the V8 host's view), each run over the same blocks."""
    work = tmp_path_factory.mktemp("v8")
    ours: dict[str, CaseResult] = {}
    requests = []
    for name in ON_V8:
        case = CASES[name]
        ready = setup(case, bundled_dir())
        requests.append(_request(case, ready, work / f"{name}.car"))
        ours[name] = run_case(case, bundled_dir(), ready=ready)
    theirs = {r["name"]: r for r in _node([], {"cases": requests})["results"]}
    return {name: (ours[name], theirs[name]) for name in ON_V8}


@pytest.mark.parametrize("name", ON_V8)
def test_both_engines_agree(name: str, both: dict[str, tuple[CaseResult, dict[str, Any]]]) -> None:
    ours, theirs = both[name]
    assert ours.status == "pass", ours.problems
    assert ours.receipt is not None
    view = parity_view(ours.receipt)
    keys = set(view) | set(theirs["view"])  # a key only one side reports differs too
    differ = {k: (view.get(k, "<absent>"), theirs["view"].get(k, "<absent>")) for k in sorted(keys)}
    differ = {k: pair for k, pair in differ.items() if not _agree(k, *pair)}
    assert differ == {}, f"wasmtime vs v8 {differ}; v8 said: {theirs['error']}"


#: The trap kinds V8 names with one message (the V8 host answers both; either agrees).
V8_AMBIGUOUS_TRAPS = [["bad-conversion-to-integer", "integer-overflow"], ["indirect-call-to-null", "bad-signature"]]


def _agree(key: str, ours: Any, theirs: Any) -> bool:
    """Equal — or, for the trap kind, wasmtime's is one of the two V8 cannot tell apart (:data:`V8_AMBIGUOUS_TRAPS`)."""
    if key == "trap-kind" and isinstance(theirs, list):
        return theirs in V8_AMBIGUOUS_TRAPS and ours in theirs
    return bool(ours == theirs)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("trap-float-to-int-out-of-range-is-integer-overflow", "integer-overflow"),
        ("trap-bad-conversion-of-nan", "bad-conversion-to-integer"),
        ("trap-indirect-call-signature-mismatch", "bad-signature"),
        ("trap-indirect-call-to-null", "indirect-call-to-null"),
    ],
)
def test_a_trap_v8_cannot_name_exactly_is_both_kinds_there_and_one_on_wasmtime(
    name: str, kind: str, both: dict[str, tuple[CaseResult, dict[str, Any]]]
) -> None:
    """Not vacuous: each pair of kinds V8 says in the same words is met by a case of each kind."""
    ours, theirs = both[name]
    assert ours.receipt is not None and ours.receipt["kuro/trap"]["kind"] == kind
    assert theirs["view"]["trap-kind"] in V8_AMBIGUOUS_TRAPS and kind in theirs["view"]["trap-kind"]


#: What the module docstring promises is compared: receipt key → its key in the view.
PROMISED = {
    "kuro/exit-code": "exit-code",
    "kuro/outcome": "outcome",
    "kuro/capped-by": "capped-by",
    "kuro/stdout-cid": "stdout-cid",
    "kuro/stderr-cid": "stderr-cid",
    "kuro/reads": "reads",
    "kuro/denials": "denials",
    "kuro/fs-root-after": "fs-root-after",
    "kuro/trap": "trap-kind",
    "kuro/timed-out?": "timed-out?",
    "kuro/truncated?": "truncated?",
}


def test_the_view_holds_every_promised_key_and_changes_with_each() -> None:
    """Not vacuous: a receipt key the view dropped would never be compared between the engines."""
    case = CASES["hello-writes-stdout-and-stderr"]
    receipt = run_case(case, bundled_dir()).receipt
    assert receipt is not None
    view = parity_view(receipt)
    assert set(view) == set(PROMISED.values())
    other = {
        "kuro/exit-code": 3,
        "kuro/outcome": "exit",
        "kuro/capped-by": "bytes",
        "kuro/stdout-cid": receipt["kuro/stderr-cid"],
        "kuro/stderr-cid": receipt["kuro/stdout-cid"],
        "kuro/reads": ["bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"],
        "kuro/denials": [{"kuro/import": "fs_read", "kuro/capability": "fs/read"}],
        "kuro/fs-root-after": receipt["kuro/fs-root-cid"],
        "kuro/trap": {"kind": "unreachable", "message": "wasm trap: unreachable"},
        "kuro/timed-out?": True,
        "kuro/truncated?": True,
    }
    for field, key in PROMISED.items():
        changed = parity_view({**receipt, field: other[field]})
        assert {k for k in view if changed[k] != view[k]} == {key}, field


def test_a_case_v8_cannot_express_says_why_and_every_wasmtime_only_limit_is_marked() -> None:
    marked = {name: case.unsupported["v8"] for name, case in CASES.items() if "v8" in case.unsupported}
    print("not on v8:", json.dumps(marked, indent=1))
    assert all(reason.strip() for reason in marked.values())
    needs_wasmtime = {name for name, case in CASES.items() if WASMTIME_ONLY_LIMITS & set(case.limits)}
    assert sorted(needs_wasmtime - set(marked)) == []
    assert len(ON_V8) >= len(CASES) - 5  # nearly everything runs on both


def test_the_v8_hosts_unixfs_writer_mints_the_js_importers_cids() -> None:
    report = _node(["--self-test"])
    assert report["ok"], report["mismatches"]
    assert 262145 in report["sizes"] and 174 * 262144 + 1 in report["sizes"]


def test_the_comparison_sees_a_difference_when_there_is_one(tmp_path: Path) -> None:
    """The same case, but V8 is told a narrower grant: its view must differ where the grant shows."""
    case = CASES["fs-cat-reads-a-file"]
    ready = setup(case, bundled_dir())
    request = _request(case, ready, tmp_path / "blocks.car")
    request["grant"] = [g for g in request["grant"] if g != "fs/read"]
    (theirs,) = _node([], {"cases": [request]})["results"]
    ours = run_case(case, bundled_dir(), ready=ready)
    assert ours.receipt is not None
    view = parity_view(ours.receipt)
    assert theirs["view"]["denials"] == [
        {"kuro/import": "fs_read", "kuro/capability": "fs/read", "kuro/path": "greeting.txt"}
    ]
    assert {k for k in view if view[k] != theirs["view"][k]} == {
        "exit-code",
        "outcome",
        "stdout-cid",
        "reads",
        "denials",
    }


@pytest.mark.parametrize(
    ("name", "directory", "before", "after"),
    [
        ("fs-write-shards-a-full-flat-directory", "out", "entries", "shard"),
        ("fs-rm-un-shards-a-directory", ".", "shard", "entries"),
        ("fs-write-into-a-sharded-directory", "out", "shard", "shard"),
        ("fs-ls-lists-a-sharded-directory", "docs", "shard", None),
    ],
)
def test_the_sharded_cases_cross_the_layouts_they_say(
    name: str, directory: str, before: str, after: str | None
) -> None:
    """Not vacuous: the cases over large directories start (and end) in the layout their names promise."""
    case = CASES[name]
    assert name in ON_V8
    ready = setup(case, bundled_dir())

    def layout(root: str) -> str:
        cid = Fs(ready.store, root).stat(directory).value["cid"]
        return "shard" if b"\x65shard" in (ready.store.get(cid) or b"") else "entries"

    assert layout(ready.fs.root) == before
    receipt = run_case(case, bundled_dir(), ready=ready).receipt
    assert receipt is not None
    if after is not None:
        assert layout(receipt["kuro/fs-root-after"]) == after
