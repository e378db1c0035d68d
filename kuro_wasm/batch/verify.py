"""What the driver believes of a worker's answer: blocks once re-hashed, a new fs root once complete.

## The one decision
A receipt from a worker is rebuilt by the driver, never taken as sent: the session, the command
and everything derived from them are the driver's own (:func:`kuro_wasm.model.receipt.receipt`
over the worker's host keys, each re-checked by kind); every block handed back is re-hashed
and held apart (:class:`kuro_wasm.host.worker.verify.Staged`); the kept output must hash to the
receipt's ``kuro/stdout-cid``/``kuro/stderr-cid`` and be as long as its ``kuro/stdout-bytes``/
``kuro/stderr-bytes``, and ``kuro/truncated?`` is stated only when true; and a new fs root (``kuro/fs-root-after``) is
believed only when it is a kuro.fs directory whose every block is in the driver's store already or
was handed back in this answer (then walked in turn), so its walk costs what the run wrote (the
worker-process pool's own check, :func:`kuro_wasm.host.worker.verify.accept_root`). Only a
believed answer's blocks reach the driver's store, and only those its root reaches. An answer that
fails any check becomes a ``host-error`` receipt saying which check failed (the run happened, so its
op id is used: it is not run again), names no new root, and leaves nothing in the store. So does a
believed one whose blocks the driver's store cannot take (a full or read-only disk): the batch goes on.

## Effects
Writes the blocks of believed roots to the driver's store.

## Not done here
Whether the new root is what the guest's writes *should* give is the worker's word: knowing it
would mean running the guest again. A worker is trusted as Dask trusts it (Dask itself unpickles
what workers send); these checks keep a damaged or misconfigured worker from filing wrong bytes
or half a tree, they do not contain a hostile one.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.errors import KuroFsError
from kuro_wasm.errors import ModelError
from kuro_wasm.host.worker.verify import Staged, accept_root, check_root
from kuro_wasm.model.invocation import Invocation
from kuro_wasm.model.receipt import namespace, receipt

__all__ = ["accepted", "host_error", "worker_died"]


def _problem(store: BlockStore, host: Mapping[str, Any], blocks: object, staged: Staged) -> str | None:
    if not isinstance(blocks, list):
        return "the worker's blocks are not a list"
    for pair in blocks:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[1], bytes)):
            return "a handed-back block is not a (CID, bytes) pair"
        refused = staged.add(pair[0], pair[1])
        if refused is not None:
            return f"a handed-back block was refused: {refused}"
    keys = namespace(host)  # as the receipt will read them: a bare "stdout" is "kuro/stdout"
    for name in ("stdout", "stderr"):
        data, named, count = keys.get(f"kuro/{name}"), keys.get(f"kuro/{name}-cid"), keys.get(f"kuro/{name}-bytes")
        if isinstance(data, bytes) and named is not None and raw_cid(data) != named:
            return f"the kept {name} does not hash to kuro/{name}-cid {named}"
        if isinstance(data, bytes) and count is not None and count != len(data):
            return f"kuro/{name}-bytes {count!r} is not the {len(data)} bytes of {name} kept"
    if keys.get("kuro/truncated?") is False:
        return "kuro/truncated? is false (a receipt states it only when true)"
    root = host.get("kuro/fs-root-after")
    return None if root is None else check_root(store, root, staged)


def accepted(store: BlockStore, inv: Invocation, answer: Mapping[str, Any]) -> dict[str, Any]:
    """The receipt of ``inv`` from a worker's answer for it (``{"receipt": host keys, "blocks": [...]}``).

    The blocks under a believed new root are stored once the receipt checks; a refused answer stores nothing.
    A store that cannot take them (a full disk) makes it a ``host-error`` receipt, never an exception.
    """
    host = answer.get("receipt")
    if not isinstance(host, Mapping):
        host = {}
    staged = Staged()
    try:
        problem = _problem(store, host, answer.get("blocks"), staged)
        if problem is None:
            try:
                built = receipt(inv.session, inv.command, host)
            except ModelError as exc:
                problem = f"the worker's receipt does not check: {exc}"
            else:
                root = built.get("kuro/fs-root-after")
                if root is not None:
                    try:
                        problem = accept_root(store, root, staged)  # checked above: this stores what it reaches
                    except (KuroFsError, OSError) as exc:  # a full or read-only disk: the run happened all the same
                        return host_error(inv, f"what it wrote could not be stored here ({exc}); it is not kept")
                if problem is None:
                    return built
    finally:
        staged.close()
    return host_error(inv, f"the batch worker's answer did not verify ({problem}); nothing it wrote was kept")


def host_error(inv: Invocation, why: str) -> dict[str, Any]:
    """A ``host-error`` receipt (70) for ``inv``: the batch machinery failed it, never the guest."""
    return receipt(
        inv.session,
        inv.command,
        {
            "exit-code": 70,
            "outcome": "host-error",
            "isolation": "wasmtime",
            "limits": inv.limits.receipt_value(),
            "error": f"host error: {why}",
        },
    )


def _signal_number(name: object) -> int:
    """The number of a signal named like ``"SIGKILL"`` (9 when the name is missing or unknown: Dask does not say)."""
    if isinstance(name, str):
        try:
            return int(signal.Signals[name])
        except KeyError:
            pass
    return int(signal.SIGKILL)


def worker_died(inv: Invocation, worker: Mapping[str, Any], finished_at: int) -> dict[str, Any]:
    """The receipt of an invocation whose worker left the cluster before its receipt reached the driver.

    The exit code is 128 + the signal that ended the worker when the backend knows it (the local
    pool does), else 137 (as ``SIGKILL``: Dask does not say).
    """
    where = worker.get("address") or f"process {worker.get('pid', '?')}"
    code = 128 + _signal_number(worker.get("signal"))
    return receipt(
        inv.session,
        inv.command,
        {
            "exit-code": code,
            "outcome": "worker-died",
            "isolation": "wasmtime",
            "limits": inv.limits.receipt_value(),
            "finished-at": finished_at,
            "worker": dict(worker),
            "error": f"the worker {where} died while this invocation was in its hands: it may or may not have "
            "run, and its receipt never came back; it is not run again (use a new op id to run it again)",
        },
    )
