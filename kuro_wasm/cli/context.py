"""What every ``kuro`` command shares: the context it runs in, its exit statuses, and its one error line.

## The one decision
A person sees the exit status plus **one clear line on stderr** for anything
that went wrong: never a traceback. :func:`error_line` is the one place that
turns an exception into that line and status — typed errors
(:class:`kuro_fs.errors.KuroFsError`, :class:`kuro_wasm.errors.KuroError`,
``OSError``, an invalid WAT with its line and column) are rendered as
``kuro: error: … [reference]``; anything else is a bug and says so in one line
(``KURO_DEBUG=1`` shows the traceback). The exit statuses are listed in
:mod:`kuro_wasm.cli.kuro`.

This module imports no command module (each command module imports it), so the
command groups never import one another.

## Effects
Opens the home's block store on first use; writes stdout/stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from kuro_fs.errors import KuroFsError
from kuro_wasm.errors import KuroError

__all__ = [
    "EXIT_BAD_INPUT",
    "ClosedStream",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "Context",
    "Failed",
    "Handler",
    "Interrupted",
    "NotFound",
    "SourcedError",
    "TOKEN_ENV",
    "UsageError",
    "checked_token",
    "error_line",
    "finish_cancel_on_signal",
    "signals_deferred",
    "starting_guarded",
    "interrupted_status",
    "looks_like_cid",
    "new_command",
    "on_signal",
    "output_store",
    "silence",
    "wat_error",
]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
#: The reader of stdout left (a closed pipe): what a shell reports for ``cat`` killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141
_WAT_POSITION = re.compile(r"-->\s*(?P<file>[^\n:]*):(?P<line>\d+):(?P<col>\d+)")


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM, SIGHUP) asked the command to stop; the status is 128 + ``signum``.

    A ``KeyboardInterrupt``, so everything that already stops a guest on Ctrl-C
    (``kuro run``, the ledger) does the same for the other two.
    """

    def __init__(self, signum: int = 2) -> None:
        super().__init__(signum)
        self.signum = signum
        RECEIVED.append(signum)

    @property
    def status(self) -> int:
        return 128 + self.signum


#: Signals received while a command ran (newest last): a command that finished its work after one
#: (``kuro run`` storing the cancelled receipt) still exits 128 + that signal.
RECEIVED: list[int] = []
#: True once the command has said a signal after the first is only noted (:func:`finish_cancel_on_signal`).
_FINISH_CANCEL: list[bool] = [False]


def new_command() -> None:
    """A command begins: no signal received yet, none deferred, a second signal raises again.

    :func:`kuro_wasm.cli.kuro.main` calls it, so a process that runs several commands (a test, a
    library user) never carries one command's signal into the next.
    """
    RECEIVED.clear()
    _FINISH_CANCEL[0] = False
    _DEFERRED[0] = False


def finish_cancel_on_signal() -> None:
    """From now on a signal after the first raises nothing: the command finishes the cancel the first began.

    ``kuro run`` calls it: after Ctrl-C it kills the guest, waits for its ``cancelled`` receipt
    (bounded by the run's stop grace), stores it — in the ledger too — prints it and exits
    128 + the first signal; a SIGTERM on the heels of the Ctrl-C must not turn that into a
    crash with the receipt lost. ``kuro batch`` does not: there a second signal stops waiting.
    """
    _FINISH_CANCEL[0] = True


#: True while a guest is being started (:func:`signals_deferred`): a signal is only noted in RECEIVED.
_DEFERRED: list[bool] = [False]


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While the block runs, a signal is noted in :data:`RECEIVED` and raises nothing.

    ``kuro run`` starts its guest inside one: a signal landing between the guest's start (it may
    already be writing) and the code that cancels it on a signal would otherwise end the command
    with the run neither cancelled nor its receipt stored. After the block the caller looks at
    :data:`RECEIVED` and cancels.
    """
    _DEFERRED[0] = True
    try:
        yield
    finally:
        _DEFERRED[0] = False


@contextlib.contextmanager
def starting_guarded() -> Iterator[None]:
    """:func:`signals_deferred`, then KeyboardInterrupt at the block's end if a signal came during it.

    For code that must hold what the block made before an interrupt may land (the ledger starting a
    run and attaching its handle: :class:`kuro_wasm.ledger.ledger.Ledger`'s ``starting``).
    """
    before = len(RECEIVED)
    with signals_deferred():
        yield
    if len(RECEIVED) > before:
        raise KeyboardInterrupt


def on_signal(signum: int) -> None:
    """What the ``kuro`` executable does on SIGINT, SIGTERM or SIGHUP (:mod:`kuro_wasm.cli.launch`).

    Raises Interrupted: the first signal, and every one unless :func:`finish_cancel_on_signal` was called;
    nothing inside :func:`signals_deferred` (the signal is noted).
    """
    if _DEFERRED[0]:
        RECEIVED.append(signum)
        return
    if RECEIVED and _FINISH_CANCEL[0]:
        return
    raise Interrupted(signum)


def interrupted_status(exc: BaseException) -> int:
    """128 + the signal behind ``exc`` (130 for a plain ``KeyboardInterrupt``)."""
    return exc.status if isinstance(exc, Interrupted) else EXIT_INTERRUPTED


class ClosedStream(io.TextIOBase):
    """What ``kuro`` writes to when it was started with stdout (or stderr) closed (``kuro … >&-``).

    Python then has no ``sys.stdout`` at all (None); every write here raises ``OSError`` (EBADF), so a
    closed stream is handled as any unwritable one — one line, exit 1 — never as an internal error.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, f"{self.name} is closed")

    def flush(self) -> None:
        raise OSError(errno.EBADF, f"{self.name} is closed")


class UsageError(Exception):
    """Bad command-line input found after parsing (exit 2, one line)."""

    reference = "usage"


class Failed(Exception):
    """The operation could not be done, through no fault of the input's shape (exit 1, one line)."""

    reference = "failed"


class NotFound(Failed):
    """The thing named (a receipt, an operation, an fs name) is not in the home."""

    reference = "not-found"


TOKEN_ENV: Final = "KURO_GATEWAY_TOKEN"


def checked_token(token: str | None, source: str, check: Callable[[str], str]) -> str | None:
    """``token`` (None stays None) if ``check`` takes it, else a UsageError naming ``source``, never the token."""
    if token is None:
        return None
    try:
        return check(token)
    except ValueError:
        raise UsageError(
            f"{source}: a custody token is printable ASCII (an HTTP header carries it); this one is not"
        ) from None


@dataclass
class Context:
    """What every command handler gets: the resolved home and the two output streams."""

    home: Path
    out: TextIO
    err: TextIO
    gateway: str | None = None
    _store: Any = field(default=None, repr=False)
    _output: Any = field(default=None, repr=False)

    @property
    def store(self) -> Any:
        """The home's durable block store, opened on first use.

        With a ``gateway`` URL it is a :class:`kuro_fs.gateway.client.GatewayBlockStore` that keeps
        what it fetches (verified) in the home's store, and publishes with ``$KURO_GATEWAY_TOKEN``.
        """
        if self._store is None:
            from kuro_fs.filestore import default_store

            if self.gateway is None:
                self._store = default_store(self.home)
            else:
                from kuro_fs.gateway.client import GatewayBlockStore, check_token

                token = checked_token(os.environ.get(TOKEN_ENV) or None, f"${TOKEN_ENV}", check_token)
                self._store = GatewayBlockStore(self.gateway, cache=default_store(self.home), token=token)
        return self._store

    def prefetch(self, cid: str, scope: str = "entity") -> None:
        """With a gateway: fetch a whole file (``entity``) or DAG (``all``) the home lacks in one CAR request.

        Nothing happens without a gateway or when the home holds the root already. The prefetch is an
        optimisation: a gateway that will not send the CAR, is too slow with it (``GatewayTimeout``) or
        drops it (``GatewayUnreachable``) is left to the block-by-block reads that follow, which fetch
        what the CAR did not bring (the blocks it brought before failing are kept, verified) and
        report what is wrong if a block cannot come; a gateway that lies raises here.
        """
        if self.gateway is None:
            return
        from kuro_fs.errors import GatewayError, GatewayLied

        store = self.store
        if store.cache.has(cid):
            return
        try:
            store.prefetch(cid, scope)
        except GatewayLied:
            raise
        except GatewayError:
            pass

    def close(self) -> None:
        """Close the stores that were opened (and the home's store behind a gateway store)."""
        for store in (self._store, getattr(self._store, "cache", None), self._output):
            if store is not None and hasattr(store, "close"):
                store.close()

    def say(self, text: str) -> None:
        """A line on stdout."""
        self.out.write(text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """A line on stderr (for people: summaries, progress, notes)."""
        self.err.write(text + "\n")
        self.err.flush()


Handler = Callable[[argparse.Namespace, Context], int]


class SourcedError(Exception):
    """An error whose line:column belongs to a named file."""

    def __init__(self, exc: BaseException, source: str) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.source = source


def error_line(exc: BaseException, *, source: str | None = None) -> tuple[str, int]:
    """The one line a person sees for ``exc``, and the exit status.

    A WAT parse error is shown as ``FILE:LINE:COL: invalid WAT: message``.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    parser_error = wat_error(exc)
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


def wat_error(exc: BaseException) -> BaseException | None:
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


def output_store(ctx: Context) -> Any:
    """The home's private output store (``<home>/output``): raw output kept with ``--keep-output``, never published."""
    if ctx._output is None:
        from kuro_fs.filestore import FileBlockStore

        ctx._output = FileBlockStore(ctx.home / "output")
    return ctx._output


def looks_like_cid(token: str) -> bool:
    """True for a token that is a CID or a damaged attempt at one (not a program name).

    >>> looks_like_cid("ls"), looks_like_cid("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyk")
    (False, True)
    """
    if token.startswith(("baf", "Qm")) and len(token) >= 20:
        return True
    return len(token) >= 32 and token.isalnum()


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
