"""An operation's identity and record: the argument digest, and what a ledger row may keep of a receipt.

## The one decision
Two requests are "the same operation" exactly when their **argument digest**
is equal: the dag-cbor CID of the session's mode and sorted grant, the command,
the raw CID of stdin (never its bytes), the limits with defaults filled in (so
omitting a limit equals passing its default) and the fs root the guest will
see. The session id, cwd, callbacks and the module-cache ``home`` are left
out: they do not change what runs.

The **stored form** of a receipt is what may outlive the run: ``kuro/stdout``
and ``kuro/stderr`` leave for the block store (their raw CIDs stay, beside the
byte counts) and are replaced by redacted previews (``kuro/stdout-preview``,
first 24,000 characters, with ``kuro/stdout-preview-truncated?``; the
caller's ``conceal`` fragments — the run's stdin lines — are hidden in them
too); every other string is redacted too and ``kuro/redactions`` counts what
was replaced; any
other bytes become ``{"kuro/bytes-cid", "kuro/bytes-length"}``; ``kuro/stdin``
and environment keys are dropped. The host's full receipt is stored as one
dag-cbor block and named in ``kuro/receipt-cid``. The result is JSON-encodable.

## Pure
Values in, values out; the only effect is ``put`` on the injected block store.

## Not done here
No SQLite, no journal, no owners: see :mod:`kuro_wasm.ledger`. A block store
that refuses a put does not stop the record: the CID is still named and
``kuro/store-errors`` says which bytes are missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import parse_cid, raw_cid
from kuro_fs.dagcbor import cid_of, encode
from kuro_fs.errors import InvalidCID, KuroFsError
from kuro_wasm.errors import ModelError
from kuro_wasm.model import Session
from kuro_wasm.redact import PREVIEW_CHARS, conceal_fragments, preview, redact

__all__ = ["DEFAULT_LIMITS", "RUN_OPTIONS", "argument_digest", "run_limits", "stdin_text", "stored_form"]

#: The limits a run gets when the caller does not say (the host's defaults); part of the digest.
DEFAULT_LIMITS: Final[Mapping[str, int | None]] = {
    "timeout_ms": 120_000,
    "max_output_bytes": 1_048_576,
    "max_memory_bytes": None,
    "fuel": None,
}
#: The smallest value each limit takes (the host's rule); ``None`` is allowed where the default is ``None``.
_LIMIT_MINIMUM: Final[Mapping[str, int]] = {"timeout_ms": 1, "max_output_bytes": 0, "max_memory_bytes": 0, "fuel": 0}
#: Every keyword :meth:`Ledger.run` accepts besides the limits (passed on to the starter).
RUN_OPTIONS: Final = frozenset({"fs", "stdin", "home", "on_chunk", "on_exit", *DEFAULT_LIMITS})
_NOT_STORED: Final = frozenset({"kuro/stdin", "kuro/env", "kuro/environment"})

# ---- argument digest


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ModelError(f"{where}: {value!r} cannot be digested", reason="unencodable-value")
        return int(value) if value.is_integer() else value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ModelError(f"{where}: map keys must be strings", reason="unencodable-value")
        return {k: _plain(v, f"{where}/{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}/{i}") for i, v in enumerate(value)]
    raise ModelError(f"{where}: {type(value).__name__} cannot be digested", reason="unencodable-value")


def _fs_root(session: Session, fs: object) -> str:
    if fs is None:
        return session.fs_root_cid
    root = fs if isinstance(fs, str) else getattr(fs, "root", None)
    if not isinstance(root, str):
        raise ModelError(f"fs must be a kuro_fs.Fs or a root CID string, got {type(fs).__name__}", reason="invalid-fs")
    try:
        parse_cid(root)
    except InvalidCID as exc:
        raise ModelError(f"fs root {root!r} is not a CID: {exc}", reason="invalid-fs-root") from exc
    return root


def _stdin_cid(stdin: object) -> str | None:
    if stdin is None:
        return None
    if isinstance(stdin, str):
        stdin = stdin.encode()
    if not isinstance(stdin, (bytes, bytearray, memoryview)):
        raise ModelError(f"a ledgered run takes stdin as bytes, got {type(stdin).__name__}", reason="invalid-stdin")
    return raw_cid(bytes(stdin))


def run_limits(options: Mapping[str, Any]) -> dict[str, Any]:
    """The limits a run gets: each of :data:`DEFAULT_LIMITS`, from ``options`` or its default.

    Checked here, by the host's rule, so a bad limit is refused before a ledger
    records anything (the host would refuse it only after the op id was claimed).

    Raises ModelError: ``invalid-limit`` for a value that is not an int (bools
    are not) from the limit's minimum to 2**64-1, or ``None`` where the default is not.
    """
    limits: dict[str, Any] = {}
    for name, default in DEFAULT_LIMITS.items():
        value = options.get(name, default)
        minimum = _LIMIT_MINIMUM[name]
        if value is None and default is None:
            limits[name] = None
        elif isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**64:
            raise ModelError(f"{name} must be an int in {minimum}..2**64-1, got {value!r}", reason="invalid-limit")
        else:
            limits[name] = value
    return limits


def stdin_text(stdin: object) -> str:
    """``stdin`` (bytes or str, as :meth:`Ledger.run` takes it) as text, for concealing; ``""`` for ``None``."""
    if isinstance(stdin, str):
        return stdin
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        return bytes(stdin).decode("utf-8", "replace")
    return ""


def argument_digest(session: Session, command: object, **run_options: Any) -> str:
    """The dag-cbor CID naming *what* a run is asked to do.

    Covers the session's mode and sorted grant, the command, the raw CID of stdin
    (never its bytes), the limits (defaults filled in, so omitting a limit equals
    passing its default) and the fs root (``fs`` if given, else the session's).
    Not covered: the session id, cwd, callbacks and ``home``.

    Raises ModelError: for a non-Session, an unknown option, a bad limit
    (``invalid-limit``), an fs root that is not a CID, or a value that cannot be digested.
    """
    if not isinstance(session, Session):
        raise ModelError(f"a ledgered run needs a Session, got {type(session).__name__}", reason="invalid-session")
    unknown = sorted(set(run_options) - RUN_OPTIONS)
    if unknown:
        raise ModelError(
            f"unknown run option(s) {', '.join(unknown)}",
            reason="unknown-run-option",
            hint=f"one of {', '.join(sorted(RUN_OPTIONS))}, store",
        )
    return cid_of(
        {
            "kuro.ledger/version": 1,
            "mode": session.mode,
            "grant": sorted(session.grant),
            "command": _plain(command, "command"),
            "stdin": _stdin_cid(run_options.get("stdin")),
            "limits": {k.replace("_", "-"): v for k, v in run_limits(run_options).items()},
            "fs-root": _fs_root(session, run_options.get("fs")),
        }
    )


# ---- stored form


def _put(store: BlockStore, data: bytes, errors: list[str]) -> str:
    """Put ``data`` in the store; on failure still name it (by its raw CID) and note the error."""
    try:
        return store.put(data)
    except KuroFsError as exc:
        errors.append(f"{raw_cid(data)}: {exc}")
        return raw_cid(data)


def _json_plain(value: Any, store: BlockStore, errors: list[str]) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"kuro/bytes-cid": _put(store, data, errors), "kuro/bytes-length": len(data)}
    if isinstance(value, Mapping):
        return {str(k): _json_plain(v, store, errors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_plain(v, store, errors) for v in value]
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
    previews (:func:`kuro_wasm.redact.conceal_fragments`); hiding them is counted.
    """
    hidden = conceal_fragments(conceal)
    full = {k: v for k, v in result.items() if k not in _NOT_STORED}
    try:
        full_cid: str | None = store.put(encode(_plain(full, "receipt")), "dag-cbor")
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
            clean, n = _redact_strings(_json_plain(value, store, errors))
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
