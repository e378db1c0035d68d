"""Fixture cases: one guest run and what its receipt must say, as checked data.

## The one decision
A case is data in one documented format — ``guests/fixtures/schema.json``, a
JSON Schema of the parsed case file (TOML, one case per file) — and the one
judge of a receipt against it is :func:`check`, used alike by the test suite
(``tests/host/test_guest_fixtures.py``), by ``kuro fixtures run`` and by the
two-engine parity test. :func:`parse_case` refuses a case the schema refuses,
with a message naming the case and the key, so a misspelt key can never
silently check nothing. (The schema is the published contract and CI validates
every case with ``jsonschema``; this parser is the runtime's own reading of it,
kept equal to the schema by a differential test, so an installed ``kuro`` needs
no schema library.)

What is compared across engines is :func:`parity_view` of a receipt: exit code,
outcome, stdout/stderr CIDs, reads, denials, the fs root after, the trap kind,
timed-out and truncated — never host text (trap messages, errors), never
wasmtime's fuel.

## Pure
Values in, values out: the host reads the files and runs the guest
(:mod:`kuro_wasm.host.fixtures`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kuro_fs.cid import raw_cid
from kuro_wasm.errors import FixtureError, ModelError
from kuro_wasm.model.limits import LIMIT_NAMES, Limits
from kuro_wasm.model.receipt import KEYS, OUTCOMES
from kuro_wasm.model.sessions import ALIASES, CAPABILITIES, MODES

__all__ = [
    "CASE_KEYS",
    "DEFAULT_GRANT",
    "ENGINES",
    "EXPECT_KEYS",
    "GENERATED_KEYS",
    "MAX_GENERATED",
    "MAX_GENERATED_CONTENT",
    "MAX_GENERATED_TABLES",
    "GRANT_NAMES",
    "MODE_NAMES",
    "PARITY_KEYS",
    "Case",
    "Generated",
    "check",
    "generated_files",
    "parity_view",
    "parse_case",
]

#: Every key a case may have: key → required?
CASE_KEYS: Final[Mapping[str, bool]] = {
    "description": True,
    "guest": True,
    "export": True,
    "args": False,
    "mode": False,
    "grant": False,
    "stdin": False,
    "fs": False,
    "fs_generated": False,
    "fs_read_path": False,
    "env": False,
    "argv0": False,
    "limits": False,
    "unsupported": False,
    "expect": True,
}
#: Every key of ``expect``: key → required?
EXPECT_KEYS: Final[Mapping[str, bool]] = {
    "exit_code": True,
    "outcome": True,
    "stdout": False,
    "stderr": False,
    "stdout_bytes": False,
    "timed_out": False,
    "truncated": False,
    "capped_by": False,
    "trap_kind": False,
    "error_contains": False,
    "denials": False,
    "reads": False,
    "fuel_consumed": False,
    "effective_capabilities": False,
    "grant_aliases": False,
    "fs_after": False,
    "fs_after_generated": False,
    "result": False,
}
#: The engines a case may be marked ``unsupported`` on.
ENGINES: Final = ("wasmtime", "v8")
#: Modes a case may run in (``terminal-host`` runs nothing).
MODE_NAMES: Final = tuple(name for name, mode in MODES.items() if not mode.host)
#: Capability names a case may grant: this host's (but host/shell) and the original kuro's aliases.
GRANT_NAMES: Final = (*(c for c in CAPABILITIES if c != "host/shell"), *ALIASES)
#: The grant of a case that names neither ``mode`` nor ``grant``.
DEFAULT_GRANT: Final = ("guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read")
#: The receipt keys both engines must agree on (:func:`parity_view`).
PARITY_KEYS: Final = (
    "exit-code",
    "outcome",
    "capped-by",
    "stdout-cid",
    "stderr-cid",
    "reads",
    "denials",
    "fs-root-after",
    "trap-kind",
    "timed-out?",
    "truncated?",
)
_DENIAL_KEYS: Final = {"import": True, "capability": True, "path": False, "count": False}
#: Every key of an ``fs_generated`` (or ``expect.fs_after_generated``) table: key → required?
GENERATED_KEYS: Final[Mapping[str, bool]] = {"path": True, "count": True, "content": False}
#: The most files one generated table may stand for (a case stays a small data file that runs fast).
MAX_GENERATED: Final = 4096
#: The most generated tables one list may hold, and the longest ``content`` template (characters): with
#: :data:`MAX_GENERATED` they bound what a case sets up — without them a case file of 80 KB stood for 16 384
#: files of 20 KB (16 s, 0.5 GB), and a larger one for as many more as it had lines.
MAX_GENERATED_TABLES: Final = 4
MAX_GENERATED_CONTENT: Final = 1024
_INDEX: Final = "{i}"


@dataclass(frozen=True)
class Generated:
    """``count`` files named by one template: ``{i}`` in ``path`` (at least once) and ``content`` is 0 … count − 1.

    How a case holds a directory of hundreds of entries (a sharded kuro.fs directory) in a few lines.
    """

    path: str
    count: int
    content: str = ""

    def files(self) -> dict[str, bytes]:
        """Every file this table stands for: path → UTF-8 content."""
        return {
            self.path.replace(_INDEX, str(i)): self.content.replace(_INDEX, str(i)).encode("utf-8")
            for i in range(self.count)
        }


def generated_files(
    name: str, where: str, tables: tuple[Generated, ...], files: Mapping[str, bytes]
) -> dict[str, bytes]:
    """``files`` plus every file of ``tables``. Raises FixtureError: a path named twice."""
    out = dict(files)
    for table in tables:
        for path, data in table.files().items():
            if path in out:
                raise _fail(name, where, f"the path {path!r} is named twice")
            out[path] = data
    return out


@dataclass(frozen=True)
class Case:
    """One parsed case (``name`` is the file's stem). Build with :func:`parse_case`."""

    name: str
    description: str
    guest: str
    export: str
    args: tuple[Any, ...] = ()
    mode: str = "terminal-repo"
    grant: tuple[str, ...] | None = DEFAULT_GRANT
    stdin: bytes | None = None
    fs: Mapping[str, bytes] = field(default_factory=dict)
    fs_generated: tuple[Generated, ...] = ()
    fs_read_path: str | None = None
    env: Mapping[str, str] | None = None
    argv0: str | None = None
    limits: Mapping[str, int] = field(default_factory=dict)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    expect: Mapping[str, Any] = field(default_factory=dict)


# ---- parsing


def _fail(name: str, where: str, problem: str) -> FixtureError:
    return FixtureError(f"fixture {name!r}: {where}: {problem} (see guests/fixtures/schema.json)")


def _keys(name: str, where: str, table: object, known: Mapping[str, bool]) -> Mapping[str, Any]:
    if not isinstance(table, Mapping):
        raise _fail(name, where, f"must be a table, got {type(table).__name__}")
    unknown = sorted(str(k) for k in table if k not in known)
    if unknown:
        raise _fail(name, where, f"unknown key(s) {unknown}; known: {sorted(known)}")
    missing = sorted(k for k, required in known.items() if required and k not in table)
    if missing:
        raise _fail(name, where, f"missing required key(s) {missing}")
    return table


def _text(name: str, where: str, value: object, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and value == ""):
        raise _fail(name, where, f"must be a {'' if empty else 'non-empty '}string, got {value!r}")
    return value


def _int(name: str, where: str, value: object, minimum: int | None = None) -> int:
    if isinstance(value, float) and value.is_integer():  # JSON Schema's integer: 1.0 is 1
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise _fail(name, where, f"must be an integer{bound}, got {value!r}")
    return value


def _choice(name: str, where: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _fail(name, where, f"must be one of {list(allowed)}, got {value!r}")
    assert isinstance(value, str)
    return value


def _list(name: str, where: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(name, where, f"must be an array, got {type(value).__name__}")
    return value


def _files(name: str, where: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _fail(name, where, f"must be a table of path = content, got {type(value).__name__}")
    out = {}
    for path, content in value.items():
        _text(name, f"{where} key", path)
        out[path] = _text(name, f"{where}.{path}", content, empty=True)
    return out


def _generated(name: str, where: str, value: object) -> tuple[Generated, ...]:
    out = []
    tables = _list(name, where, value)
    if len(tables) > MAX_GENERATED_TABLES:
        raise _fail(name, where, f"must hold at most {MAX_GENERATED_TABLES} tables, got {len(tables)}")
    for i, item in enumerate(tables):
        at = f"{where}[{i}]"
        table = _keys(name, at, item, GENERATED_KEYS)
        path = _text(name, f"{at}.path", table["path"])
        if _INDEX not in path:
            raise _fail(name, f"{at}.path", f"must contain {_INDEX} (replaced by 0 … count − 1), got {path!r}")
        count = _int(name, f"{at}.count", table["count"], 1)
        if count > MAX_GENERATED:
            raise _fail(name, f"{at}.count", f"must be at most {MAX_GENERATED}, got {count}")
        content = _text(name, f"{at}.content", table.get("content", ""), empty=True)
        if len(content) > MAX_GENERATED_CONTENT:
            bound = f"must be at most {MAX_GENERATED_CONTENT} characters, got {len(content)}"
            raise _fail(name, f"{at}.content", bound)
        out.append(Generated(path, count, content))
    return tuple(out)


def _denials(name: str, value: object) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(_list(name, "expect.denials", value)):
        where = f"expect.denials[{i}]"
        entry = _keys(name, where, item, _DENIAL_KEYS)
        checked: dict[str, Any] = {k: _text(name, f"{where}.{k}", entry[k]) for k in ("import", "capability")}
        if "path" in entry:
            checked["path"] = _text(name, f"{where}.path", entry["path"], empty=True)
        if "count" in entry:
            checked["count"] = _int(name, f"{where}.count", entry["count"], 2)
        out.append(checked)
    return out


def _expect(name: str, value: object) -> dict[str, Any]:
    table = _keys(name, "expect", value, EXPECT_KEYS)
    out: dict[str, Any] = {}
    for key, item in table.items():
        where = f"expect.{key}"
        if key == "exit_code":
            out[key] = _int(name, where, item)
        elif key == "outcome":
            out[key] = _choice(name, where, item, tuple(OUTCOMES))
        elif key in ("stdout", "stderr"):
            out[key] = _text(name, where, item, empty=True)
        elif key in ("stdout_bytes", "reads", "fuel_consumed"):
            out[key] = _int(name, where, item, 0)
        elif key in ("timed_out", "truncated"):
            if not isinstance(item, bool):
                raise _fail(name, where, f"must be true or false, got {item!r}")
            out[key] = item
        elif key in ("trap_kind", "error_contains"):
            out[key] = _text(name, where, item)
        elif key == "capped_by":
            out[key] = _choice(name, where, item, ("bytes", "chunks"))
        elif key == "denials":
            out[key] = _denials(name, item)
        elif key == "effective_capabilities":
            out[key] = [_text(name, where, c, empty=True) for c in _list(name, where, item)]
        elif key == "fs_after_generated":
            out[key] = _generated(name, where, item)
        elif key == "result":  # a component export's typed result (kuro/result): any plain TOML value
            out[key] = item
        elif key == "grant_aliases":
            if not isinstance(item, Mapping):
                raise _fail(name, where, "must be a table of name = [capabilities]")
            out[key] = {k: [_text(name, where, c, empty=True) for c in _list(name, where, v)] for k, v in item.items()}
        else:  # fs_after
            if item is False:
                out[key] = False
            elif isinstance(item, Mapping):
                out[key] = _files(name, where, item)
            else:
                raise _fail(name, where, f"must be false or a table of path = content, got {item!r}")
    if out.get("fs_after") is False and out.get("fs_after_generated"):
        raise _fail(name, "expect.fs_after_generated", "names files after the run, but fs_after = false says none")
    return out


def _limits(name: str, table: Mapping[str, Any]) -> dict[str, int]:
    """The limits a case sets, each an int its :class:`~kuro_wasm.model.limits.Limits` field accepts."""
    out = {key: _int(name, f"limits.{key}", value) for key, value in table.items()}
    try:
        Limits.from_options(out)
    except ModelError as exc:
        raise _fail(name, "limits", str(exc)) from exc
    return out


def _env(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(name, "env", f"must be a table of names to strings, got {type(value).__name__}")
    for key, text in value.items():
        if key == "":
            raise _fail(name, "env", "names must not be empty")
        _text(name, f"env.{key}", text, empty=True)
    return dict(value)


def parse_case(name: str, data: object) -> Case:
    """The case called ``name`` from its parsed file ``data`` (a TOML document as a dict).

    Raises FixtureError: the data is not a case as ``guests/fixtures/schema.json`` describes it.
    """
    table = _keys(name, "the case", data, CASE_KEYS)
    mode = _choice(name, "mode", table.get("mode", "terminal-repo"), MODE_NAMES)
    grant: tuple[str, ...] | None
    if "grant" in table:
        grant = tuple(_choice(name, "grant", g, GRANT_NAMES) for g in _list(name, "grant", table["grant"]))
    else:
        grant = None if "mode" in table else DEFAULT_GRANT
    limits = _keys(name, "limits", table.get("limits", {}), dict.fromkeys(LIMIT_NAMES, False))
    unsupported = _keys(name, "unsupported", table.get("unsupported", {}), dict.fromkeys(ENGINES, False))
    if "unsupported" in table and not unsupported:
        raise _fail(name, "unsupported", "must name at least one engine (engine = the reason it cannot run the case)")
    return Case(
        name=name,
        description=_text(name, "description", table["description"]),
        guest=_text(name, "guest", table["guest"]),
        export=_text(name, "export", table["export"]),
        args=tuple(_list(name, "args", table.get("args", []))),  # numbers, or plain data (guest() checks them)
        mode=mode,
        grant=grant,
        stdin=None if "stdin" not in table else _text(name, "stdin", table["stdin"], empty=True).encode("utf-8"),
        fs={p: c.encode("utf-8") for p, c in _files(name, "fs", table.get("fs", {})).items()},
        fs_generated=_generated(name, "fs_generated", table.get("fs_generated", [])),
        fs_read_path=None if "fs_read_path" not in table else _text(name, "fs_read_path", table["fs_read_path"]),
        env=None if "env" not in table else _env(name, table["env"]),
        argv0=None if "argv0" not in table else _text(name, "argv0", table["argv0"], empty=True),
        limits=_limits(name, limits),
        unsupported={k: _text(name, f"unsupported.{k}", v) for k, v in unsupported.items()},
        expect=_expect(name, table["expect"]),
    )


# ---- judging a receipt


def _applied_limits(case: Case) -> dict[str, int]:
    return Limits.from_options(case.limits).receipt_value()


def _output(key: str, want: str, receipt: Mapping[str, Any]) -> list[str]:
    data = want.encode("utf-8")
    out = []
    if receipt.get(f"kuro/{key}") != data:
        out.append(f"{key}: expected {data!r}, got {receipt.get(f'kuro/{key}')!r}")
    elif receipt.get(f"kuro/{key}-cid") != raw_cid(data):
        out.append(f"{key}-cid: expected {raw_cid(data)}, got {receipt.get(f'kuro/{key}-cid')}")
    return out


def check(case: Case, receipt: Mapping[str, Any], files_after: Mapping[str, bytes] | None = None) -> list[str]:
    """Every way ``receipt`` differs from what ``case`` expects (empty: it passes).

    ``files_after`` is every file under the receipt's ``kuro/fs-root-after`` (path
    → bytes), read by the caller; it is compared only when the case expects an
    ``fs_after`` table. Beyond the case's own fields, the receipt must be one
    (not a denial), carry only declared keys, list its reads and denials, and
    record the limits the case set.
    """
    if receipt.get("kuro/type") != "kuro/receipt":
        return [
            f"no receipt: the run was refused ({receipt.get('kuro/reason')!r}, missing {receipt.get('kuro/missing')})"
        ]
    expect = case.expect
    bad: list[str] = []
    undeclared = sorted(k for k in receipt if not (k.startswith("kuro/") and k[5:] in KEYS))
    if undeclared:
        bad.append(f"undeclared receipt keys {undeclared}")
    for key, receipt_key in (("exit_code", "kuro/exit-code"), ("outcome", "kuro/outcome")):
        if receipt.get(receipt_key) != expect[key]:
            bad.append(f"{key}: expected {expect[key]!r}, got {receipt.get(receipt_key)!r}")
    for key in ("stdout", "stderr"):
        if key in expect:
            bad.extend(_output(key, expect[key], receipt))
    for key, receipt_key in (("timed_out", "kuro/timed-out?"), ("truncated", "kuro/truncated?")):
        if receipt.get(receipt_key, False) is not expect.get(key, False):
            bad.append(f"{key}: expected {expect.get(key, False)}, got {receipt.get(receipt_key, False)}")
    if "capped_by" in expect and receipt.get("kuro/capped-by") != expect["capped_by"]:
        bad.append(f"capped_by: expected {expect['capped_by']!r}, got {receipt.get('kuro/capped-by')!r}")
    if "stdout_bytes" in expect and receipt.get("kuro/stdout-bytes") != expect["stdout_bytes"]:
        bad.append(f"stdout_bytes: expected {expect['stdout_bytes']}, got {receipt.get('kuro/stdout-bytes')}")
    trap = receipt.get("kuro/trap")
    if "trap_kind" in expect:
        if not isinstance(trap, Mapping) or trap.get("kind") != expect["trap_kind"] or not trap.get("message"):
            bad.append(f"trap_kind: expected {expect['trap_kind']!r} with a message, got {trap!r}")
    elif trap is not None:
        bad.append(f"trap: expected none, got {trap!r}")
    if "error_contains" in expect and expect["error_contains"] not in str(receipt.get("kuro/error", "")):
        bad.append(f"error_contains: {expect['error_contains']!r} is not in {receipt.get('kuro/error')!r}")
    reads, denials = receipt.get("kuro/reads"), receipt.get("kuro/denials")
    if not isinstance(reads, list) or not isinstance(denials, list):
        bad.append("kuro/reads and kuro/denials must be lists")
    else:
        want = [{f"kuro/{k}": v for k, v in d.items()} for d in expect.get("denials", [])]
        if denials != want:
            bad.append(f"denials: expected {want}, got {denials}")
        if "reads" in expect and len(reads) != expect["reads"]:
            bad.append(f"reads: expected {expect['reads']} CID(s), got {reads}")
    if "result" in expect:
        if receipt.get("kuro/result") != expect["result"]:
            bad.append(f"result: expected {expect['result']!r}, got {receipt.get('kuro/result')!r}")
    elif "kuro/result" in receipt:
        bad.append(f"result: expected none, got {receipt['kuro/result']!r}")
    if "fuel_consumed" in expect:
        if receipt.get("kuro/fuel-consumed") != expect["fuel_consumed"]:
            bad.append(f"fuel_consumed: expected {expect['fuel_consumed']}, got {receipt.get('kuro/fuel-consumed')}")
    elif "kuro/fuel-consumed" in receipt:
        bad.append(f"fuel_consumed: expected none, got {receipt['kuro/fuel-consumed']}")
    for key in ("effective_capabilities", "grant_aliases"):
        got = receipt.get("kuro/" + key.replace("_", "-"), {} if key == "grant_aliases" else None)
        if key in expect and got != expect[key]:
            bad.append(f"{key}: expected {expect[key]}, got {got}")
    if receipt.get("kuro/limits") != _applied_limits(case):
        bad.append(f"limits: expected {_applied_limits(case)} applied, got {receipt.get('kuro/limits')}")
    bad.extend(_check_fs_after(case, receipt, files_after))
    return bad


def _check_fs_after(case: Case, receipt: Mapping[str, Any], files_after: Mapping[str, bytes] | None) -> list[str]:
    after, generated = case.expect.get("fs_after"), case.expect.get("fs_after_generated", ())
    root = receipt.get("kuro/fs-root-after")
    if after is False and root is not None:
        return [f"fs_after: expected no write, got kuro/fs-root-after {root}"]
    if not isinstance(after, Mapping) and not generated:
        return []
    if root is None or root == receipt.get("kuro/fs-root-cid"):
        return [f"fs_after: expected a new fs root, got {root}"]
    listed = {path: text.encode("utf-8") for path, text in (after if isinstance(after, Mapping) else {}).items()}
    try:
        want = generated_files(case.name, "expect.fs_after_generated", generated, listed)
    except FixtureError as exc:
        return [str(exc)]
    got = dict(files_after or {})
    if got != want:
        differ = sorted(p for p in want.keys() | got.keys() if want.get(p) != got.get(p))
        shown = {p: (want.get(p), got.get(p)) for p in differ[:8]}
        return [f"fs_after: {len(differ)} path(s) differ (path: (expected, got)): {shown}"]
    return []


def parity_view(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """What two engines running the same case must agree on (:data:`PARITY_KEYS`), as plain data.

    Absent keys are ``None`` (``False`` for ``timed-out?``/``truncated?``);
    ``trap-kind`` is the trap's kind only (its message is engine text). A
    denial's view is its reason and missing capabilities.
    """
    if receipt.get("kuro/type") == "kuro/denial":
        return {"denial": receipt.get("kuro/reason"), "missing": list(receipt.get("kuro/missing", []))}
    trap = receipt.get("kuro/trap")
    view: dict[str, Any] = {key: receipt.get("kuro/" + key) for key in PARITY_KEYS}
    view["trap-kind"] = trap.get("kind") if isinstance(trap, Mapping) else None
    view["timed-out?"] = receipt.get("kuro/timed-out?", False)
    view["truncated?"] = receipt.get("kuro/truncated?", False)
    return view
