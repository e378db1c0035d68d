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
and the fs commands start without loading a wasm engine or SQLite; and
``kuro COMMAND …`` builds (and imports) that command's parser alone
(:func:`build_parser` with ``only``), the whole tree only for ``kuro --help``
and an unknown command.

## Not done here
Each command group is its own module: ``kuro run`` in :mod:`kuro_wasm.cli.run`,
``kuro batch`` in :mod:`kuro_wasm.cli.batch`, ``kuro receipt``/``ledger`` in
:mod:`kuro_wasm.cli.receipt`, the fs and CAR commands in :mod:`kuro_wasm.cli.fs`,
``kuro guest`` in :mod:`kuro_wasm.cli.guest`, ``kuro fixtures`` in :mod:`kuro_wasm.cli.fixtures`,
the demo in :mod:`kuro_wasm.cli.demo`; what they share (the context, the error
line, the exit statuses) in :mod:`kuro_wasm.cli.context`; the renderings in
:mod:`kuro_wasm.model.summary`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Final, NoReturn, TextIO, cast

from kuro_fs.home import resolve_home
from kuro_wasm.cli.context import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    ClosedStream,
    Context,
    Handler,
    SourcedError,
    error_line,
    interrupted_status,
    new_command,
    silence,
)

__all__ = ["build_parser", "command_list", "main"]


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


def _add_gateway(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gateway",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="fetch blocks from (and publish to) this trustless gateway, keeping them in the home "
        "(default: $KURO_GATEWAY; none: the home's blocks only)",
    )


#: The commands, in the order ``kuro --help`` lists them.
COMMANDS: Final = ("demo", "guest", "run", "batch", "fs", "car", "cid", "receipt", "gateway", "fixtures", "ledger")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command tree; every command and option has help text (a test checks).

    With ``only`` (one of :data:`COMMANDS`), the tree holds that command alone: all that parsing
    ``kuro ONLY …`` reads (argparse consults only the chosen command's parser), without importing
    or building the other command groups — ``kuro run`` starts that much sooner.
    """

    def want(name: str) -> bool:
        return only is None or only == name

    parser = _Parser(
        prog="kuro",
        description="Run WebAssembly guests by CID with capability-gated imports over kuro.fs,\n"
        "and keep a receipt for every run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_home(parser)
    _add_gateway(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def leaf(group: Any, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=help_text)
        _add_home(p)
        _add_gateway(p)
        p.set_defaults(handler=handler)
        return p

    def branch(name: str, help_text: str) -> Any:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _add_home(p)
        _add_gateway(p)
        group = p.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND", parser_class=_Parser)
        group.required = True
        return group

    if want("demo"):
        from kuro_wasm.cli import demo as cli_demo

        demo = leaf(
            sub,
            "demo",
            "add the bundled guests, write a small fs tree, run them and show each receipt",
            cli_demo.demo_command,
        )
        demo.add_argument(
            "--json",
            action="store_true",
            help="print only the receipts on stdout, one JSON object per line (the rest: stderr)",
        )
    if want("guest"):
        from kuro_wasm.cli import guest as cli_guest

        guest = branch("guest", "manage guest modules in the block store")
        add = leaf(
            guest,
            "add",
            "add .wat or .wasm guests (WAT compiled on the way in); prints CID and file",
            cli_guest.guest_add,
        )
        add.add_argument("files", nargs="+", metavar="FILE", help="a .wat or .wasm file")
    if want("run"):
        from kuro_wasm.cli import run as cli_run

        cli_run.add_run_parser(leaf(sub, "run", "run a guest export by CID and print its receipt", cli_run.run))
    if want("batch"):
        from kuro_wasm.cli import batch as cli_batch

        cli_batch.add_batch_parser(
            leaf(
                sub,
                "batch",
                "run a JSON-lines file of guest invocations over a cluster, each at most once",
                cli_batch.batch,
            )
        )
    if want("fs") or want("car") or want("cid"):
        from kuro_wasm.cli import fs as cli_fs

        if want("fs"):
            cli_fs.add_fs_parsers(branch("fs", "a named kuro.fs root kept in the home (default name: main)"), leaf)
        if want("car"):
            cli_fs.add_car_parsers(branch("car", "CARv1 export and import"), leaf)
        if want("cid"):
            cid = leaf(
                sub, "cid", "print the CID of files as `kuro fs put` (and IPFS) would name them", cli_fs.cid_files
            )
            cid.add_argument("files", nargs="+", metavar="FILE", help="a file or directory")
            cid.add_argument("--raw", action="store_true", help="the raw-codec CID of the whole bytes (one block)")
    if want("receipt") or want("ledger"):
        from kuro_wasm.cli import receipt as cli_receipt

        if want("receipt"):
            receipt = branch("receipt", "stored receipts")
            show = leaf(
                receipt, "show", "show a receipt by its CID or by the --op-id it ran under", cli_receipt.receipt_show
            )
            show.add_argument(
                "ref",
                metavar="CID|OP_ID",
                nargs="?",
                help="a receipt CID (a stored receipt's), else an operation id from `kuro run --op-id`",
            )
            show.add_argument(
                "--op-id", metavar="ID", help="the receipt of this operation id (never read as a CID), instead of REF"
            )
            show.add_argument("--json", action="store_true", help="the full receipt as JSON")
            show.add_argument(
                "--html",
                metavar="FILE",
                help="also write the guest's stdout, rendered, as an HTML <pre> fragment to FILE",
            )
            show.add_argument(
                "--color",
                choices=("auto", "always", "never"),
                default="auto",
                help="colour the guest's output (default: auto, when stdout is a terminal)",
            )
    if want("gateway"):
        from kuro_wasm.cli import gateway as cli_gateway

        cli_gateway.add_gateway_parsers(branch("gateway", "an IPFS trustless gateway over the home, and custody"), leaf)
    if want("fixtures"):
        from kuro_wasm.cli import fixtures as cli_fixtures

        fixtures = branch("fixtures", "portable guest fixture cases (guests/fixtures/schema.json)")
        cli_fixtures.add_fixtures_parsers(fixtures, leaf)
    if want("ledger"):
        ledger = branch("ledger", "the durable ledger of operations run with --op-id")
        lst = leaf(ledger, "list", "list the operations in the ledger", cli_receipt.ledger_list)
        lst.add_argument("--json", action="store_true", help="one JSON object per line")
        lst.add_argument(
            "--limit", metavar="N", type=_page_size, default=100, help="at most N operations (default 100)"
        )
        lst.add_argument(
            "--after",
            metavar="CURSOR",
            help="start after this row (the cursor `kuro ledger list` prints when there is more)",
        )
    if only is not None:
        return parser
    import textwrap  # (with its regexes, ~2 ms: only the whole tree's help needs it)

    parser.epilog = "every command (`kuro COMMAND --help` for its options):\n" + "\n".join(
        f"  {usage:<32} " + "\n".ljust(36).join(textwrap.wrap(text, 78 - 35)) for usage, text in command_list(parser)
    )
    parser.epilog += "\n\nStart with `kuro demo`."
    return parser


def _page_size(text: str) -> int:
    from kuro_wasm.ledger.ledger import MAX_PAGE

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_PAGE}, got {text!r:.40}") from None
    if not 1 <= value <= MAX_PAGE:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_PAGE}, got {text:.40}")
    return value


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


_GLOBAL_OPTIONS: Final = frozenset({"-h", "--help", "--home", "--gateway"})
#: The global options that take a value (``--home DIR``, ``--gateway URL``; or ``--home=DIR``).
_WITH_VALUE: Final = frozenset({"--home", "--gateway"})


def _before_command(tokens: Sequence[str]) -> tuple[str | None, str | None]:
    """(the first option before the command that ``kuro`` itself does not know — argparse would only
    say that COMMAND is missing —, the command token when no ``--help`` precedes it); None for each
    that is not there."""
    skip, helped = False, False
    for token in tokens:
        if skip:
            skip = False
            continue
        if not token.startswith("-") or token == "-":
            return None, None if helped else token
        name = token.split("=", 1)[0]
        if name not in _GLOBAL_OPTIONS:
            return token, None
        helped = helped or name in ("-h", "--help")
        skip = name in _WITH_VALUE and "=" not in token
    return None, None


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    # None: started with the stream closed (`kuro … >&-`); written to, it says so (OSError), one line
    out = (sys.stdout or cast(TextIO, ClosedStream("stdout"))) if out is None else out
    err = (sys.stderr or cast(TextIO, ClosedStream("stderr"))) if err is None else err
    new_command()
    try:
        return _main(argv, out, err)
    except KeyboardInterrupt as exc:  # a signal while the parser was built or the home resolved
        err.write("kuro: interrupted\n")
        return interrupted_status(exc)


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    tokens = list(sys.argv[1:] if argv is None else argv)
    unknown, command = _before_command(tokens)
    if unknown is not None:
        err.write(f"kuro: error: unrecognized option {unknown!r} (see `kuro --help`)\n")
        return EXIT_BAD_INPUT
    # `kuro run …` builds (and imports) the run command alone; `--help` or an unknown command: the whole tree
    parser = build_parser(command if command in COMMANDS else None)
    try:
        args, extras = parser.parse_known_args(tokens)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    gateway = getattr(args, "gateway", None) or os.environ.get("KURO_GATEWAY") or None
    ctx = Context(home=resolve_home(getattr(args, "home", None)), out=out, err=err, gateway=gateway)
    args.extras = extras
    args.tokens = tokens
    if extras and args.command != "run":
        err.write(f"kuro: error: unrecognized arguments: {' '.join(extras)} (see `kuro --help`)\n")
        return EXIT_BAD_INPUT
    try:
        if gateway is not None:  # refused up front, whether or not the command reaches for a block
            from kuro_fs.gateway.client import check_url

            check_url(gateway)
        handler: Handler = args.handler
        return handler(args, ctx)
    except KeyboardInterrupt as exc:
        err.write("kuro: interrupted\n")
        return interrupted_status(exc)
    except BrokenPipeError:  # `kuro fs cat big | head`: the reader left; not an error worth a line
        silence(out)
        silence(err)
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        shown: BaseException = exc
        source = None
        if isinstance(exc, SourcedError):
            shown, source = exc.exc, exc.source
        line, code = error_line(shown, source=source)
        if os.environ.get("KURO_DEBUG"):
            import traceback

            traceback.print_exception(shown, file=err)
        err.write(f"kuro: error: {line}\n")
        err.flush()
        return code
    finally:
        ctx.close()
