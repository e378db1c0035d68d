"""``kuro demo``: the first thing a newcomer runs — every promise of the project, once, with receipts.

## The one decision
The demo must work right after ``pip install kuro-wasm`` on a fresh machine, with
no checkout beside it, so the guests it runs **ship inside the package** — WAT as
text, and one C program (``guests/c/wc.wasm``, a WASI command built with clang and
wasi-libc) as its exact bytes (:mod:`kuro_wasm.cli.demo_guests`, generated from the
repository's ``guests/`` by ``tools/embed_guests.py``; a test keeps the copies identical).
It uses only the public library path a user would: ``add_guest`` into the
home's block store, a kuro.fs tree kept under the fs name ``demo`` (never
touching ``main``), ``run`` with live output, and each receipt stored as a
dag-cbor block so ``kuro receipt show CID`` finds it afterwards.

Each step states what it expects (outcome, exit code, and one fact about the
receipt); the demo exits 0 only if every receipt is as expected, so the
README's first command is also a smoke test of the install.

## Effects
The home (blocks, refs, compiled-module cache), the output stream.

## Not done here
No timing claims (see ``tools/bench.py``); no ledger (``kuro run --op-id``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from kuro_fs.home import refs_dir
from kuro_wasm.cli.context import Context
from kuro_wasm.cli.demo_guests import GUESTS
from kuro_wasm.model.sessions import denial, guest, session

if TYPE_CHECKING:
    from kuro_fs.fs import Fs

__all__ = ["DEMO_FS_NAME", "FILES", "GUESTS", "Step", "run_demo", "steps"]

#: The fs name the demo keeps its tree under (``kuro fs ls -n demo``).
DEMO_FS_NAME: Final = "demo"
#: The small tree the demo writes before running anything.
FILES: Final[Mapping[str, bytes]] = {
    "greeting.txt": b"hello from kuro.fs, read through the fs_read import\n",
    "docs/readme.md": b"# demo\n\nEvery run leaves a receipt.\n",
}


@dataclass(frozen=True)
class Step:
    """One demo run: which guest and export, the session it runs in, and what its receipt must say."""

    title: str
    guest: str  # a key of GUESTS, or "" for an argv command
    export: str
    mode: str
    grant: tuple[str, ...] | None
    timeout_ms: int
    expect_outcome: str
    expect_exit: int | None
    check: Callable[[Mapping[str, Any]], str | None]  # None when the receipt is as expected, else why not
    argv: tuple[str, ...] = ()
    args: tuple[str, ...] = ()  # a WASI command's argv[1:]


def _stdout_is(text: bytes) -> Callable[[Mapping[str, Any]], str | None]:
    def check(r: Mapping[str, Any]) -> str | None:
        got = r.get("kuro/stdout")
        return None if got == text else f"stdout was {got!r}, expected {text!r}"

    return check


def _has_stderr(r: Mapping[str, Any]) -> str | None:
    return None if r.get("kuro/stderr") else "nothing on stderr"


def _both(*checks: Callable[[Mapping[str, Any]], str | None]) -> Callable[[Mapping[str, Any]], str | None]:
    def check(r: Mapping[str, Any]) -> str | None:
        for c in checks:
            why = c(r)
            if why is not None:
                return why
        return None

    return check


def _refused_write(r: Mapping[str, Any]) -> str | None:
    denials = r.get("kuro/denials") or []
    if not denials:
        return "no refused import call in kuro/denials"
    if "kuro/fs-root-after" in r:
        return "the fs root moved although the write was refused"
    return None


def _wc(paths: tuple[str, ...]) -> bytes:
    """What ``wc PATH...`` prints for the demo's files (lines, words, bytes; a total line for several)."""
    rows = [(FILES[p].count(b"\n"), len(FILES[p].split()), len(FILES[p]), p) for p in paths]
    if len(rows) > 1:
        rows.append((sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows), "total"))
    return "".join(f"{lines:7d} {words:7d} {size:7d} {name}\n" for lines, words, size, name in rows).encode()


def _read_all(r: Mapping[str, Any]) -> str | None:
    reads = r.get("kuro/reads") or []
    return None if len(reads) == len(FILES) else f"kuro/reads names {len(reads)} files, expected {len(FILES)}"


def _timed_out(r: Mapping[str, Any]) -> str | None:
    return None if r.get("kuro/timed-out?") is True else "kuro/timed-out? is not true"


def _argv_denied(r: Mapping[str, Any]) -> str | None:
    return None if r.get("kuro/reason") == "argv-not-a-process" else f"reason {r.get('kuro/reason')!r}"


def steps() -> list[Step]:
    """The demo's runs, in order."""
    return [
        Step("streaming output (stdout and stderr, live)", "hello.wat", "run", "terminal-repo", None, 10_000,
             "ok", 0, _both(_stdout_is(b"hello, kuro\n"), _has_stderr)),
        Step("reading a file through the fs_read import (fs/read granted)", "fs-cat.wat", "run", "terminal-repo",
             None, 10_000, "ok", 0, _stdout_is(FILES["greeting.txt"])),
        Step("a write refused: fs/write is not in terminal-repo's grant", "fs-write.wat", "run", "terminal-repo",
             None, 10_000, "exit", 1, _refused_write),
        Step("a C program (WASI: clang + wasi-libc) counting kuro.fs files, opened through its preopened /",
             "c/wc.wasm", "_start", "terminal-repo", None, 10_000, "ok", 0,
             _both(_stdout_is(_wc(tuple(FILES))), _read_all), args=tuple(FILES)),
        Step("an infinite loop stopped by its 50 ms deadline", "spin.wat", "run", "terminal-repo", None, 50,
             "timeout", 124, _timed_out),
        Step("an argv command is refused before anything loads", "", "", "terminal-repo", None, 10_000,
             "denied", None, _argv_denied, argv=("ls", "-la")),
    ]  # fmt: skip


def _fs_tree(store: Any) -> Fs:
    from kuro_fs.fs import Fs

    fs = Fs.empty(store)
    for path, data in FILES.items():
        result = fs.write(path, data)
        if not result.ok:  # pragma: no cover - a fixed, valid tree
            raise RuntimeError(f"demo tree: {result.receipt}")
        fs = result.fs
    return fs


def _live(out: TextIO) -> Callable[[Any, Any], None]:
    def on_chunk(_stream: Any, chunk: Any) -> None:
        text = bytes(chunk.data).decode("utf-8", "replace")
        prefix = "  stderr│ " if chunk.stream == "stderr" else "  stdout│ "
        out.write("".join(prefix + line + "\n" for line in text.splitlines()))
        out.flush()

    return on_chunk


def run_demo(store: Any, home: Path, *, out: TextIO, json_output: bool = False, err: TextIO | None = None) -> int:
    """Run every :func:`steps` entry on ``store`` / ``home``; print each receipt; 0 if all were as expected.

    With ``json_output`` only the receipts go to ``out``, one JSON object per line (so
    ``kuro demo --json | jq`` works); the narrative goes to ``err`` (default ``out``).
    """
    from kuro_wasm.cli.demo_guests import GUESTS
    from kuro_wasm.cli.refs import Refs
    from kuro_wasm.model.receipt import to_json
    from kuro_wasm.model.summary import denial_text, is_denial, receipt_text

    say = (err if json_output and err is not None else out).write
    say(f"kuro demo — home {home}\n\n")
    from kuro_wasm.host.api import add_guest, run  # the engine loads only when the demo runs
    from kuro_wasm.ledger.record import persisted_receipt

    cids = {name: add_guest(store, text) for name, text in GUESTS.items()}
    for name, cid in cids.items():
        say(f"guest {cid}  {name}\n")
    fs = _fs_tree(store)
    refs = Refs(refs_dir(home))
    if refs.get(DEMO_FS_NAME) != fs.root:
        refs.set(DEMO_FS_NAME, fs.root, "kuro demo: " + ", ".join(FILES))
    say(f"fs {DEMO_FS_NAME} → {fs.root}  ({', '.join(FILES)})\n")
    failures = 0
    for number, step in enumerate(steps(), start=1):
        if step.argv:
            label = " ".join(step.argv)
        else:
            words = " ".join((cids[step.guest], step.export, *step.args, "--fs", DEMO_FS_NAME))
            label = words + (f" --timeout-ms {step.timeout_ms}" if step.timeout_ms < 1000 else "")
        say(f"\n{number}. {step.title} ({step.guest or 'argv'})\n   $ kuro run {label}\n")
        out.flush()
        sess = session(f"demo-{number}", fs.root, step.mode, grant=step.grant)
        if step.argv:
            value = denial(sess, list(step.argv))
            assert value is not None
        else:
            command = guest(cids[step.guest], step.export, list(step.args))
            value = run(sess, command, store=store, fs=fs, timeout_ms=step.timeout_ms,
                        on_chunk=None if json_output else _live(out), home=home)  # fmt: skip
        cid = persisted_receipt(value, store)["kuro/receipt-cid"]  # as `kuro run` keeps it: no raw output
        if json_output:
            (err or out).flush()
            out.write(to_json(value) + "\n")
            out.flush()
        elif is_denial(value):
            say(denial_text(value, list(step.argv), cid) + "\n")
        else:
            say(receipt_text(value, cid) + "\n")
        why = _verdict(step, value)
        failures += why is not None
        say(f"   {'as expected' if why is None else 'NOT as expected: ' + why}\n")
    say(f"\n{len(steps()) - failures}/{len(steps())} receipts as expected. "
        "Show one again with `kuro receipt show CID`; the tree: `kuro fs ls -n demo`.\n")  # fmt: skip
    out.flush()
    return 0 if failures == 0 else 1


def _verdict(step: Step, value: Mapping[str, Any]) -> str | None:
    from kuro_wasm.model.summary import is_denial

    outcome = "denied" if is_denial(value) else value.get("kuro/outcome")
    if outcome != step.expect_outcome:
        return f"outcome {outcome!r}, expected {step.expect_outcome!r}"
    if step.expect_exit is not None and value.get("kuro/exit-code") != step.expect_exit:
        return f"exit code {value.get('kuro/exit-code')!r}, expected {step.expect_exit}"
    return step.check(value)


def demo_command(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro demo [--json]`` on the context's home."""
    return run_demo(ctx.store, ctx.home, out=ctx.out, err=ctx.err, json_output=args.json)
