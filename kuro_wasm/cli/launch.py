"""The ``kuro`` executable's first code: signals end the command with one line and the shell's status.

## The one decision
From the first line the command runs until it exits, an interrupt (SIGINT,
SIGTERM, SIGHUP) ends it the way a person expects — one line on stderr and
status 128 + the signal (130, 143, 129) — never a traceback. While the command
is still loading (imports take a noticeable fraction of a second on a loaded
machine) nothing is running yet, so the process just says so and exits. Once
loaded, each of those signals raises :class:`~kuro_wasm.cli.context.Interrupted`
(a ``KeyboardInterrupt``) in the main thread: a running guest is killed, its
``cancelled`` receipt is stored (in the ledger too, under ``--op-id``) and
printed, and the status is still 128 + the signal. During ``kuro run`` a signal
after the first raises nothing (:func:`~kuro_wasm.cli.context.finish_cancel_on_signal`):
Ctrl-C then SIGTERM still ends with the receipt stored and the first signal's status.

This module is only the executable's entry point (``[project.scripts]`` and
``python -m kuro_wasm``); importing the library never installs a signal handler.

## Not done here
A signal that arrives before this module runs — while the interpreter itself
starts and imports ``site`` (measured here: the first ~30–40 ms of the process on
a loaded 2-core machine) — gets Python's own behaviour (for SIGINT during
``site``: "Fatal Python error: init_import_site", exit 1). No Python code can
run earlier without a ``.pth`` hook that would act in every program of the
environment.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

TYPE_CHECKING = False  # not typing's (~2.5 ms): nothing before the guard should cost what it need not
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn

__all__ = ["SIGNALS", "guard_loading", "main"]

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _while_loading(signum: int, _frame: Any) -> None:
    os.write(2, b"kuro: interrupted\n")
    os._exit(128 + signum)


def _raise(signum: int, _frame: Any) -> None:
    from kuro_wasm.cli.context import on_signal

    on_signal(signum)


def guard_loading() -> None:
    """From now until :func:`main` has loaded the command, a signal exits at once with one line."""
    for signum in SIGNALS:
        signal.signal(signum, _while_loading)


def main() -> NoReturn:
    """Run the ``kuro`` command on ``sys.argv`` and exit with its status."""
    guard_loading()
    from kuro_wasm.cli.kuro import main as kuro_main

    for signum in SIGNALS:
        signal.signal(signum, _raise)
    status = kuro_main()
    # The command is over: what it stored is durable and its files are closed (kuro keeps no state in
    # finalizers). Frozen, the objects it loaded are not walked again by the collections the interpreter
    # makes on its way out (three full walks of every module's objects, only to free memory the OS takes
    # back: ~30-60 ms of a ~150 ms `kuro run` on a 2-core machine). Atexit handlers (the worker pool's),
    # the flush of stdout and stderr and the freeing of everything not in a cycle still happen.
    gc.freeze()
    sys.exit(status)
