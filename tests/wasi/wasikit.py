"""Running a WASI preview 1 command and capturing what it did, behind a one-function seam.

A *runner* is ``Callable[[WasiCase], WasiOutcome]``: it runs ``case.wasm`` with ``case.args``,
``case.env`` and ``case.stdin``, with a private copy of the ``case.root`` folder preopened as ``/``,
and reports the exit code, both output streams and the tree the program left (as a kuro.fs root CID
and as a plain ``{path: bytes | None}`` map for readable diffs). The folder itself is never handed to
a program, so nothing a program does leaks into the next case.

:func:`run_builtin` is the reference: wasmtime's own WASI (wasmtime-py ``WasiConfig``) over a real
temporary directory. A second runner (kuro's WASI over kuro.fs) is added to :data:`RUNNERS` with one
line, and every harness built on :func:`run_all` then compares it with the reference.
:func:`run_kuro` is kuro's WASI over kuro.fs: the folder is loaded into an ``Fs`` and the program sees
that, through the ``wasi-preview1`` guest kind.

Imported by the tests in this folder as ``wasikit`` (pytest puts the folder on ``sys.path``).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import wasmtime

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.importer import import_path
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.outcome import cause
from kuro_wasm.model.sessions import guest, session

ROOT = Path(__file__).resolve().parents[2]
C_GUESTS = ROOT / "guests" / "c"
SUITE = Path(__file__).resolve().parent / "testsuite"


@dataclass(frozen=True)
class WasiCase:
    """One run of a WASI command: what it is given. ``argv[0]`` is ``argv0`` (default: the file name)."""

    wasm: Path
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes = b""
    root: Path | None = None
    argv0: str | None = None
    #: kuro's output cap for this case (the reference runner has none): a case that prints more than
    #: kuro's default 1 MiB is not a disagreement about WASI.
    max_output_bytes: int = 1 << 20

    @property
    def argv(self) -> list[str]:
        return [self.argv0 if self.argv0 is not None else self.wasm.name, *self.args]


@dataclass(frozen=True)
class WasiOutcome:
    """What a run did. ``trap`` is the trap's cause when the program trapped (``exit_code`` is then None): the
    line wasmtime's message ends with (:func:`kuro_wasm.model.outcome.cause`), e.g. ``wasm trap: wasm
    `unreachable` instruction executed``, so both runners say it alike; any other end is its receipt.

    ``tree`` is the kuro.fs root CID of the preopened tree after the run and ``files`` the same tree as
    ``{path: bytes}`` (directories map to None); both are None/empty when the case had no root.
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    tree: str | None = None
    files: Mapping[str, bytes | None] = field(default_factory=dict)
    trap: str | None = None


Runner = Callable[[WasiCase], WasiOutcome]


# ---- trees on disk


def copy_tree(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (which must not exist) with writable modes, whatever the source's."""
    shutil.copytree(source, target)
    for here, dirs, files in os.walk(target):
        os.chmod(here, 0o755)
        for name in dirs:
            os.chmod(os.path.join(here, name), 0o755)
        for name in files:
            os.chmod(os.path.join(here, name), 0o644)


def tree_cid(folder: Path) -> str:
    """The kuro.fs root CID of ``folder`` (imported into a throwaway memory store)."""
    return import_path(MemoryBlockStore(), folder, workers=1)


def tree_files(folder: Path) -> dict[str, bytes | None]:
    """Every entry below ``folder``: relative path → file bytes, or None for a directory."""
    out: dict[str, bytes | None] = {}
    for here, dirs, files in os.walk(folder):
        rel = Path(here).relative_to(folder)
        for name in dirs:
            out[str(rel / name)] = None
        for name in files:
            path = Path(here) / name
            if stat.S_ISREG(path.lstat().st_mode):
                out[str(rel / name)] = path.read_bytes()
            else:
                out[str(rel / name)] = b"<not a regular file>"
    return dict(sorted(out.items()))


def write_tree(folder: Path, files: Mapping[str, bytes | None]) -> None:
    """Create ``folder`` holding ``files`` (relative path → bytes, or None for an empty directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        path = folder / rel
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


# ---- the reference runner: wasmtime's built-in WASI


_ENGINE = wasmtime.Engine()
_MODULES: dict[Path, wasmtime.Module] = {}


def _module(path: Path) -> wasmtime.Module:
    module = _MODULES.get(path)
    if module is None:
        module = _MODULES[path] = wasmtime.Module.from_file(_ENGINE, str(path))
    return module


def run_builtin(case: WasiCase) -> WasiOutcome:
    """Run ``case`` under wasmtime's built-in WASI over a temporary copy of ``case.root`` preopened as ``/``."""
    with tempfile.TemporaryDirectory(prefix="kuro-wasi-") as scratch:
        work = Path(scratch)
        (work / "stdin").write_bytes(case.stdin)
        config = wasmtime.WasiConfig()
        config.argv = case.argv
        config.env = sorted(case.env.items())
        config.stdin_file = str(work / "stdin")
        config.stdout_file = str(work / "stdout")
        config.stderr_file = str(work / "stderr")
        tree = work / "root"
        if case.root is not None:
            copy_tree(case.root, tree)
            config.preopen_dir(str(tree), "/")
        store = wasmtime.Store(_ENGINE)
        store.set_wasi(config)
        linker = wasmtime.Linker(_ENGINE)
        linker.define_wasi()
        exit_code: int | None = 0
        trap = None
        try:
            instance = linker.instantiate(store, _module(case.wasm))
            start = instance.exports(store)["_start"]
            assert isinstance(start, wasmtime.Func)
            start(store)
        except wasmtime.ExitTrap as exc:
            exit_code = exc.code
        except wasmtime.Trap as exc:
            exit_code, trap = None, cause(exc.message)
        except wasmtime.WasmtimeError as exc:  # a WASI call that failed the guest (an argument no witx value)
            exit_code, trap = None, cause(str(exc))
        del store
        return WasiOutcome(
            exit_code=exit_code,
            stdout=(work / "stdout").read_bytes(),
            stderr=(work / "stderr").read_bytes(),
            tree=tree_cid(tree) if case.root is not None else None,
            files=tree_files(tree) if case.root is not None else {},
            trap=trap,
        )


# ---- kuro's WASI over kuro.fs


def fs_files(fs: Fs) -> dict[str, bytes | None]:
    """Every entry of ``fs``: path → file bytes, or None for a directory (as :func:`tree_files`)."""
    walked = fs.walk()
    assert walked.ok, walked.receipt
    out: dict[str, bytes | None] = {}
    for entry in walked.value:
        out[entry["path"]] = fs.read(entry["path"]).value if entry["kind"] == "file" else None
    return dict(sorted(out.items()))


def run_kuro(case: WasiCase, **options: object) -> WasiOutcome:
    """Run ``case`` under kuro's WASI: ``case.root`` loaded into a kuro.fs ``Fs`` (never preopened for real).

    The session grants every capability — but no ``fs/…`` one when the case has no root, so that
    the program, as under the reference runner, has no preopened directory. ``options`` go to
    :func:`kuro_wasm.host.api.run`.
    """
    store = MemoryBlockStore()
    root = import_path(store, case.root, workers=1) if case.root is not None else Fs.empty(store).root
    cid = add_guest(store, case.wasm.read_bytes())
    grant = ALL_CAPABILITIES if case.root is not None else ["guest/invoke", "stdin/read"]
    sess = session("wasi-kuro", root, "terminal-build", grant=grant)
    spec = guest(cid, "_start", list(case.args), env=dict(case.env), argv0=case.argv[0])
    options = {"max_output_bytes": case.max_output_bytes, **options}
    receipt = run(sess, spec, store=store, stdin=case.stdin, home=False, **options)  # type: ignore[arg-type]
    trap = receipt.get("kuro/trap", {}).get("message")
    after = Fs(store, receipt.get("kuro/fs-root-after", root))
    return WasiOutcome(
        exit_code=receipt["kuro/exit-code"] if receipt["kuro/outcome"] in ("ok", "exit") else None,
        stdout=receipt["kuro/stdout"],
        stderr=receipt["kuro/stderr"],
        tree=after.root if case.root is not None else None,
        files=fs_files(after) if case.root is not None else {},
        trap=None if trap is None and receipt["kuro/outcome"] in ("ok", "exit") else str(trap or receipt),
    )


ALL_CAPABILITIES = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]

#: Every WASI runner, the reference first.
RUNNERS: dict[str, Runner] = {"builtin": run_builtin, "kuro": run_kuro}


def run_all(case: WasiCase) -> dict[str, WasiOutcome]:
    """``case`` run by every runner in :data:`RUNNERS`, by name."""
    return {name: runner(case) for name, runner in RUNNERS.items()}


def differences(expected: WasiOutcome, got: WasiOutcome) -> list[str]:
    """Human-readable differences between two outcomes (empty when they agree on everything)."""
    out = []
    for name in ("exit_code", "trap", "stdout", "stderr", "tree"):
        a, b = getattr(expected, name), getattr(got, name)
        if a != b:
            out.append(f"{name}: expected {a!r}, got {b!r}")
    if expected.files != got.files:
        for path in sorted(set(expected.files) | set(got.files)):
            a, b = expected.files.get(path, "<absent>"), got.files.get(path, "<absent>")
            if a != b:
                out.append(f"file {path}: expected {a!r}, got {b!r}")
    return out
