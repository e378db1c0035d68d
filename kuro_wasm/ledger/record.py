"""What a ledger row may keep of a receipt: its *stored form*.

## The one decision
The stored form of a receipt is what may outlive the run: ``kuro/stdout``
and ``kuro/stderr`` leave for the block store (their raw CIDs stay, beside the
byte counts) and are replaced by redacted previews (``kuro/stdout-preview``,
first 24,000 characters, with ``kuro/stdout-preview-truncated?``; the
caller's ``conceal`` fragments — the run's stdin lines — are hidden in them
too); every other string is redacted too and ``kuro/redactions`` counts what
was replaced; any other bytes become ``{"kuro/bytes-cid", "kuro/bytes-length"}``;
``kuro/stdin`` and environment keys are dropped. The host's full receipt is
stored as one dag-cbor block and named in ``kuro/receipt-cid``. The result is
JSON-encodable.

## Effects
``put`` on the injected block store, nothing else. A block store that refuses a
put does not stop the record: the CID is still named and ``kuro/store-errors``
says which bytes are missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.dagcbor import encode
from kuro_fs.errors import KuroFsError
from kuro_wasm.errors import ModelError
from kuro_wasm.model.operation import plain
from kuro_wasm.model.redact import PREVIEW_CHARS, conceal_fragments, preview, redact

__all__ = ["stored_form"]

_NOT_STORED: Final = frozenset({"kuro/stdin", "kuro/env", "kuro/environment"})


def _put(store: BlockStore, data: bytes, errors: list[str]) -> str:
    """Put ``data`` in the store; on failure still name it (by its raw CID) and note the error."""
    try:
        return store.put(data)
    except KuroFsError as exc:
        errors.append(f"{raw_cid(data)}: {exc}")
        return raw_cid(data)


def _jsonplain(value: Any, store: BlockStore, errors: list[str]) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"kuro/bytes-cid": _put(store, data, errors), "kuro/bytes-length": len(data)}
    if isinstance(value, Mapping):
        return {str(k): _jsonplain(v, store, errors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonplain(v, store, errors) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
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


def stored_form(
    op_id: str, digest: str, result: Mapping[str, Any], store: BlockStore, *, conceal: Iterable[str] = ()
) -> dict[str, Any]:
    """The stored form of ``result`` (a receipt or denial) for operation ``op_id`` (see the module docstring).

    Puts the output bytes and the full receipt (dag-cbor) in ``store``; returns a
    JSON-encodable dict with ``kuro/status`` ``done``, ``kuro/op-id``,
    ``kuro/argument-digest``, ``kuro/receipt-cid`` and ``kuro/redactions`` added.
    ``conceal``: texts (stdin, secret values) whose lines must not appear in the
    previews (:func:`kuro_wasm.model.redact.conceal_fragments`); hiding them is counted.
    """
    hidden = conceal_fragments(conceal)
    full = {k: v for k, v in result.items() if k not in _NOT_STORED}
    try:
        full_cid: str | None = store.put(encode(plain(full, "receipt")), "dag-cbor")
    except (KuroFsError, ModelError):
        full_cid = None
    out: dict[str, Any] = {}
    errors: list[str] = []
    redactions = 0
    for key, value in full.items():
        name = key[5:] if key.startswith("kuro/") else None
        if name in ("stdout", "stderr") and isinstance(value, (bytes, bytearray, memoryview, str)):
            data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
            cid = _put(store, data, errors)
            out.setdefault(f"kuro/{name}-cid", cid)
            out.setdefault(f"kuro/{name}-bytes", len(data))
            shown = preview(data.decode("utf-8", "replace"), PREVIEW_CHARS, hidden)
            out[f"kuro/{name}-preview"] = shown.text
            out[f"kuro/{name}-preview-truncated?"] = shown.truncated
            redactions += shown.redactions
        else:
            clean, n = _redact_strings(_jsonplain(value, store, errors))
            out[key] = clean
            redactions += n
    out.update(
        {
            "kuro/status": "done",
            "kuro/op-id": op_id,
            "kuro/argument-digest": digest,
            "kuro/receipt-cid": full_cid,
            "kuro/redactions": redactions,
        }
    )
    if errors:
        out["kuro/store-errors"] = errors  # the named bytes are NOT in the block store
    return out
