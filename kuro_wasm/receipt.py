"""The receipt: the closed, namespaced record of one guest run.

## The one decision
A receipt says only what :data:`KEYS` declares. Every key is ``kuro/…``; the
host's result keys are namespaced on the way in (``"stdout"`` and
``"kuro/stdout"`` both become ``kuro/stdout``) and **anything undeclared is
dropped**, so no host can widen the shape another host will not produce.
Session- and command-derived keys cannot be overridden by the host.
``kuro/isolation`` is always present (default ``"none"``): a receipt that
omitted it would be read as though the run had been isolated.
``kuro/outcome`` is always present too, and must agree with ``kuro/exit-code``
through :data:`OUTCOMES`.

Values are plain dag-cbor/JSON data. ``kuro/stdout``/``kuro/stderr`` are
**bytes** (a guest may write invalid UTF-8; decoding would lie about what it
wrote), so JSON goes through :func:`to_json`/:func:`from_json`, which write
bytes the DAG-JSON way (``{"/": {"bytes": "<base64>"}}``). Tuples become lists,
integral floats become ints (one value, one CID across Python and JavaScript).

## Pure
No clock: ``started-at``/``finished-at``/``duration-ms`` are ints from the host.

## Not done here
No signing, no storage (the ledger stores receipts by :func:`receipt_cid`).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_fs.cid import parse as _parse_cid
from kuro_fs.dagcbor import cid_of
from kuro_fs.errors import InvalidCID
from kuro_wasm.errors import ModelError
from kuro_wasm.model import Session, is_guest_spec

__all__ = [
    "HOST_KEYS",
    "KEYS",
    "OUTCOMES",
    "Key",
    "exit_code_for",
    "from_json",
    "namespace",
    "receipt",
    "receipt_cid",
    "to_json",
]


@dataclass(frozen=True, slots=True)
class Key:
    """One declared receipt key: value kind, whether the host may supply it, meaning."""

    kind: str  # str | int | count | bool | bytes | cid | cids | strs | data
    host: bool
    doc: str


#: Every key a receipt may carry (without the ``kuro/`` prefix).
KEYS: Final[Mapping[str, Key]] = {
    "type": Key("str", False, 'always "kuro/receipt"'),
    "session-id": Key("str", False, "the session that ran the command"),
    "mode": Key("str", False, "the session's mode (a grant scope, not an isolation level)"),
    "fs-root-cid": Key("cid", False, "the kuro.fs root the guest saw"),
    "cwd": Key("str", False, "the session's declared cwd"),
    "command": Key("data", False, "the guest spec exactly as given"),
    "guest": Key("cid", False, "CID of the guest module"),
    "export": Key("str", False, "the export that was called"),
    "args": Key("data", False, "the export's arguments"),
    "effective-capabilities": Key("strs", False, "the session's grant, sorted"),
    "isolation": Key("str", True, 'what isolated the run; "none" unless the host says otherwise'),
    "exit-code": Key("int", True, "the exit code (see OUTCOMES)"),
    "outcome": Key("str", True, "how the run ended (see OUTCOMES)"),
    "stdout": Key("bytes", True, "kept stdout bytes"),
    "stderr": Key("bytes", True, "kept stderr bytes"),
    "stdout-cid": Key("cid", True, "raw CID of the kept stdout bytes"),
    "stderr-cid": Key("cid", True, "raw CID of the kept stderr bytes"),
    "stdout-bytes": Key("count", True, "stdout bytes the stream kept"),
    "stderr-bytes": Key("count", True, "stderr bytes the stream kept"),
    "dropped-bytes": Key("count", True, "bytes dropped by the output cap (only when truncated)"),
    "truncated?": Key("bool", True, "the output cap dropped something (only when true)"),
    "timed-out?": Key("bool", True, "the deadline stopped the guest"),
    "duration-ms": Key("count", True, "finished-at minus started-at"),
    "started-at": Key("int", True, "host clock, ms since the epoch"),
    "finished-at": Key("int", True, "host clock, ms since the epoch"),
    "error": Key("str", True, "what went wrong, in words"),
    "trap": Key("data", True, "the wasm trap (code, message)"),
    "fs-root-after": Key("cid", True, "the kuro.fs root after the guest's writes"),
    "reads": Key("cids", True, "CIDs the guest read"),
    "denials": Key("data", True, "import calls that were refused"),
    "fuel-consumed": Key("count", True, "wasmtime fuel the guest used"),
    "limits": Key("data", True, "the limits actually applied"),
    "engine": Key("data", True, "the engine that ran the guest (name, version, config)"),
}
#: The keys a host result may supply.
HOST_KEYS: Final = frozenset(k for k, spec in KEYS.items() if spec.host)

#: outcome → exit code. ``exit`` is any nonzero guest exit code (``None`` here);
#: ``abandoned`` defaults to 129 but its host may state the real code.
OUTCOMES: Final[Mapping[str, int | None]] = {
    "ok": 0,
    "exit": None,
    "trap": 134,
    "timeout": 124,
    "fuel-exhausted": 124,
    "output-capped": 125,
    "cancelled": 130,
    "abandoned": 129,
    "load-error": 126,
    "guest-not-found": 127,
}
_OVERRIDABLE: Final = frozenset({"abandoned"})


def exit_code_for(outcome: str) -> int:
    """The exit code an outcome implies.

    Raises ModelError: for an unknown outcome or ``exit`` (which has no fixed code).
    """
    code = OUTCOMES.get(outcome) if isinstance(outcome, str) else None
    if code is None:
        raise ModelError(f"outcome {outcome!r} has no fixed exit code", reason="invalid-outcome")
    return code


# ---- values


def _plain(value: Any, where: str) -> Any:
    """Normalise to dag-cbor/JSON plain data or raise ModelError naming ``where``."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, int):
        if not -(2**64) <= value < 2**64:
            raise ModelError(f"{where}: integer {value} outside dag-cbor range", reason="unencodable-value")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ModelError(f"{where}: {value!r} is not encodable", reason="unencodable-value")
        # Integral floats become ints (dag-cbor parity); the int range check still applies.
        return _plain(int(value), where) if value.is_integer() else value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ModelError(f"{where}: map keys must be strings, got {k!r}", reason="unencodable-value")
            out[k] = _plain(v, f"{where}/{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}/{i}") for i, v in enumerate(value)]
    raise ModelError(f"{where}: {type(value).__name__} is not plain data", reason="unencodable-value")


def _cid(value: object, where: str) -> str:
    try:
        _parse_cid(value)
    except InvalidCID as exc:
        raise ModelError(f"{where}: {exc}", reason="invalid-receipt-value") from exc
    assert isinstance(value, str)
    return value


def _typed(name: str, value: Any) -> Any:
    kind, where = KEYS[name].kind, f"kuro/{name}"
    if value is None:
        return None
    if kind == "str" and not isinstance(value, str):
        raise ModelError(f"{where} must be a string, got {type(value).__name__}", reason="invalid-receipt-value")
    if kind in ("int", "count"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or (kind == "count" and value < 0):
            raise ModelError(
                f"{where} must be a {'non-negative ' * (kind == 'count')}int, got {value!r}",
                reason="exit-code-not-int" if name == "exit-code" else "invalid-receipt-value",
            )
    if kind == "bool" and not isinstance(value, bool):
        raise ModelError(f"{where} must be a bool, got {value!r}", reason="invalid-receipt-value")
    if kind == "bytes":
        if isinstance(value, str):
            value = value.encode("utf-8", "surrogatepass")
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ModelError(f"{where} must be bytes, got {type(value).__name__}", reason="invalid-receipt-value")
    if kind == "cid":
        return _cid(value, where)
    if kind == "cids":
        if not isinstance(value, (list, tuple)):
            raise ModelError(f"{where} must be a list of CIDs", reason="invalid-receipt-value")
        return [_cid(v, f"{where}/{i}") for i, v in enumerate(value)]
    if kind == "strs" and not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        raise ModelError(f"{where} must be a list of strings", reason="invalid-receipt-value")
    return _plain(value, where)


def namespace(result: Mapping[str, Any]) -> dict[str, Any]:
    """The host-settable part of ``result``, keys as ``kuro/…``; everything else dropped.

    ``"stdout"`` and ``"kuro/stdout"`` are the same key (the namespaced one wins
    if both are given). Keys of other namespaces and undeclared names are dropped.
    """
    out: dict[str, Any] = {}
    for key in sorted((k for k in result if isinstance(k, str)), key=lambda k: k.startswith("kuro/")):
        name = key[5:] if key.startswith("kuro/") else key
        if name in HOST_KEYS:
            out["kuro/" + name] = result[key]
    return out


# ---- receipts


def receipt(sess: Session, command: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """The closed receipt of running ``command`` in ``sess`` with host ``result``.

    ``result`` must give ``exit-code`` (an int) and may give ``outcome``; a
    missing outcome is ``ok`` for 0 and ``exit`` otherwise. A ``None`` value is
    dropped (the key is absent, never null), and ``isolation`` defaults to
    ``"none"``.

    Raises ModelError: ``exit-code-not-int``; ``invalid-outcome`` (unknown, or
    disagreeing with the exit code per :data:`OUTCOMES`); ``invalid-receipt-value``
    or ``unencodable-value`` for a value of the wrong kind; ``invalid-guest-spec``
    if ``command`` is not a guest spec; ``invalid-session``.
    """
    if not isinstance(sess, Session):
        raise ModelError(f"receipt needs a Session, got {type(sess).__name__}", reason="invalid-session")
    if not is_guest_spec(command):
        raise ModelError("a receipt is for a guest spec; a refused command gets a denial", reason="invalid-guest-spec")
    if not isinstance(result, Mapping):
        raise ModelError(f"result must be a mapping, got {type(result).__name__}", reason="invalid-receipt-value")
    host = {k: v for k, v in namespace(result).items() if v is not None}
    code = host.get("kuro/exit-code")
    if isinstance(code, bool) or not isinstance(code, int):
        raise ModelError(f"receipt result requires an int exit-code, got {code!r}", reason="exit-code-not-int")
    outcome = host.get("kuro/outcome", "ok" if code == 0 else "exit")
    _check_outcome(outcome, code)
    out: dict[str, Any] = {
        "kuro/type": "kuro/receipt",
        "kuro/session-id": sess.id,
        "kuro/mode": sess.mode,
        "kuro/fs-root-cid": sess.fs_root_cid,
        "kuro/cwd": sess.cwd,
        "kuro/command": _plain(command, "kuro/command"),
        "kuro/guest": command["kuro/guest"],
        "kuro/export": command["kuro/export"],
        "kuro/args": list(command["kuro/args"]),
        "kuro/effective-capabilities": sess.effective_capabilities,
        "kuro/isolation": "none",
    }
    for key, value in host.items():
        out[key] = _typed(key[5:], value)
    out["kuro/outcome"] = outcome
    return out


def _check_outcome(outcome: object, code: int) -> None:
    if not isinstance(outcome, str) or outcome not in OUTCOMES:
        raise ModelError(f"unknown outcome {outcome!r}", reason="invalid-outcome", hint=", ".join(OUTCOMES))
    fixed = OUTCOMES[outcome]
    if outcome == "exit" and code == 0:
        raise ModelError("outcome exit needs a nonzero exit code (0 is ok)", reason="invalid-outcome")
    if fixed is not None and code != fixed and outcome not in _OVERRIDABLE:
        raise ModelError(f"outcome {outcome} means exit code {fixed}, got {code}", reason="invalid-outcome")


def receipt_cid(r: Mapping[str, Any]) -> str:
    """The dag-cbor CID (``bafyrei…``) of a receipt; equal receipts, equal CIDs.

    Raises DagCborError: if ``r`` holds something dag-cbor cannot encode.
    """
    return cid_of(dict(r))


# ---- JSON


def _to_json_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"/": {"bytes": base64.b64encode(bytes(value)).decode("ascii").rstrip("=")}}
    if isinstance(value, Mapping):
        return {k: _to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json_value(v) for v in value]
    return value


def _from_json_value(value: Any) -> Any:
    if isinstance(value, dict):
        inner = value.get("/")
        if len(value) == 1 and isinstance(inner, dict) and set(inner) == {"bytes"} and isinstance(inner["bytes"], str):
            text = inner["bytes"]
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        return {k: _from_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json_value(v) for v in value]
    return value


def to_json(r: Mapping[str, Any]) -> str:
    """A receipt (or denial, or any plain value) as JSON text; bytes in DAG-JSON form.

    >>> to_json({"kuro/stdout": b"hi"})
    '{"kuro/stdout": {"/": {"bytes": "aGk"}}}'
    """
    return json.dumps(_to_json_value(r), sort_keys=True, ensure_ascii=False, allow_nan=False)


def from_json(text: str) -> Any:
    """Inverse of :func:`to_json`: ``{"/": {"bytes": …}}`` comes back as bytes.

    Raises ValueError: if ``text`` is not JSON or holds malformed base64.
    """
    return _from_json_value(json.loads(text))
