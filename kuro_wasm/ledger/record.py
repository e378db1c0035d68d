"""What may outlive a run: a receipt's *persisted form*, and where raw output may (and may not) go.

## The one decision
A receipt that is persisted — a ledger row, its journal entry, a receipt block
the CLI stores so ``kuro receipt show`` finds it later — never carries the
guest's raw output, and by default no raw output is written anywhere: a secret
a guest prints must not end up on disk in clear because a run was recorded.
The persisted form replaces ``kuro/stdout`` and ``kuro/stderr`` by their raw
CIDs (computed, not stored), byte counts and a redacted, bounded preview
(``kuro/stdout-preview``, first 24,000 characters, with
``kuro/stdout-preview-truncated?``; known secret shapes, the run's stdin lines
and the values of secret-named environment variables are hidden, and
``kuro/redactions`` counts what was hidden); every other string is redacted
too; any other bytes become ``{"kuro/bytes-cid", "kuro/bytes-length"}``;
``kuro/stdin`` and environment keys are dropped. That form is stored as one
dag-cbor block (``kuro/receipt-cid`` names it).

Only when the caller asks (``keep_output=True``, ``kuro run --keep-output``)
are the raw output blocks and the host's full receipt kept — and then in a
**private output store** (``<home>/output``), never in the shared block store
that holds (and publishes) kuro.fs trees; ``kuro/output-kept`` is then True and
``kuro/receipt-cid`` names the full receipt there — True only if every one of those
puts succeeded (else False, and ``kuro/store-errors`` says what is missing). The receipt returned in
memory by a run still carries its full output; only what is persisted is bound
by this rule.

## Effects
``put`` on the injected block stores, nothing else. A store that refuses a put
does not stop the record: the CID is still named (``kuro/receipt-cid`` is null
when the receipt block itself could not be put) and ``kuro/store-errors`` says
which bytes are missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.dagcbor import encode, js_number
from kuro_fs.errors import KuroFsError
from kuro_wasm.errors import ModelError
from kuro_wasm.model.operation import plain
from kuro_wasm.model.redact import PREVIEW_CHARS, conceal_fragments, preview, redact

__all__ = ["persisted_receipt", "stored_form"]

_NOT_STORED: Final = frozenset({"kuro/stdin", "kuro/env", "kuro/environment"})


class _Blocks:
    """Where raw bytes go: nowhere (just named by CID) unless a private output store is given."""

    def __init__(self, output_store: BlockStore | None) -> None:
        self.output_store = output_store
        self.errors: list[str] = []

    def name(self, data: bytes) -> str:
        if self.output_store is None:
            return raw_cid(data)
        try:
            return self.output_store.put(data)
        except KuroFsError as exc:
            self.errors.append(f"{raw_cid(data)}: {exc}")
            return raw_cid(data)


def _jsonplain(value: Any, blocks: _Blocks) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"kuro/bytes-cid": blocks.name(data), "kuro/bytes-length": len(data)}
    if isinstance(value, Mapping):
        return {str(k): _jsonplain(v, blocks) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonplain(v, blocks) for v in value]
    if isinstance(value, float):
        return js_number(value)
    return value


def _redact_strings(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        total, out = 0, {}
        for k, v in value.items():
            out[k], n = _redact_strings(v)
            total += n
        return out, total
    if isinstance(value, list):
        items = [_redact_strings(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def _redacted(result: Mapping[str, Any], blocks: _Blocks, hidden: Any) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    redactions = 0
    for key, value in result.items():
        if key in _NOT_STORED:
            continue
        name = key[5:] if key.startswith("kuro/") else None
        if name in ("stdout", "stderr") and isinstance(value, (bytes, bytearray, memoryview, str)):
            data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
            out.setdefault(f"kuro/{name}-cid", blocks.name(data))
            out.setdefault(f"kuro/{name}-bytes", len(data))
            shown = preview(data.decode("utf-8", "replace"), PREVIEW_CHARS, hidden)
            out[f"kuro/{name}-preview"] = shown.text
            out[f"kuro/{name}-preview-truncated?"] = shown.truncated
            redactions += shown.redactions
        else:
            clean, n = _redact_strings(_jsonplain(value, blocks))
            out[key] = clean
            redactions += n
    return out, redactions


def _put_block(store: BlockStore, value: Mapping[str, Any], errors: list[str]) -> str | None:
    try:
        return store.put(encode(plain(dict(value), "receipt")), "dag-cbor")
    except (KuroFsError, ModelError) as exc:
        errors.append(f"the receipt block: {exc}")
        return None


def persisted_receipt(
    result: Mapping[str, Any],
    store: BlockStore,
    *,
    conceal: Iterable[str] = (),
    output_store: BlockStore | None = None,
) -> dict[str, Any]:
    """The persisted form of ``result`` (a receipt or denial), stored as a block; returns it with its CID.

    The returned dict is JSON-encodable and has ``kuro/receipt-cid`` and
    ``kuro/redactions`` added (see the module docstring). With ``output_store``
    the raw output blocks and the full receipt go there (``kuro/output-kept``
    True when all of them were stored, ``kuro/receipt-cid`` names the full receipt); without it no raw byte
    is written and the redacted form itself is stored in ``store``.
    ``conceal``: texts (stdin, secret values) whose lines must not appear in the
    previews (:func:`kuro_wasm.model.redact.conceal_fragments`); hiding them is counted.
    """
    blocks = _Blocks(output_store)
    out, redactions = _redacted(result, blocks, conceal_fragments(conceal))
    if output_store is not None:
        full = {k: v for k, v in result.items() if k not in _NOT_STORED}
        out["kuro/receipt-cid"] = _put_block(output_store, full, blocks.errors)
        # kept means kept: every raw byte and the full receipt are in the output store
        out["kuro/output-kept"] = not blocks.errors
    else:
        out["kuro/receipt-cid"] = _put_block(store, out, blocks.errors)
    out["kuro/redactions"] = redactions
    if blocks.errors:
        out["kuro/store-errors"] = blocks.errors  # the named bytes (or the receipt block) are NOT stored
    return out


def stored_form(
    op_id: str,
    digest: str,
    result: Mapping[str, Any],
    store: BlockStore,
    *,
    conceal: Iterable[str] = (),
    output_store: BlockStore | None = None,
) -> dict[str, Any]:
    """What a ledger row keeps for operation ``op_id``: :func:`persisted_receipt` plus the operation's facts.

    Adds ``kuro/status`` ``done``, ``kuro/op-id`` and ``kuro/argument-digest``.
    """
    out = persisted_receipt(result, store, conceal=conceal, output_store=output_store)
    out.update({"kuro/status": "done", "kuro/op-id": op_id, "kuro/argument-digest": digest})
    return out
