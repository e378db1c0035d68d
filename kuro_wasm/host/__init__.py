"""kuro_wasm.host: running guests — the engine and its epoch ticker, the compiled-module cache,
loading by CID, the guest kinds, one run (:class:`~kuro_wasm.host.job.Job`) and the public
:func:`run` / :func:`start` / :func:`run_async` / :class:`Handle`.

This layer imports :mod:`kuro_wasm.model` and :mod:`kuro_fs`, never the ledger or the CLI.
"""

from kuro_wasm.host.api import ISOLATION, Handle, add_guest, run, run_async, start

__all__ = ["ISOLATION", "Handle", "add_guest", "run", "run_async", "start"]
