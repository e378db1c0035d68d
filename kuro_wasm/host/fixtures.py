"""Running fixture cases on this host: case files in, one judged result per case out.

## The one decision
There is one runner. The test suite (``tests/host/test_guest_fixtures.py``),
``kuro fixtures run [DIR]`` and the two-engine parity test all build a case's
run here — the same block store, fs tree, session and guest spec
(:func:`setup`) — and judge it with :func:`kuro_wasm.model.fixture.check`, so
"the fixtures pass" means one thing wherever it is said. Each case runs in a
fresh in-memory block store, so cases cannot see each other's blocks.

A case's ``guest`` names a file relative to its case file's directory: a bare
name (``hello``) is ``hello.wat`` or ``hello.wasm`` there or in the parent
directory (the ``guests/*.wat`` + ``guests/fixtures/*.toml`` layout); a name
with a suffix or a slash is that file — never an absolute path or one leaving those two
directories (``..``, a symlink; kuro-wasm's own cases may name any file of its ``guests/``):
a case names its own guests, not any file. ``@absent`` is
a CID the store lacks; ``@bytes:TEXT`` stores those bytes as one raw block, uncompiled.

A case file that cannot be read or parsed is a result too (``invalid``, with
the reason), never a crash of the whole directory; a case marked
``unsupported`` on ``wasmtime`` is reported with its reason, not run.

## Effects
Reads the case files and guests; runs guests (:func:`kuro_wasm.host.api.run`);
the clock, for how long each case took.

## Not done here
No engine but wasmtime (the V8 host is ``tools/kuro_v8_host.mjs``, compared in
``tests/parity``); no rendering (:mod:`kuro_wasm.cli.fixtures`).
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import kuro_wasm
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.fs import Fs
from kuro_wasm.errors import FixtureError, KuroError
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.fixture import Case, check, generated_files, parse_case
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.sessions import Session, guest, session

__all__ = [
    "ENGINE",
    "STATUSES",
    "CaseResult",
    "Setup",
    "bundled_dir",
    "case_files",
    "files_of",
    "guest_path",
    "load_case",
    "run_case",
    "run_dir",
    "setup",
]

#: This host's engine name in a case's ``unsupported`` table.
ENGINE: Final = "wasmtime"
#: A result's status → meaning.
STATUSES: Final = {
    "pass": "the receipt says what the case expects",
    "fail": "the receipt differs from what the case expects",
    "invalid": "the case file is not a case (or names a guest that is not there)",
    "unsupported": "the case is marked unsupported on this engine, with the reason",
}
_ABSENT: Final = raw_cid(b"a guest nobody stored")
#: ``KIND:NAME`` → the guest's bytes (for guests a case names but cannot hold as a file, e.g. built components).
GuestResolver = Callable[[str], bytes]


@dataclass(frozen=True)
class Setup:
    """Everything one case runs with: its own block store (guest and fs blocks), the fs, session and spec."""

    store: MemoryBlockStore
    fs: Fs
    session: Session
    command: dict[str, Any]


@dataclass(frozen=True)
class CaseResult:
    """How one case went: ``status`` (:data:`STATUSES`), what differed or why, the receipt, the time it took."""

    name: str
    path: str
    status: str
    problems: tuple[str, ...] = ()
    receipt: dict[str, Any] | None = None
    seconds: float = 0.0


def bundled_dir() -> Path:
    """The fixture directory that ships with kuro-wasm (package data; the checkout's ``guests/fixtures``)."""
    package = Path(kuro_wasm.__file__).resolve().parent
    installed = package / "guests" / "fixtures"
    return installed if installed.is_dir() else package.parent / "guests" / "fixtures"


def case_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The case files (``*.toml``) of ``directory``, sorted by name — a dangling symlink too, so that a case
    that cannot be read is reported (``invalid``), never skipped.

    Raises FixtureError: ``directory`` is not a directory.
    """
    where = Path(directory)
    if not where.is_dir():
        raise FixtureError(f"{where} is not a directory of fixture cases (*.toml)")
    return sorted(p for p in where.glob("*.toml") if p.is_file() or (p.is_symlink() and not p.exists()))


def load_case(path: str | os.PathLike[str]) -> Case:
    """The case in the file ``path`` (named by the file's stem).

    Raises FixtureError: the file cannot be read, is not TOML (or nests too deeply to read), or is not a case.
    """
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FixtureError(f"fixture {where.stem!r}: cannot read {where}: {exc}") from exc
    except RecursionError:
        raise FixtureError(f"fixture {where.stem!r}: cannot read {where}: nested too deeply") from None
    return parse_case(where.stem, data)


def _outside(case: Case, allowed: Path, more: str = "") -> FixtureError:
    return FixtureError(
        f"fixture {case.name!r}: field guest = {case.guest!r} leads out of {allowed}{more}: a case's guest is a "
        "file in its directory or the parent, not an absolute path, nor one leaving them by '..' or a symlink"
    )


def _allowed(case_dir: Path) -> Path:
    """Where ``case_dir``'s cases may name guests: its parent (so itself too) — or, for a case shipped with
    kuro-wasm, the whole bundled ``guests/`` directory (``guests/c/fixtures`` names ``../../wasi-fault``)."""
    parent = Path(os.path.normpath(case_dir.absolute())).parent
    bundled = Path(os.path.normpath(bundled_dir().absolute())).parent
    return bundled if parent.is_relative_to(bundled) else parent


def guest_path(case: Case, case_dir: Path) -> Path:
    """The guest file ``case`` names (see the module docstring for the lookup).

    Raises FixtureError: no such file, or ``guest`` is an absolute path or leads (``..``, a symlink)
    out of the case's directory and its parent (for kuro-wasm's own cases: out of its ``guests/``):
    a case names its own guests, not any file.
    """
    named = Path(case.guest)
    allowed = _allowed(case_dir)
    if named.is_absolute():
        raise _outside(case, allowed)
    if not named.name:  # "." or "./": a directory, and no file name to add .wat/.wasm to
        raise FixtureError(f"fixture {case.name!r}: guest {case.guest!r} names a directory, not a guest file")
    suffixes = ("",) if named.suffix in (".wat", ".wasm") else (".wat", ".wasm")
    names = [named.with_name(named.name + suffix) for suffix in suffixes]
    tried = []
    for base in (case_dir, case_dir.parent):
        for name in names:
            candidate = base / name
            tried.append(str(candidate))
            if not Path(os.path.normpath(candidate.absolute())).is_relative_to(allowed):
                raise _outside(case, allowed)
            if candidate.is_file():
                if not candidate.resolve().is_relative_to(allowed.resolve()):  # a symlink out
                    raise _outside(case, allowed, f" (it is {candidate.resolve()})")
                return candidate
    raise FixtureError(f"fixture {case.name!r}: guest {case.guest!r} not found (looked for {', '.join(tried)})")


def setup(case: Case, case_dir: Path, resolve: GuestResolver | None = None) -> Setup:
    """The store, fs, session and guest spec ``case`` runs with (every block in one fresh memory store).

    ``resolve`` gives the bytes of guests named ``KIND:NAME`` (``component:typed``, built
    by the caller); other names are files (:func:`guest_path`).

    Raises FixtureError: the guest is missing or not a module, a file path is not
    a kuro.fs path or is named twice (in ``fs`` and ``fs_generated``), or the case's
    grant/args/fs_read_path cannot form a session or spec.
    """
    store = MemoryBlockStore()
    if case.guest == "@absent":
        cid = _ABSENT
    elif case.guest.startswith("@bytes:"):
        cid = store.put(case.guest.removeprefix("@bytes:").encode("utf-8"))
    elif ":" in case.guest and resolve is not None:
        try:
            cid = add_guest(store, resolve(case.guest))
        except (OSError, KuroError) as exc:
            raise FixtureError(f"fixture {case.name!r}: guest {case.guest}: {exc}") from exc
    else:
        path = guest_path(case, case_dir)
        try:
            cid = add_guest(store, path.read_bytes())
        except (OSError, KuroError) as exc:
            raise FixtureError(f"fixture {case.name!r}: guest {path}: {exc}") from exc
    fs = Fs.empty(store)
    for path_name, data in generated_files(case.name, "fs_generated", case.fs_generated, case.fs).items():
        written = fs.write(path_name, data)
        if not written.ok:
            reason = written.receipt.get("kuro.fs/reason")
            raise FixtureError(f"fixture {case.name!r}: fs: cannot write {path_name!r} ({reason})")
        fs = written.fs
    try:
        sess = session("s-fixture", fs.root, case.mode, grant=case.grant)
        command = guest(
            cid, case.export, list(case.args), fs_read_path=case.fs_read_path, env=case.env, argv0=case.argv0
        )
    except KuroError as exc:
        raise FixtureError(f"fixture {case.name!r}: {exc}") from exc
    return Setup(store, fs, sess, command)


def files_of(fs: Fs) -> dict[str, bytes]:
    """Every file under ``fs`` (path → bytes)."""
    walked = fs.walk(".")
    if not walked.ok:
        return {}
    out = {}
    for entry in walked.value:
        if entry["kind"] == "file":
            read = fs.read(entry["path"])
            out[entry["path"]] = read.value if read.ok else b""
    return out


def run_case(
    case: Case,
    case_dir: Path,
    *,
    home: Any = False,
    ready: Setup | None = None,
    resolve: GuestResolver | None = None,
    isolation: Any = None,
) -> CaseResult:
    """Run ``case`` on this host and judge its receipt. ``home`` selects the compiled-module cache (False: memory).

    ``ready`` is the case's :func:`setup` when the caller made it (to run the same blocks elsewhere too).
    ``isolation`` chooses the backend (:func:`kuro_wasm.host.api.run`'s option; None: its default).
    """
    path = str(case_dir / f"{case.name}.toml")
    if ENGINE in case.unsupported:
        return CaseResult(case.name, path, "unsupported", (case.unsupported[ENGINE],))
    started = time.monotonic()
    try:
        ready = setup(case, case_dir, resolve) if ready is None else ready
    except FixtureError as exc:
        return CaseResult(case.name, path, "invalid", (str(exc),))
    try:
        limits = Limits.from_options(case.limits).as_options()
        receipt = run(
            ready.session,
            ready.command,
            store=ready.store,
            stdin=case.stdin,
            home=home,
            isolation=isolation,
            **cast(dict[str, Any], limits),
        )
    except KuroError as exc:  # e.g. a limit past 2**64-1: the case cannot describe a run
        return CaseResult(case.name, path, "invalid", (f"fixture {case.name!r}: {exc}",))
    after = receipt.get("kuro/fs-root-after")
    files = files_of(Fs(ready.store, after)) if isinstance(after, str) else None
    problems = tuple(check(case, receipt, files))
    return CaseResult(case.name, path, "fail" if problems else "pass", problems, receipt, time.monotonic() - started)


def run_dir(directory: str | os.PathLike[str], *, home: Any = False) -> list[CaseResult]:
    """Run every case file of ``directory`` in name order; a file that is not a case is an ``invalid`` result.

    Raises FixtureError: ``directory`` is not a directory.
    """
    results = []
    for path in case_files(directory):
        try:
            case = load_case(path)
        except FixtureError as exc:
            results.append(CaseResult(path.stem, str(path), "invalid", (str(exc),)))
            continue
        results.append(run_case(case, path.parent, home=home))
    return results
