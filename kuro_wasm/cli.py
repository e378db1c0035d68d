"""The ``kuro`` command line: parse → call the library → render → exit status.

## The one decision
The CLI is a thin shell over the library, and its contract with a person is
the exit status plus **one clear line on stderr** for anything that went wrong:
never a traceback. Typed errors (:class:`kuro_fs.errors.KuroFsError`,
:class:`kuro_wasm.errors.KuroError`, ``OSError``, an invalid WAT with its line
and column) are rendered as ``kuro: error: … [reference]``; anything else is a
bug and says so in one line (``KURO_DEBUG=1`` shows the traceback).

=====  =============================================================
exit   meaning
=====  =============================================================
0      success
N      ``kuro run``: the receipt's exit code (124 timeout, 125 output
       capped, 126 load error, 127 guest not found, 130 cancelled,
       134 trap …); a code outside 0..255 exits 1, the receipt keeps it
77     ``kuro run`` was denied before anything loaded (a denial value:
       ``argv-not-a-process``, ``missing-capabilities`` …) — EX_NOPERM
1      the operation failed: an fs op was refused (not-found …), an
       unknown receipt, a store or ledger failure
2      bad input: usage, malformed CID, file not found, invalid WAT or wasm,
       unknown capability or mode
70     an internal error (a bug); 130 interrupted
141    the reader of our output went away (``kuro fs cat big | head``):
       silent, as ``cat`` killed by SIGPIPE (128 + 13) would be
=====  =============================================================

Everything durable lives in the home (``--home`` / ``$KURO_HOME`` / ``~/.kuro``,
resolved only by :mod:`kuro_fs.home`). Every receipt and denial the CLI produces
is stored as a dag-cbor block, so ``kuro receipt show CID`` finds it later.

## Effects
Reads argv, files and stdin; writes stdout/stderr and the home. The host, the
ledger and wasmtime are imported by the commands that use them, so ``--help``
and the fs commands start without loading a wasm engine or SQLite.

## Not done here
``kuro run`` lives in :mod:`kuro_wasm.cli_run`, ``kuro receipt``/``ledger`` in
:mod:`kuro_wasm.cli_receipt`, the fs and CAR commands in :mod:`kuro_wasm.cli_fs`, the demo in
:mod:`kuro_wasm.demo`, the renderings in :mod:`kuro_wasm.summary`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TextIO

from kuro_fs.errors import KuroFsError
from kuro_fs.home import resolve_home
from kuro_wasm.errors import KuroError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "Context",
    "Failed",
    "NotFound",
    "UsageError",
    "build_parser",
    "command_list",
    "error_line",
    "main",
    "silence",
]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
#: The reader of stdout left (a closed pipe): what a shell reports for ``cat`` killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141
_WAT_POSITION = re.compile(r"-->\s*(?P<file>[^\n:]*):(?P<line>\d+):(?P<col>\d+)")


class UsageError(Exception):
    """Bad command-line input found after parsing (exit 2, one line)."""

    reference = "usage"


class Failed(Exception):
    """The operation could not be done, through no fault of the input's shape (exit 1, one line)."""

    reference = "failed"


class NotFound(Failed):
    """The thing named (a receipt, an operation, an fs name) is not in the home."""

    reference = "not-found"


# ---- context


@dataclass
class Context:
    """What every command handler gets: the resolved home and the two output streams."""

    home: Path
    out: TextIO
    err: TextIO
    _store: Any = field(default=None, repr=False)

    @property
    def store(self) -> Any:
        """The home's durable block store, opened on first use."""
        if self._store is None:
            from kuro_fs.filestore import default_store

            self._store = default_store(self.home)
        return self._store

    def close(self) -> None:
        """Close the store if it was opened."""
        if self._store is not None and hasattr(self._store, "close"):
            self._store.close()

    def say(self, text: str) -> None:
        """A line on stdout."""
        self.out.write(text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """A line on stderr (for people: summaries, progress, notes)."""
        self.err.write(text + "\n")
        self.err.flush()


Handler = Callable[[argparse.Namespace, Context], int]


# ---- parser


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with a pointer to --help), not usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="the kuro home holding blocks, refs and the ledger (default: $KURO_HOME or ~/.kuro)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; every command and option has help text (a test checks)."""
    from kuro_wasm import cli_fs, cli_receipt, cli_run

    parser = _Parser(
        prog="kuro",
        description="Run WebAssembly guests by CID with capability-gated imports over kuro.fs,\n"
        "and keep a receipt for every run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_home(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def leaf(group: Any, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=help_text)
        _add_home(p)
        p.set_defaults(handler=handler)
        return p

    def branch(name: str, help_text: str) -> Any:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _add_home(p)
        group = p.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND", parser_class=_Parser)
        group.required = True
        return group

    demo = leaf(sub, "demo", "add the bundled guests, write a small fs tree, run them and show each receipt", _demo)
    demo.add_argument(
        "--json",
        action="store_true",
        help="print only the receipts on stdout, one JSON object per line (the rest: stderr)",
    )

    guest = branch("guest", "manage guest modules in the block store")
    add = leaf(guest, "add", "add .wat or .wasm guests (WAT compiled on the way in); prints CID and file", _guest_add)
    add.add_argument("files", nargs="+", metavar="FILE", help="a .wat or .wasm file")

    cli_run.add_run_parser(leaf(sub, "run", "run a guest export by CID and print its receipt", cli_run.run))
    cli_fs.add_fs_parsers(branch("fs", "a named kuro.fs root kept in the home (default name: main)"), leaf)
    cli_fs.add_car_parsers(branch("car", "CARv1 export and import"), leaf)

    cid = leaf(sub, "cid", "print the CID of files as `kuro fs put` (and IPFS) would name them", cli_fs.cid_files)
    cid.add_argument("files", nargs="+", metavar="FILE", help="a file or directory")
    cid.add_argument("--raw", action="store_true", help="the raw-codec CID of the whole bytes (one block)")

    receipt = branch("receipt", "stored receipts")
    show = leaf(receipt, "show", "show a receipt by its CID or by the --op-id it ran under", cli_receipt.receipt_show)
    show.add_argument("ref", metavar="CID|OP_ID", help="a receipt CID, or an operation id from `kuro run --op-id`")
    show.add_argument("--json", action="store_true", help="the full receipt as JSON")
    show.add_argument(
        "--html", metavar="FILE", help="also write the guest's stdout, rendered, as an HTML <pre> fragment to FILE"
    )
    show.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the guest's output (default: auto, when stdout is a terminal)",
    )

    ledger = branch("ledger", "the durable ledger of operations run with --op-id")
    lst = leaf(ledger, "list", "list the operations in the ledger", cli_receipt.ledger_list)
    lst.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.epilog = "every command (`kuro COMMAND --help` for its options):\n" + "\n".join(
        f"  {usage:<32} " + "\n".ljust(36).join(textwrap.wrap(text, 78 - 35)) for usage, text in command_list(parser)
    )
    parser.epilog += "\n\nStart with `kuro demo`."
    return parser


def command_list(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(``kuro fs put LOCAL [DEST]``, its help) for every leaf command, in the order they were added."""
    rows: list[tuple[str, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    rows.extend(command_list(sub))
                else:
                    positionals = " ".join(_metavar(a) for a in sub._actions if not a.option_strings)
                    rows.append((f"{sub.prog} {positionals}".rstrip(), helps.get(name, "")))
    return rows


def _metavar(action: argparse.Action) -> str:
    name = str(action.metavar or action.dest)
    if action.nargs == "?":
        return f"[{name}]"
    if action.nargs in ("*", "+"):
        return f"{name}..." if action.nargs == "+" else f"[{name}...]"
    return name


# ---- errors


def error_line(exc: BaseException, *, source: str | None = None) -> tuple[str, int]:
    """The one line a person sees for ``exc``, and the exit status.

    A WAT parse error is shown as ``FILE:LINE:COL: invalid WAT: message``.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    parser_error = _wat_error(exc)
    if parser_error is not None:
        position = _WAT_POSITION.search(str(parser_error))
        assert position is not None
        first = str(parser_error).split("\n", 1)[0].strip()
        where = source or position["file"] or "<wat>"
        return f"{where}:{position['line']}:{position['col']}: invalid WAT: {first}", EXIT_BAD_INPUT
    wasmtime_error = _wasmtime_error()
    if wasmtime_error is not None and isinstance(exc, wasmtime_error):
        return f"invalid wasm: {text}", EXIT_BAD_INPUT
    if isinstance(exc, Failed):
        return f"{text} [{exc.reference}]", EXIT_FAILED
    if isinstance(exc, (KuroFsError, KuroError, UsageError)):
        reference = getattr(exc, "reference", "error")
        code = EXIT_BAD_INPUT if isinstance(exc, (ValueError, UsageError)) else EXIT_FAILED
        return f"{text} [{reference}]", code
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else ""
        detail = exc.strerror or text
        code = EXIT_BAD_INPUT if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError)) else 1
        return (f"{name}: {detail}" if name else detail), code
    return f"internal error: {type(exc).__name__}: {text} (set KURO_DEBUG=1 for the traceback)", EXIT_INTERNAL


def _wat_error(exc: BaseException) -> BaseException | None:
    """The WAT parser's error behind ``exc`` (itself or a cause), if it names a line and column."""
    seen: BaseException | None = exc
    while seen is not None:
        if _WAT_POSITION.search(str(seen)) is not None:
            return seen
        seen = seen.__cause__
    return None


def _wasmtime_error() -> type[BaseException] | None:
    try:
        from wasmtime import WasmtimeError
    except ImportError:  # pragma: no cover - wasmtime is a dependency
        return None
    return WasmtimeError


# ---- commands that live here


def _demo(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_wasm.demo import run_demo

    return run_demo(ctx.store, ctx.home, out=ctx.out, err=ctx.err, json_output=args.json)


def _guest_add(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_wasm.errors import LoadError
    from kuro_wasm.host import add_guest

    for name in args.files:
        data = Path(name).read_bytes()
        try:
            cid = add_guest(ctx.store, data)
        except Exception as exc:
            if _wat_error(exc) is not None:
                raise _SourcedError(exc, name) from exc
            if isinstance(exc, LoadError):  # the file is bad input: name it (several may be given)
                raise _BadGuest(f"{name}: {exc}") from exc
            raise
        ctx.say(f"{cid}  {name}")
    return 0


class _BadGuest(UsageError):
    """A guest file that is neither valid WAT nor a valid wasm module (exit 2)."""

    reference = "load-error"


class _SourcedError(Exception):
    """An error whose line:column belongs to a named file."""

    def __init__(self, exc: BaseException, source: str) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.source = source


# ---- entry point


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    tokens = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(tokens)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    ctx = Context(home=resolve_home(getattr(args, "home", None)), out=out, err=err)
    args.extras = extras
    args.tokens = tokens
    if extras and args.command != "run":
        err.write(f"kuro: error: unrecognized arguments: {' '.join(extras)} (see `kuro --help`)\n")
        return EXIT_BAD_INPUT
    try:
        handler: Handler = args.handler
        return handler(args, ctx)
    except KeyboardInterrupt:
        err.write("kuro: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `kuro fs cat big | head`: the reader left; not an error worth a line
        silence(out)
        silence(err)
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        shown: BaseException = exc
        source = None
        if isinstance(exc, _SourcedError):
            shown, source = exc.exc, exc.source
        line, code = error_line(shown, source=source)
        if os.environ.get("KURO_DEBUG"):
            traceback.print_exception(shown, file=err)
        err.write(f"kuro: error: {line}\n")
        err.flush()
        return code
    finally:
        ctx.close()


def silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null (its reader left), so no later flush fails.

    Python flushes ``sys.stdout`` at exit; on a closed pipe that would print
    ``Exception ignored … BrokenPipeError`` after we chose to exit quietly.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
