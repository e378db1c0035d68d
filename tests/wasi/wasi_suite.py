"""The wasi-testsuite spec format: one ``NAME.json`` beside each ``NAME.wasm``, read strictly.

A spec may hold ``args`` (argv after argv[0], strings), ``env`` (string → string), ``root`` (a folder
beside the spec, preopened as ``/``), ``exit_code`` (default 0), ``stdout`` and ``stderr`` (expected
text; the reference runner compares a prefix of that length). No spec file means all defaults. Any
other key, a wrong type or a root outside the suite folder is a :class:`SpecError` naming the file
and the rule, so a spec we do not understand is never run as if it said less.

``*.cleanup`` files are what the upstream runner deletes between tests, because it runs every test
on the one real folder. Here every run gets its own copy of ``root`` (see ``wasikit``), so nothing
carries over; :func:`cleanup_names` lists what a run left behind for the record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wasikit import SUITE, WasiCase, WasiOutcome

SPEC_KEYS = ("args", "env", "root", "exit_code", "stdout", "stderr")


class SpecError(ValueError):
    """A spec file that does not follow the format (the message names the file and the rule)."""


@dataclass(frozen=True)
class SuiteSpec:
    """One conformance test: the program, what it is given and what it must do."""

    name: str
    wasm: Path
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    root: Path | None = None
    exit_code: int = 0
    stdout: str | None = None
    stderr: str | None = None

    def case(self) -> WasiCase:
        """The run this spec asks for; argv[0] is the module's file name, as upstream."""
        return WasiCase(self.wasm, self.args, dict(self.env), b"", self.root, self.wasm.name)


def parse_spec(wasm: Path, text: str | None) -> SuiteSpec:
    """The spec of ``wasm`` from the JSON ``text`` of its spec file (None: no file, all defaults).

    Raises SpecError: malformed JSON, an unknown key, a value of the wrong type, or a ``root`` that
    is not a folder inside the spec's own folder.
    """
    where = wasm.with_suffix(".json").name
    name = f"{wasm.parent.name}/{wasm.stem}"
    if text is None:
        return SuiteSpec(name, wasm)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a spec is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown keys {unknown}; a spec has only {list(SPEC_KEYS)}")
    args = data.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SpecError(f"{where}: args must be a list of strings")
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise SpecError(f"{where}: env must map names to strings")
    if any(k == "" or "=" in k or "\x00" in k or "\x00" in v for k, v in env.items()):
        raise SpecError(f"{where}: env names must be non-empty without '=' or NUL, values without NUL")
    exit_code = data.get("exit_code", 0)
    if isinstance(exit_code, bool) or not isinstance(exit_code, int) or not 0 <= exit_code <= 255:
        raise SpecError(f"{where}: exit_code must be an integer 0..255")
    for key in ("stdout", "stderr"):
        if key in data and not isinstance(data[key], str):
            raise SpecError(f"{where}: {key} must be a string")
    root = None
    if "root" in data:
        if not isinstance(data["root"], str):
            raise SpecError(f"{where}: root must be a string")
        folder = wasm.parent.resolve()
        root = (folder / data["root"]).resolve()
        if root == folder or folder not in root.parents or not root.is_dir():
            raise SpecError(f"{where}: root {data['root']!r} is not a folder inside {folder}")
    return SuiteSpec(name, wasm, tuple(args), dict(env), root, exit_code, data.get("stdout"), data.get("stderr"))


def load_suite(folder: Path = SUITE) -> list[SuiteSpec]:
    """Every test below ``folder`` (one per ``*.wasm``), sorted by name. Raises SpecError."""
    specs = []
    for wasm in sorted(folder.glob("*/*.wasm")):
        spec_file = wasm.with_suffix(".json")
        specs.append(parse_spec(wasm, spec_file.read_text(encoding="utf-8") if spec_file.exists() else None))
    return specs


def verdict(spec: SuiteSpec, outcome: WasiOutcome) -> list[str]:
    """Why ``outcome`` fails ``spec`` (empty: it passes): exit code, and output prefixes as upstream."""
    problems = []
    if outcome.trap is not None:
        problems.append(f"trapped: {outcome.trap}")
    if outcome.exit_code != spec.exit_code:
        problems.append(f"exit code {outcome.exit_code}, expected {spec.exit_code}")
    for stream in ("stdout", "stderr"):
        want = getattr(spec, stream)
        got: bytes = getattr(outcome, stream)
        if want is not None and got[: len(want.encode())] != want.encode():
            problems.append(f"{stream} {got!r} does not start with {want!r}")
    return problems


def cleanup_names(files: Mapping[str, bytes | None]) -> list[str]:
    """The ``*.cleanup`` entries in a run's resulting tree (what upstream would delete after it)."""
    return sorted(path for path in files if path.endswith(".cleanup"))
