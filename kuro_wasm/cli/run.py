"""``kuro run``: running guests from a shell (reading receipts back: :mod:`kuro_wasm.cli.receipt`).

## The one decision
``kuro run CID EXPORT [ARGS...]`` streams the guest's stdout/stderr to the
terminal *as it writes* (``on_chunk``), then prints the receipt summary on
stderr, so ``kuro run … > out.txt`` captures exactly what the guest wrote. With
``--json`` nothing is streamed and stdout is the receipt as JSON (its output is
inside). The exit status is the receipt's exit code; a denial exits 77.

Something that is not a CID in the CID position and does not look like one
(``kuro run ls -la``) is handed to the model as the argv vector it is, and the
model's ``argv-not-a-process`` denial is printed with what to do instead: the
CLI does not second-guess the gate, it lets the gate explain itself.

Every receipt and denial is stored in the home's block store as a dag-cbor
block in its *persisted form* (:func:`kuro_wasm.ledger.record.persisted_receipt`:
output as CIDs, byte counts and redacted previews — a secret the guest prints is
not written to disk); ``--keep-output`` also keeps the raw output and the full
receipt, in the home's private output store. With ``--op-id`` the
run goes through the ledger, which replays instead of running twice. A named fs
is resolved when the operation first runs (the root it saw is in the ledger), so
retrying the same command replays instead of conflicting with the name it moved.

## Effects
Block store, ledger, refs, stdin, stdout/stderr.

``--stdin -`` streams this process's stdin to the guest as it arrives (with
``--op-id`` it is read whole first: its CID is part of the operation's digest).
Ctrl-C kills the guest and still prints its receipt (``cancelled``, 130). So
does the reader of our output leaving (``kuro run … | head``), as SIGPIPE would
end a process; the exit status is still the receipt's. With ``--op-id`` a
reader leaving only stops the streaming: the operation runs to its end, since
its outcome is recorded once and for good.

## Not done here
No pager; no terminal line discipline for the guest (it reads bytes).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from kuro_fs.home import ledger_path, refs_dir
from kuro_wasm.cli.context import (
    EXIT_FAILED,
    RECEIVED,
    Context,
    Failed,
    UsageError,
    finish_cancel_on_signal,
    looks_like_cid,
    output_store,
    silence,
    starting_guarded,
)
from kuro_wasm.errors import ModelError, StillRunning
from kuro_wasm.model.isolation import ISOLATIONS
from kuro_wasm.model.sessions import ALIASES, CAPABILITIES, DEFAULT_MODE, MODES, denial, guest, session

__all__ = ["DEFAULT_MAX_STDIN", "add_run_parser", "argv_tokens", "run", "store_receipt"]

#: The most bytes ``kuro run`` reads as a whole for ``--stdin`` (``--max-stdin`` raises it): input read
#: whole is held in memory (and, with ``--op-id``, hashed into the operation's digest), so endless input
#: (``--stdin /dev/zero``) is refused with this bound named instead of eating the machine.
DEFAULT_MAX_STDIN = 64 * 2**20

_VALUE_OPTIONS = (
    "--grant",
    "--mode",
    "--fs",
    "--stdin",
    "--timeout-ms",
    "--max-output",
    "--max-memory",
    "--fuel",
    "--op-id",
    "--home",
    "--env",
    "--argv0",
    "--seed",
    "--fs-read-path",
    "--args-json",
    "--isolation",
    "--max-stdin",
)
_FLAG_OPTIONS = ("--json", "--keep-output", "--deterministic", "-h", "--help")


def add_run_parser(p: argparse.ArgumentParser) -> None:
    """The options of ``kuro run``."""
    from kuro_wasm.cli.refs import DEFAULT_NAME

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "Guest stdout/stderr stream live; the receipt summary follows on stderr.\n"
        "exit status: the receipt's exit code (0 ok, 124 timeout or fuel, 125 output capped,\n"
        "126 load error, 127 guest not found, 130 cancelled, 134 trap; outside 0..255: 1),\n"
        "77 denied before anything loaded (argv-not-a-process, missing-capabilities …), 2 bad input,\n"
        "74 the receipt could not be stored (it is still shown), 1 our own output could not be written\n"
        "(the receipt keeps the guest's outcome), 128+N a signal N cancelled the guest.\n"
        "example: kuro run bafkrei… run --grant guest/invoke --grant fs/read --timeout-ms 500"
    )
    p.add_argument("cid", metavar="CID", help="the guest's CID (from `kuro guest add`)")
    p.add_argument("export", metavar="EXPORT", nargs="?", help="the export to call")
    p.add_argument(
        "args",
        metavar="ARGS",
        nargs="*",
        help="arguments: a WASI command's argv[1:] as given (words after `--` are never read as options), "
        "numbers (ints or floats) for a kuro ABI v1 export, or a component export's parameters by their WIT "
        "types: numbers, true/false, strings and enum cases as written (or as a JSON string), other types as "
        "one JSON value each ('[1, 2]'); `run: func(args: list<string>)` takes the words as they are",
    )
    p.add_argument(
        "--env",
        metavar="NAME=VALUE",
        action="append",
        help="an environment variable for a WASI command; repeatable (none from this shell ever reaches a guest)",
    )
    p.add_argument("--argv0", metavar="NAME", help="a WASI command's argv[0] (default: the guest's CID)")
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="fixed clocks and seeded random bytes: the same inputs give the same receipt",
    )
    p.add_argument("--seed", metavar="N", type=int, default=0, help="the random seed of a --deterministic run")
    p.add_argument(
        "--grant",
        metavar="CAP",
        action="append",
        help=f"a capability to grant; repeatable; replaces the mode's default grant "
        f"(one of: {', '.join(sorted(CAPABILITIES))}; or an original kuro name: {', '.join(sorted(ALIASES))})",
    )
    p.add_argument(
        "--mode",
        metavar="MODE",
        default=DEFAULT_MODE,
        help=f"the session mode, a grant scope (default {DEFAULT_MODE}; one of {', '.join(MODES)})",
    )
    p.add_argument(
        "--fs",
        metavar="ROOT",
        help=f"the fs root the guest sees: a root CID or a named fs (default: the fs {DEFAULT_NAME!r}, "
        "advanced if the guest writes)",
    )
    p.add_argument(
        "--args-json",
        metavar="JSON",
        help="the export's args as a JSON list (strings, lists, maps … for a component's typed export; "
        'bytes as {"/": {"bytes": "<base64>"}}); instead of ARGS',
    )
    p.add_argument(
        "--fs-read-path",
        metavar="PATH",
        help="the file a kuro-browser-v0 guest's fs_read(buf_ptr, len) reads (the spec's kuro/fs-read-path)",
    )
    p.add_argument("--stdin", metavar="FILE|-", help="bytes for the guest's stdin (`-` reads this process's stdin)")
    p.add_argument(
        "--max-stdin",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_STDIN,
        help=f"the most bytes read as a whole for --stdin (a FILE, or `-` with --op-id); more is refused before "
        f"the run (default {DEFAULT_MAX_STDIN})",
    )
    p.add_argument("--timeout-ms", metavar="N", type=int, default=120_000, help="deadline in ms (default 120000)")
    p.add_argument(
        "--max-output",
        metavar="N",
        type=int,
        default=1_048_576,
        help="output cap in bytes, stdout and stderr together (default 1048576)",
    )
    p.add_argument(
        "--max-memory",
        metavar="N",
        type=int,
        help="memory limit in bytes: all the guest's memories and tables together",
    )
    p.add_argument("--fuel", metavar="N", type=int, help="wasmtime fuel budget (off by default)")
    p.add_argument(
        "--isolation",
        choices=sorted(ISOLATIONS),
        help="wasmtime: in this process; process: in a hardened worker process "
        "(default: $KURO_ISOLATION, else wasmtime)",
    )
    p.add_argument("--op-id", metavar="ID", help="run through the ledger under this operation id (replays if done)")
    p.add_argument("--json", action="store_true", help="print the full receipt as JSON on stdout (no live output)")
    p.add_argument(
        "--keep-output",
        action="store_true",
        help="also keep the raw output and the full receipt (in the home's private output store; off by default, "
        "so nothing the guest prints is written to disk beyond a redacted preview)",
    )
    # Every option this parser knows (those added for all commands too), to tell guest args from kuro's options.
    options = [(a.option_strings, a.nargs == 0) for a in p._actions if a.option_strings]
    p.set_defaults(
        value_options=frozenset(o for names, flag in options if not flag for o in names),
        flag_options=frozenset(o for names, flag in options if flag for o in names),
    )


# ---- pure helpers


def argv_tokens(tokens: Sequence[str]) -> list[str]:
    """The argv a user typed after ``run``, minus kuro's own options (for the denial message).

    >>> argv_tokens(["run", "ls", "-la", "--mode", "terminal-repo", "/tmp"])
    ['ls', '-la', '/tmp']
    """
    rest = list(tokens[list(tokens).index("run") + 1 :]) if "run" in tokens else list(tokens)
    out: list[str] = []
    skip = False
    for token in rest:
        if skip:
            skip = False
        elif token in _VALUE_OPTIONS:
            skip = True
        elif token in _FLAG_OPTIONS or token.split("=", 1)[0] in _VALUE_OPTIONS:
            continue
        else:
            out.append(token)
    return out


def guest_words(
    tokens: Sequence[str], values: Collection[str] = _VALUE_OPTIONS, flags: Collection[str] = _FLAG_OPTIONS
) -> list[str]:
    """The words after ``run CID EXPORT`` that are the guest's args: kuro's own options (``values`` take a
    value, ``flags`` none) are left out before a ``--``, everything after it is kept as it is.

    >>> guest_words(["run", "bafy", "_start", "-n", "--grant", "fs/read", "in.txt", "--", "--grant", "x"])
    ['-n', 'in.txt', '--grant', 'x']
    """
    rest = list(tokens[list(tokens).index("run") + 1 :]) if "run" in tokens else list(tokens)
    out: list[str] = []
    positional = 0
    skip = literal = False
    for token in rest:
        if literal:
            out.append(token)
        elif skip:
            skip = False
        elif token == "--":
            literal = True
        elif token in values:
            skip = True
        elif token in flags or token.split("=", 1)[0] in values:
            continue
        elif positional < 2:
            positional += 1
        else:
            out.append(token)
    return out


def _unknown_option(tokens: Sequence[str], known: Collection[str]) -> str | None:
    """The first ``--word`` before a ``--`` that is not an option of ``kuro run`` (a typo, not a guest arg)."""
    for token in tokens[list(tokens).index("run") + 1 :] if "run" in tokens else tokens:
        if token == "--":
            return None
        if token.startswith("--") and token.split("=", 1)[0] not in known:
            return token
    return None


def _env(pairs: list[str] | None) -> dict[str, str] | None:
    if pairs is None:
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env takes NAME=VALUE, got {pair!r}")
        if name in env:  # never silently keep one of two: a guest sees exactly what was asked
            raise UsageError(f"--env {name} is given twice ({env[name]!r} and {value!r}); give each name once")
        env[name] = value
    return env


def _guest_args(ctx: Context, cid: str, export: str, words: list[str], fuel: bool) -> list[Any]:
    """The spec's args from the command line's words, as the guest's kind reads them
    (:func:`kuro_wasm.host.loader.args_from_words`: a WASI command's argv words as they are, numbers for a
    kuro ABI v1 export, a component export's WIT parameter types). A guest that cannot be loaded gets
    numbers if every word is one, else the words (its receipt will say why it did not run)."""
    from kuro_wasm.host.loader import args_from_words
    from kuro_wasm.model.abi import numbers_from_words

    got = args_from_words(ctx.store, cid, export, words, fuel=fuel, home=ctx.home)
    if got is None:
        numbers = numbers_from_words(words)
        return list(words) if isinstance(numbers, str) else list(numbers)
    if isinstance(got, str):
        raise UsageError(got)
    return got


def _args(args: argparse.Namespace, ctx: Context, cid: str, words: list[str]) -> list[Any]:
    """The spec's args: the ARGS words as the guest's kind reads them (:func:`_guest_args`), or
    ``--args-json`` (a JSON list; bytes the DAG-JSON way)."""
    text = getattr(args, "args_json", None)
    if text is None:
        return _guest_args(ctx, cid, args.export, words, args.fuel is not None)
    if words:
        raise UsageError("give the export's args as ARGS or as --args-json, not both")
    from kuro_wasm.model.receipt import from_json

    try:
        value = from_json(text)
    except ModelError as exc:  # JSON, but a key given twice
        raise UsageError(f"--args-json: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"--args-json is not JSON: {exc}") from None
    if not isinstance(value, list):
        raise UsageError(f"--args-json must be a JSON list, got {type(value).__name__}")
    return value


# ---- effects


def store_receipt(ctx: Context, value: Mapping[str, Any], *, stdin: bytes | None = None, keep: bool = False) -> str:
    """Persist a receipt (or denial) as :func:`kuro_wasm.ledger.record.persisted_receipt` does; returns its CID.

    The run's stdin lines are concealed in the previews. ``keep``: the raw output and
    the full receipt go to the home's private output store too (its CID is then the full receipt's).
    """
    from kuro_wasm.ledger.record import persisted_receipt

    conceal = [stdin.decode("utf-8", "replace")] if stdin else []
    kept = persisted_receipt(value, ctx.store, conceal=conceal, output_store=output_store(ctx) if keep else None)
    cid = kept.get("kuro/receipt-cid")
    if not isinstance(cid, str):
        raise Failed(f"the receipt could not be stored in {ctx.home}")
    return cid


#: The exit status of a run whose receipt (or denial) is shown but could not be stored (sysexits' EX_IOERR).
EXIT_NOT_STORED = 74


def _store_or_say(ctx: Context, value: Mapping[str, Any], **how: Any) -> str | None:
    """:func:`store_receipt`, or None when the home could not take it (a read-only or full disk, a failing
    store): the run has happened, so its receipt is still shown, and :data:`EXIT_NOT_STORED` says it is not kept."""
    from kuro_fs.errors import KuroFsError

    try:
        return store_receipt(ctx, value, **how)
    except (Failed, KuroFsError, OSError):
        return None


def _not_stored(ctx: Context) -> int:
    try:
        where = f"could not be stored in {ctx.home} (read-only or full?)"
        ctx.note(f"kuro: error: the receipt above {where} [receipt-not-stored]")
    except OSError:
        pass  # stderr itself cannot be written: the status still says it
    return EXIT_NOT_STORED


def _fs_root(ctx: Context, spec: str | None) -> tuple[str, str | None, str | None]:
    """(root CID the guest sees, the fs name to advance or None, that name's root before the run)."""
    from kuro_fs.cid import parse
    from kuro_fs.errors import InvalidCID
    from kuro_fs.fs import Fs
    from kuro_wasm.cli.refs import DEFAULT_NAME, Refs

    refs = Refs(_refs_dir(ctx))
    if spec is not None:
        try:
            return str(parse(spec)), None, None
        except InvalidCID:
            if looks_like_cid(spec):
                raise
        root = refs.get(spec)
        if root is None:
            raise UsageError(f"no fs named {spec!r} (nor a CID); create it: `kuro fs mkdir DIR -n {spec}`")
        return root, spec, root
    before = refs.get(DEFAULT_NAME)
    if before is None:
        return str(Fs.empty(ctx.store).root), DEFAULT_NAME, None
    return before, DEFAULT_NAME, before


def _recorded_root(ctx: Context, op_id: str) -> str | None:
    """The fs root operation ``op_id`` ran against, if the ledger has it."""
    if not ledger_path(ctx.home).exists():
        return None
    from kuro_wasm.ledger.ledger import Ledger

    with Ledger(home=ctx.home, store=ctx.store) as ledger:
        found = ledger.result(op_id)
    root = found.get("kuro/fs-root-cid")
    return root if isinstance(root, str) else None


def _refs_dir(ctx: Context) -> Path:
    return refs_dir(ctx.home)


def _stdin_fd() -> int:
    """Our standard input's file descriptor. Raises UsageError if there is none (fd 0 closed)."""
    try:
        fd = sys.stdin.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        raise _StdinClosed("--stdin -: standard input is closed, there is nothing to read") from None
    return fd


class _StdinClosed(UsageError):
    reference = "stdin-closed"


class _StdinTooLarge(UsageError):
    reference = "stdin-too-large"


def _stdin_bytes(spec: str | None, limit: int = DEFAULT_MAX_STDIN) -> bytes | None:
    """All of ``--stdin`` (a file, or ``-``: this process's stdin), at most ``limit`` bytes.

    Raises UsageError (``stdin-too-large``) as soon as more than ``limit`` bytes arrive, before anything runs.
    """
    if spec is None:
        return None
    if limit < 0:
        raise UsageError(f"--max-stdin must be at least 0, got {limit}")
    chunks: list[bytes] = []
    got = 0
    with open(_stdin_fd() if spec == "-" else spec, "rb", buffering=0, closefd=spec != "-") as source:
        while got <= limit and (data := source.read(min(1 << 20, limit + 1 - got))):
            chunks.append(data)
            got += len(data)
    if got > limit:
        where = "standard input" if spec == "-" else spec
        raise _StdinTooLarge(
            f"--stdin {spec}: {where} holds more than --max-stdin {limit} bytes; "
            "raise --max-stdin, or stream it with `--stdin -` (without --op-id)"
        )
    return b"".join(chunks)


class _Live:
    """Writes guest chunks to our stdout/stderr as they happen; remembers whether a line is open.

    If the reader of one of our streams leaves (``kuro run … | head``), that stream
    is pointed at /dev/null, nothing more is streamed to it, and ``on_gone`` (the
    handle's ``kill``, when there is a handle) stops the guest as SIGPIPE would stop
    a process: the run ends ``cancelled`` and its receipt is still stored.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.open_line = False
        self.gone: set[str] = set()
        #: Our streams that could not be written (``>/dev/full``, closed), and why: the output is lost.
        self.lost: dict[str, str] = {}
        self._lock = threading.Lock()
        self._on_gone: Callable[[], None] | None = None

    def attach(self, on_gone: Callable[[], None]) -> None:
        """Call ``on_gone`` when a reader leaves (at once if one already has)."""
        with self._lock:
            self._on_gone = on_gone
            already = bool(self.gone)
        if already:
            on_gone()

    def __call__(self, _stream: Any, chunk: Any) -> None:
        name, data = getattr(chunk, "stream", None), getattr(chunk, "data", None)
        if not isinstance(data, (bytes, bytearray)) or not data:
            return
        which = "stderr" if name == "stderr" else "stdout"
        if which in self.gone or which in self.lost:
            return
        target = self.ctx.err if which == "stderr" else self.ctx.out
        try:
            buffer = getattr(target, "buffer", None)
            if buffer is not None:
                target.flush()
                buffer.write(data)
                buffer.flush()
            else:
                target.write(bytes(data).decode("utf-8", "replace"))
                target.flush()
        except BrokenPipeError:
            silence(target)
            with self._lock:
                self.gone.add(which)
                on_gone = self._on_gone
            if on_gone is not None:
                on_gone()
            return
        except OSError as exc:  # full, closed, an I/O error: the guest did nothing wrong and runs on
            silence(target)
            with self._lock:  # lost, not gone: no reader left, so nothing stops the guest (attach too)
                self.lost.setdefault(which, _why(exc))
            return
        self.open_line = not bytes(data).endswith(b"\n")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro run``: see the module docstring."""
    from kuro_fs.cid import parse
    from kuro_fs.errors import InvalidCID
    from kuro_wasm.cli.refs import RefConflict, Refs
    from kuro_wasm.model.receipt import to_json
    from kuro_wasm.model.summary import is_denial, is_status_answer, receipt_text

    finish_cancel_on_signal()  # a second signal must not cut short the cancel the first one began
    cid_text: str = args.cid
    try:
        parse(cid_text)
        is_cid = True
    except InvalidCID:
        if looks_like_cid(cid_text):
            raise
        is_cid = False
    if not is_cid and cid_text.endswith((".wat", ".wasm")) and Path(cid_text).is_file():
        raise UsageError(f"kuro run takes a guest CID, not a file: add it first with `kuro guest add {cid_text}`")
    tokens: list[str] = getattr(args, "tokens", None) or ["run", cid_text, *([args.export] if args.export else [])]
    values: frozenset[str] = getattr(args, "value_options", frozenset(_VALUE_OPTIONS))
    flags: frozenset[str] = getattr(args, "flag_options", frozenset(_FLAG_OPTIONS))
    unknown = _unknown_option(tokens, values | flags) if is_cid else None
    if unknown is not None:
        raise UsageError(f"unrecognized option {unknown!r} (a guest's own options go after `--`)")
    root, fs_name, before = _fs_root(ctx, args.fs)
    replaying = False
    if is_cid and args.op_id is not None and fs_name is not None:
        # A named fs is resolved when the operation first runs: a retry of the same command
        # sees the root that run saw (the name has since moved, often by the run itself), so
        # it replays instead of conflicting with itself.
        recorded = _recorded_root(ctx, args.op_id)
        if recorded is not None:
            root, before, replaying = recorded, recorded, True
    sess = _session(root, args.mode, args.grant)
    if not is_cid:
        return _deny(ctx, sess, argv_tokens(getattr(args, "tokens", [cid_text])), args, root)
    if args.export is None:
        raise UsageError("missing EXPORT: kuro run CID EXPORT [ARGS...]")
    max_stdin = getattr(args, "max_stdin", DEFAULT_MAX_STDIN)
    stdin = _stdin_bytes(args.stdin, max_stdin) if args.op_id is not None or args.stdin != "-" else None
    guest(cid_text, args.export)  # an export no guest could have is refused before the guest is loaded
    words = guest_words(tokens, values, flags) if getattr(args, "tokens", None) else list(args.args)
    spec_args = _args(args, ctx, cid_text, words)
    command = guest(
        cid_text, args.export, spec_args, fs_read_path=args.fs_read_path, env=_env(args.env), argv0=args.argv0
    )
    live = _Live(ctx)
    options: dict[str, Any] = {
        "store": ctx.store,
        "fs": root,
        "stdin": stdin,
        "timeout_ms": args.timeout_ms,
        "max_output_bytes": args.max_output,
        "max_memory_bytes": args.max_memory,
        "fuel": args.fuel,
        "home": ctx.home,
    }
    if args.deterministic or args.seed:
        options.update(deterministic=args.deterministic, seed=args.seed)
    if args.isolation is not None:
        options["isolation"] = args.isolation
    if not args.json:
        options["on_chunk"] = live
    if args.op_id is not None:
        from kuro_wasm.ledger.ledger import Ledger

        with Ledger(
            home=ctx.home, store=ctx.store, output_store=output_store(ctx), starting=starting_guarded
        ) as ledger:
            result = ledger.run(args.op_id, sess, command, keep_output=args.keep_output, **options)
        # The ledger stored the persisted receipt as a block and names it; its answer
        # is the stored shape (output as CIDs + a redacted preview).
        known = result.get("kuro/receipt-cid")
        answer_only = is_status_answer(result)  # running or unknown: no receipt to store, name or miss
        cid = None if answer_only else known if isinstance(known, str) else _store_or_say(ctx, result)
        if result.get("kuro/replayed") is True and not args.json:
            try:
                _replay_output(ctx, result)
            except BrokenPipeError:
                raise
            except OSError as exc:
                silence(ctx.out)
                live.lost.setdefault("stdout", _why(exc))
    else:
        answer_only = False
        result = _run_live(sess, command, options, pump_stdin=args.stdin == "-", live=None if args.json else live)
        cid = _store_or_say(ctx, result, stdin=options["stdin"], keep=args.keep_output)
    if is_denial(result):
        shown = _show_denial(ctx, result, None, cid, args.json)
        status = shown if cid is not None else _not_stored(ctx)
        return 128 + RECEIVED[0] if RECEIVED else status  # nothing ran; a signal still says how we ended
    # The named fs advances first: what the run did is recorded whether or not what follows can be shown.
    after = result.get("kuro/fs-root-after")
    advanced = False
    conflict: str | None = None
    if fs_name is not None and isinstance(after, str) and after != root:
        note = f"run {cid_text[:16]}… {args.export} (receipt {cid or 'not stored'})"
        try:
            Refs(_refs_dir(ctx)).set(fs_name, after, note, expected=before)
            advanced = True
        except RefConflict:  # after a replay the first run already moved the name (and maybe others since)
            conflict = None if replaying else f"fs {fs_name} moved while the guest ran; not advanced to {after}"
    if args.json:
        try:
            ctx.say(to_json(result))
        except BrokenPipeError:
            raise
        except OSError as exc:
            silence(ctx.out)
            live.lost.setdefault("stdout", _why(exc))
    else:
        try:
            if live.open_line:
                ctx.note("")
            ctx.note(receipt_text(result, cid))
            if advanced:
                ctx.note(f"  fs {fs_name} → {after}")
        except OSError as exc:  # stderr full or closed: the receipt is stored; say so if anything can
            silence(ctx.err)
            live.lost.setdefault("stderr", _why(exc))
    code = result.get("kuro/exit-code")
    status = code if isinstance(code, int) and 0 <= code <= 255 else 1
    if cid is None and not answer_only:  # shown, not kept: never exit as if it were
        status = _not_stored(ctx)
    if RECEIVED:  # a signal cancelled the guest: its receipt is stored and shown; exit as the (first) signal says
        status = 128 + RECEIVED[0]
    if conflict is not None:
        try:
            ctx.note(f"kuro: error: {conflict} [ref-conflict]")
        except OSError:
            pass
        return 1
    return _lost_output(ctx, live.lost, cid, status)


def _why(exc: OSError) -> str:
    return " ".join(str(exc.strerror or exc).split())


def _lost_output(ctx: Context, lost: Mapping[str, str], cid: str | None, status: int) -> int:
    """The exit status once the receipt is stored: never success if output this command had to write was lost.

    The receipt stays the guest's true outcome (the guest did nothing wrong); the command's own
    failure to deliver is one line on stderr (if stderr itself can still be written) and status 1.
    """
    if not lost:
        return status
    which = " and ".join(sorted(lost))
    try:
        kept = f"receipt {cid}" if cid is not None else "receipt not stored"
        ctx.note(f"kuro: error: could not write {which} ({'; '.join(lost.values())}); {kept} [output-lost]")
    except OSError:
        pass
    return status if status != 0 else EXIT_FAILED


def _session(root: str, mode: str, grant: list[str] | None) -> Any:
    try:
        return session(f"cli-{os.urandom(6).hex()}", root, mode, grant=grant)
    except ModelError as exc:
        if getattr(exc, "reason", None) == "signed-opt-in-required":  # the library's hint names a Python keyword
            others = ", ".join(name for name, spec in MODES.items() if not spec.host)
            raise UsageError(
                f"--mode {mode} needs a signed opt-in, which the command line does not give (and it runs "
                f"no wasm guest); use one of {others}"
            ) from None
        raise


def _run_live(
    sess: Any, command: Mapping[str, Any], options: dict[str, Any], *, pump_stdin: bool, live: _Live | None
) -> Any:
    """Run on a worker thread: stdin streamed as it arrives (``--stdin -``), Ctrl-C kills the guest (130)."""
    from kuro_wasm.host.api import start, stop_and_wait

    stdin_fd = _stdin_fd() if pump_stdin else -1  # refused before anything starts
    handle: Any = None
    try:  # a signal from the guest's start on is a cancel, never lost (it may already be writing)
        with starting_guarded():  # ... even one landing before ``handle`` is known: raised once it is held
            handle = start(sess, command, **options)
        if isinstance(handle, Mapping):
            return handle  # a denial: nothing was loaded or run
        if live is not None:
            live.attach(handle.kill)
        if pump_stdin:
            threading.Thread(target=_pump, args=(handle, stdin_fd), name="kuro-stdin", daemon=True).start()
        else:
            handle.close_stdin()
        while True:
            try:
                return handle.wait(0.2)
            except StillRunning:
                continue
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP (kuro_wasm.cli.launch): a cancel, with a receipt
        if handle is None:
            raise  # nothing started
        if isinstance(handle, Mapping):
            return handle  # refused while the signal came: nothing ran (run() exits as the signal says)
        return stop_and_wait(handle)


def _pump(handle: Any, fd: int) -> None:
    """Copy this process's stdin to the guest as it arrives; end of input closes the guest's stdin."""
    try:
        while data := os.read(fd, 65536):
            handle.write(data)
    except (OSError, ValueError):
        pass
    finally:
        handle.close_stdin()


def _deny(ctx: Context, sess: Any, argv: list[str], args: argparse.Namespace, root: str) -> int:
    """An argv vector is denied; under ``--op-id`` through the ledger, as ``Ledger.run`` records a denial.

    The operation's identity is the library's: session, the argv as the command, the fs root and
    the limits given (no stdin: nothing reads it for a command that cannot run). A denial the home
    cannot store is still shown, and the exit says it is not kept (:data:`EXIT_NOT_STORED`).
    """
    from kuro_wasm.model.summary import is_denial, receipt_text

    if args.op_id is None:
        value = denial(sess, argv)
        assert value is not None, "an argv vector is always denied"
        cid = _store_or_say(ctx, value)
        shown = _show_denial(ctx, value, argv, cid, args.json)
        return shown if cid is not None else _not_stored(ctx)
    from kuro_wasm.ledger.ledger import Ledger

    options = {
        "fs": root,
        "timeout_ms": args.timeout_ms,
        "max_output_bytes": args.max_output,
        "max_memory_bytes": args.max_memory,
        "fuel": args.fuel,
        "home": ctx.home,
    }
    with Ledger(home=ctx.home, store=ctx.store, output_store=output_store(ctx), starting=starting_guarded) as ledger:
        value = ledger.run(args.op_id, sess, argv, store=ctx.store, keep_output=args.keep_output, **options)
    known = value.get("kuro/receipt-cid")
    cid = known if isinstance(known, str) else _store_or_say(ctx, value)
    if is_denial(value):
        shown = _show_denial(ctx, value, argv, cid, args.json)
        return shown if cid is not None else _not_stored(ctx)
    ctx.note(receipt_text(value, cid))  # the op id is running elsewhere, or its fate is unknown
    return EXIT_FAILED


def _show_denial(
    ctx: Context, value: Mapping[str, Any], argv: list[str] | None, cid: str | None, json_output: bool
) -> int:
    from kuro_wasm.model.receipt import to_json
    from kuro_wasm.model.summary import DENIAL_EXIT, denial_text

    if json_output:
        ctx.say(to_json(value))
    ctx.note("kuro: " + denial_text(value, argv, cid))
    return DENIAL_EXIT


def _replay_output(ctx: Context, result: Mapping[str, Any]) -> None:
    """A replayed run does not run again: show its output as kept (the bytes if kept, else the redacted preview)."""
    for name, target in (("stdout", ctx.out), ("stderr", ctx.err)):
        cid = result.get(f"kuro/{name}-cid")
        data = output_store(ctx).get(cid) if isinstance(cid, str) and result.get("kuro/output-kept") else None
        if data is None:
            shown = result.get(f"kuro/{name}-preview")
            data = shown.encode("utf-8") if isinstance(shown, str) else None
        if data:
            target.flush()
            buffer = getattr(target, "buffer", None)
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                target.write(bytes(data).decode("utf-8", "replace"))
