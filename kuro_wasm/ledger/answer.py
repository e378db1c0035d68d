"""Ledger answers: what the ledger says about an operation id, as plain values.

## The one decision
Every answer is one of four ``kuro/status`` values — ``done`` (a receipt),
``running``, ``unknown`` (with ``kuro/unknown-reason`` and a hint that it is
not success) and ``not-found`` — and every answer but ``not-found`` carries
``kuro/replayed`` and ``kuro/persistence``, so a caller never has to guess
whether it got a fresh run, a stored one, or a receipt that may not be durable.
A ``done`` answer is only built from a stored receipt whose SHA-256 matches the
one recorded beside it: a damaged row raises :class:`LedgerCorrupt` instead of
being handed out as a receipt.

## Pure
Values in, values out (``hashlib`` and ``json`` only). :class:`Row` is a row of
the ``operations`` table as a frozen value; reading and writing rows is
:mod:`kuro_wasm.ledger.db`.

Which stored answer applies — a receipt still in the journal, a ``done`` row, a
row's status — is :func:`answer_for`, the one place both readers ask
(:class:`kuro_wasm.ledger.ledger.Ledger` and :func:`kuro_wasm.ledger.lookup.lookup`),
so they cannot answer the same ledger differently.

## Not done here
Claims, owner liveness (``settle``) and reading the journal are
:class:`kuro_wasm.ledger.ledger.Ledger`'s and :mod:`kuro_wasm.ledger.lookup`'s; what a
receipt's stored form holds is :func:`kuro_wasm.ledger.record.stored_form`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_wasm.errors import LedgerCorrupt
from kuro_wasm.model.operation import check_op_id

__all__ = [
    "HINT_UNKNOWN",
    "Row",
    "answer",
    "answer_for",
    "check_op_id",
    "not_found",
    "receipt_of",
    "running_value",
    "status_value",
    "stored_text",
]

HINT_UNKNOWN: Final = "unknown is not success: run again under a new operation id"


@dataclass(frozen=True)
class Row:
    """One row of the ``operations`` table (status ``started``, ``done`` or ``unknown``)."""

    op_id: str
    digest: str
    status: str
    owner_pid: int
    owner_token: str
    started_at: int
    finished_at: int | None
    reason: str | None
    receipt: str | None
    receipt_sha256: str | None


def answer(value: Mapping[str, Any], *, replayed: bool, persistence: str) -> dict[str, Any]:
    """``value`` with ``kuro/replayed`` and ``kuro/persistence`` set.

    >>> answer({"kuro/status": "done"}, replayed=False, persistence="saved")
    {'kuro/status': 'done', 'kuro/replayed': False, 'kuro/persistence': 'saved'}
    """
    return {**value, "kuro/replayed": replayed, "kuro/persistence": persistence}


def not_found(op_id: str) -> dict[str, Any]:
    """The answer for an operation id the ledger has never seen."""
    return {"kuro/status": "not-found", "kuro/op-id": op_id}


def status_value(row: Row) -> dict[str, Any]:
    """The answer for a row that holds no receipt: ``unknown`` (with its reason and hint) or ``running``."""
    base = {
        "kuro/op-id": row.op_id,
        "kuro/argument-digest": row.digest,
        "kuro/started-at": row.started_at,
        "kuro/owner-pid": row.owner_pid,
    }
    if row.status == "unknown":
        return answer(
            {"kuro/status": "unknown", **base, "kuro/unknown-reason": row.reason, "kuro/hint": HINT_UNKNOWN},
            replayed=True,
            persistence="saved",
        )
    return answer({"kuro/status": "running", **base}, replayed=True, persistence="saved")


def _stream_facts(handle: object) -> dict[str, Any]:
    stream = getattr(handle, "stream", None)
    facts: dict[str, Any] = {}
    for attr, key in (
        ("state", "stream-state"),
        ("seq", "seq"),
        ("stdout_bytes", "stdout-bytes"),
        ("stderr_bytes", "stderr-bytes"),
        ("dropped_bytes", "dropped-bytes"),
    ):
        value = getattr(stream, attr, None)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            facts["kuro/" + key] = value
    return facts


def running_value(op_id: str, digest: str, started_at: int, owner_pid: int, handle: object) -> dict[str, Any]:
    """The answer for a run of this process still going: its status and its stream's counters so far.

    The counters are read from ``handle.stream`` when it has them (int or str
    values only); a handle without a stream adds none.
    """
    value = {
        "kuro/status": "running",
        "kuro/op-id": op_id,
        "kuro/argument-digest": digest,
        "kuro/started-at": started_at,
        "kuro/owner-pid": owner_pid,
        **_stream_facts(handle),
    }
    return answer(value, replayed=True, persistence="saved")


def stored_text(receipt: Mapping[str, Any]) -> tuple[str, str]:
    """``(text, sha256 hex)`` a receipt is stored as: sorted-key JSON (no NaN) and its checksum.

    Raises ValueError: the receipt holds a NaN or infinity.
    """
    text = json.dumps(receipt, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return text, hashlib.sha256(text.encode()).hexdigest()


def receipt_of(row: Row) -> dict[str, Any]:
    """The receipt stored in a ``done`` row.

    Raises LedgerCorrupt: no receipt or checksum, the checksum does not match,
    or the text is not a JSON map.
    """
    text, sha = row.receipt, row.receipt_sha256
    if text is None or sha is None or hashlib.sha256(text.encode()).hexdigest() != sha:
        raise LedgerCorrupt(f"ledger row {row.op_id!r} is done but its receipt does not match its checksum")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise LedgerCorrupt(f"ledger row {row.op_id!r} holds a receipt that is not JSON") from exc
    if not isinstance(value, dict):
        raise LedgerCorrupt(f"ledger row {row.op_id!r} holds a receipt that is not a map")
    return value


def answer_for(
    op_id: str, row: Row | None, pending: Mapping[str, Any] | None, settle: Callable[[Row], Row]
) -> dict[str, Any]:
    """What the ledger answers for ``op_id`` from what it stores.

    ``row``: its row (None: none, or SQLite could not be read). ``pending``: the journal's latest entry for it
    (None: none, or not read because the row is ``done``). ``settle``: a ``started`` row as it stands once
    its owner is judged (``unknown`` if gone; it may have become ``done`` meanwhile).

    A receipt still in the journal wins over a row that is not ``done`` and has its digest (or over no row);
    then a ``done`` row's receipt; then the row's status; no row is ``not-found``.

    Raises LedgerCorrupt: a ``done`` row fails its checksum.
    """
    if pending is not None and (row is None or (row.status != "done" and pending["digest"] == row.digest)):
        return answer(pending["receipt"], replayed=True, persistence="pending")
    if row is None:
        return not_found(op_id)
    if row.status == "started":
        row = settle(row)
    if row.status == "done":
        return answer(receipt_of(row), replayed=True, persistence="saved")
    return status_value(row)
