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

Two entry points, one set of rules: :func:`receipt` checks every value;
:func:`receipt_measured` (what :func:`kuro_wasm.model.stream.finish` calls once per
run) takes the stream's own measurements as given and checks the rest the same
way. The checks are table-driven (:data:`KEYS` → kind) with a fast path for the
common exact types that decides as the general rules do (tested side by side),
and CID strings already seen valid are remembered (a warm run's receipt went
from ~45 µs to ~12 µs on the 2-core dev machine).

## Pure
No clock: ``started-at``/``finished-at``/``duration-ms`` are ints from the host.
The only state is a bounded memo of CID strings known to parse.

## Not done here
No signing, no storage (the ledger stores receipts by :func:`receipt_cid`).
"""

from __future__ import annotations

import base64
import functools
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_fs.cid import parse as _parse_cid
from kuro_fs.dagcbor import cid_of, js_number
from kuro_fs.errors import InvalidCID
from kuro_wasm.errors import ModelError
from kuro_wasm.model.sessions import Session, is_guest_spec

__all__ = [
    "HOST_KEYS",
    "KEYS",
    "OUTCOMES",
    "Key",
    "checked_outcome",
    "exit_code_for",
    "from_json",
    "host_value",
    "namespace",
    "receipt",
    "receipt_cid",
    "receipt_measured",
    "receipt_trusted",
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
    "env": Key("data", False, "the spec's environment, a WASI command's (only when the spec has one)"),
    "effective-capabilities": Key("strs", False, "the session's grant, sorted, in this host's capability names"),
    "grant-aliases": Key(
        "data", False, "original kuro names the grant was given in → the host capabilities each stood for (when used)"
    ),
    "isolation": Key("str", True, 'what isolated the run; "none" unless the host says otherwise'),
    "guest-kind": Key(
        "str", True, "the guest kind that claimed and ran the guest (absent when the guest did not load)"
    ),
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
    "capped-by": Key("str", True, "which output bound dropped the first chunk: bytes or chunks (only when truncated)"),
    "timed-out?": Key("bool", True, "the deadline stopped the guest"),
    "duration-ms": Key("count", True, "finished-at minus started-at"),
    "started-at": Key("int", True, "host clock, ms since the epoch"),
    "finished-at": Key("int", True, "host clock, ms since the epoch"),
    "error": Key("str", True, "what went wrong, in words"),
    "trap": Key("data", True, "the wasm trap: kind and message"),
    "fs-root-after": Key("cid", True, "the kuro.fs root after the guest's writes"),
    "reads": Key("cids", True, "CIDs the guest read"),
    "denials": Key("data", True, "import calls that were refused"),
    "fs-grant": Key(
        "strs",
        True,
        "the fs capabilities the run's Fs value itself allows, when fewer than all: an fs call needs"
        " this and the session's grant (only then)",
    ),
    "store-faults": Key(
        "data",
        True,
        "blocks the host's store could not supply (missing, corrupt, unavailable): the guest's I/O errors"
        " for them are the host's failure, not the guest's (only when any)",
    ),
    "fuel-consumed": Key("count", True, "wasmtime fuel the guest used"),
    "limits": Key("data", True, "the limits actually applied"),
    "engine": Key("data", True, "the engine that ran the guest (name, version, config)"),
    "result": Key("data", True, "a component export's typed result as plain data (absent for run's exit code)"),
    "nondeterminism": Key("data", True, "what the guest read from outside its inputs: clock readings, random bytes"),
    "deterministic": Key("data", True, "the run's clocks were fixed and its random bytes seeded: the seed"),
    "worker": Key(
        "data",
        True,
        "the worker process that ran the guest (isolation process, or a batch worker): pid, hardening, how it died",
    ),
}
#: The keys a host result may supply.
HOST_KEYS: Final = frozenset(k for k, spec in KEYS.items() if spec.host)
#: host key (bare or ``kuro/``-prefixed) → its namespaced form; and namespaced host key → kind.
_BARE: Final[Mapping[str, str]] = {name: "kuro/" + name for name in HOST_KEYS}
_PREFIXED: Final[Mapping[str, str]] = {"kuro/" + name: "kuro/" + name for name in HOST_KEYS}
_KIND: Final[Mapping[str, str]] = {"kuro/" + name: spec.kind for name, spec in KEYS.items()}
_ALL_HOST_KEYS: Final = frozenset(_PREFIXED)

#: outcome → exit code. ``exit`` is any nonzero guest exit code (``None`` here);
#: ``abandoned`` defaults to 129 but its host may state the real code. ``host-error`` (70, as
#: ``EX_SOFTWARE``) is the host's failure, never the guest's: a bug in a host import, the host out
#: of memory while instantiating, a receipt-path exception. ``worker-died`` (the worker process
#: running the guest ended mid-run) is 128 + the signal that ended it, 137 (SIGKILL) when the host
#: states nothing else.
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
    "host-error": 70,
    "worker-died": 137,
}
_OVERRIDABLE: Final = frozenset({"abandoned", "worker-died"})


def exit_code_for(outcome: str) -> int:
    """The exit code an outcome implies.

    Raises ModelError: for an unknown outcome or ``exit`` (which has no fixed code).
    """
    code = OUTCOMES.get(outcome) if isinstance(outcome, str) else None
    if code is None:
        raise ModelError(f"outcome {outcome!r} has no fixed exit code", reason="invalid-outcome")
    return code


# ---- values


_LEAVES: Final = frozenset({str, bytes, bool, type(None)})
_INT_LO: Final = -(2**64)
_INT_HI: Final = 2**64


def _plain(value: Any, where: str) -> Any:
    """Normalise to dag-cbor/JSON plain data or raise ModelError naming ``where``.

    Exact ``str``/``bytes``/``bool``/``None``/in-range ``int`` leaves, ``dict``
    and ``list`` take a fast path that builds no ``where`` text unless it has to
    recurse; everything else (subclasses, floats, tuples, other mappings) goes
    through :func:`_plain_general`, which decides the same way for every value.
    """
    t = type(value)
    if t in _LEAVES or (t is int and _INT_LO <= value < _INT_HI):
        return value
    if t is dict:
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ModelError(f"{where}: map keys must be strings, got {k!r}", reason="unencodable-value")
            tv = type(v)
            out[k] = v if tv in _LEAVES or (tv is int and _INT_LO <= v < _INT_HI) else _plain(v, f"{where}/{k}")
        return out
    if t is list:
        return [
            v if (tv := type(v)) in _LEAVES or (tv is int and _INT_LO <= v < _INT_HI) else _plain(v, f"{where}/{i}")
            for i, v in enumerate(value)
        ]
    return _plain_general(value, where)


def _plain_general(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, int):
        if not _INT_LO <= value < _INT_HI:
            raise ModelError(f"{where}: integer {value} outside dag-cbor range", reason="unencodable-value")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ModelError(f"{where}: {value!r} is not encodable", reason="unencodable-value")
        # Whole floats JavaScript writes as ints become ints (dag-cbor parity); past 2^53 they stay floats.
        return js_number(value)
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


@functools.lru_cache(maxsize=1024)
def _is_cid(text: str) -> bool:
    """Whether ``text`` parses as a CID in kuro's profile (memoized: receipts repeat the same CIDs)."""
    try:
        _parse_cid(text)
    except InvalidCID:
        return False
    return True


def _cid(value: object, where: str) -> str:
    if type(value) is str and _is_cid(value):
        return value
    try:
        _parse_cid(value)
    except InvalidCID as exc:
        raise ModelError(f"{where}: {exc}", reason="invalid-receipt-value") from exc
    assert isinstance(value, str)
    return value


#: kind → the one exact type a value of that kind usually has (decided at once by :func:`_typed`).
_LEAF_TYPE: Final[Mapping[str, type]] = {"str": str, "int": int, "count": int, "bool": bool, "bytes": bytes}


def _typed(key: str, value: Any) -> Any:
    """``value`` checked against the kind of the namespaced ``key`` and made plain."""
    if value is None:
        return None
    kind = _KIND[key]
    t = type(value)
    if t is _LEAF_TYPE.get(kind):  # the common case, decided as _typed_general decides it
        if t is not int or (_INT_LO <= value < _INT_HI and (value >= 0 or kind == "int")):
            return value
    elif kind == "data":
        return _plain(value, key)
    return _typed_general(key, kind, value)


def _typed_general(key: str, kind: str, value: Any) -> Any:
    where, name = key, key[5:]
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


def host_value(key: str, value: Any) -> Any:
    """``value`` checked against the kind of the namespaced host key ``key`` (``"kuro/exit-code"`` …), made plain.

    The check :func:`receipt` applies to each host value, for a caller that must know before it
    assembles one (a value from another process). Raises ModelError: ``key`` is not a host key, or
    ``value`` is not of its kind.

    >>> host_value("kuro/reads", ("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",))
    ['bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku']
    """
    if not isinstance(key, str) or key not in _PREFIXED:
        raise ModelError(f"{key!r} is not a key a host may state", reason="invalid-receipt-value")
    try:
        return _typed(key, value)
    except RecursionError:
        raise _too_deep(key) from None


def _too_deep(where: str) -> ModelError:
    """A value nested past Python's recursion limit (dag-cbor stops at 256 levels anyway): refused as a value."""
    return ModelError(f"{where}: nested too deeply to be plain data", reason="unencodable-value")


def namespace(result: Mapping[str, Any]) -> dict[str, Any]:
    """The host-settable part of ``result``, keys as ``kuro/…``; everything else dropped.

    ``"stdout"`` and ``"kuro/stdout"`` are the same key (the namespaced one wins
    if both are given). Keys of other namespaces and undeclared names are dropped.
    """
    if result.keys() <= _ALL_HOST_KEYS:  # namespaced already (a worker's checked result, the pool's receipt): a copy
        return dict(result)
    out: dict[str, Any] = {}
    prefixed: list[tuple[str, Any]] = []
    bare = _BARE
    for key, value in result.items():  # bare names first, then kuro/ names (which win): insertion order kept
        named = bare.get(key)  # (a key of another type is in neither table)
        if named is not None:
            out[named] = value
        elif key in _PREFIXED:
            prefixed.append((key, value))
    if prefixed:
        out.update(prefixed)
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
    _check_run(sess, command)
    if not isinstance(result, Mapping):
        raise ModelError(f"result must be a mapping, got {type(result).__name__}", reason="invalid-receipt-value")
    try:
        return _assemble(sess, command, namespace(result), ())
    except RecursionError:
        raise _too_deep("result") from None


def receipt_measured(
    sess: Session, command: Mapping[str, Any], host: Mapping[str, Any], measured: Mapping[str, Any]
) -> dict[str, Any]:
    """:func:`receipt` of ``{**host, **measured}``, for a caller that measured some values itself.

    ``host`` is a :func:`namespace` result (the host's keys, still checked
    value by value); ``measured`` holds namespaced host keys whose values the
    caller computed itself (:func:`kuro_wasm.model.stream.finish`: kept bytes, their
    raw CIDs, byte counts), which are taken as given instead of being checked a
    second time. The shape is closed all the same: keys outside
    :data:`HOST_KEYS` are dropped from both, ``None`` values are dropped, the
    session/command checks, the exit-code/outcome rules and the defaults are
    those of :func:`receipt`, and for well-kinded ``measured`` values the
    receipt is equal to ``receipt(sess, command, {**host, **measured})``.

    Raises ModelError: as :func:`receipt` does.
    """
    _check_run(sess, command)
    if not isinstance(host, Mapping) or not isinstance(measured, Mapping):
        raise ModelError("host and measured must be mappings", reason="invalid-receipt-value")
    merged = dict(host)
    merged.update(measured)
    try:
        return _assemble(sess, command, merged, measured)
    except RecursionError:
        raise _too_deep("host") from None


def receipt_trusted(sess: Session, command: Mapping[str, Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`receipt_measured` with every value of ``host`` (namespaced keys) taken as measured.

    For the host's own run (see :func:`kuro_wasm.model.stream.finish_trusted`): the session
    and command already passed the gate, the values are of their keys' kinds. The closed key
    set, ``None`` dropping, the defaults and the exit-code/outcome rules still apply.

    Raises ModelError: a bad exit code or outcome.
    """
    return _assemble(sess, command, host, _ALL_HOST_KEYS)


def receipt_closed(sess: Session, command: Mapping[str, Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`receipt_trusted` of a ``host`` whose every key is a namespaced host key already (a
    :func:`namespace` result, updated with host keys only): the same receipt, without asking each
    key again whether it belongs (:func:`kuro_wasm.model.stream.finish_trusted`'s path).

    Raises ModelError: a bad exit code or outcome.
    """
    return _assemble(sess, command, host, _ALL_HOST_KEYS, closed=True)


def checked_outcome(namespaced: Mapping[str, Any]) -> str:
    """The outcome a receipt of the namespaced host keys ``namespaced`` states: its ``kuro/outcome``, or when
    absent (or None) ``ok``/``exit`` by its exit code; checked against the exit code as every receipt is.

    >>> checked_outcome({"kuro/exit-code": 3}), checked_outcome({"kuro/exit-code": 124, "kuro/outcome": "timeout"})
    ('exit', 'timeout')

    Raises ModelError: an exit code that is not an int, an unknown outcome, or one its exit code contradicts.
    """
    code = namespaced.get("kuro/exit-code")
    if isinstance(code, bool) or not isinstance(code, int):
        raise ModelError(f"receipt result requires an int exit-code, got {code!r}", reason="exit-code-not-int")
    outcome = namespaced.get("kuro/outcome")
    if outcome is None:  # absent and None are the same: a None value is dropped
        outcome = "ok" if code == 0 else "exit"
    _check_outcome(outcome, code)
    return str(outcome)


def _check_run(sess: object, command: object) -> None:
    if not isinstance(sess, Session):
        raise ModelError(f"receipt needs a Session, got {type(sess).__name__}", reason="invalid-session")
    if not is_guest_spec(command):
        raise ModelError("a receipt is for a guest spec; a refused command gets a denial", reason="invalid-guest-spec")


def _assemble(
    sess: Session,
    command: Mapping[str, Any],
    namespaced: Mapping[str, Any],
    trusted: Collection[str],
    *,
    closed: bool = False,
) -> dict[str, Any]:
    """The receipt from namespaced host keys; values under ``trusted`` keys are not re-checked; ``closed``:
    every key of ``namespaced`` is a host key (none is dropped for not being one)."""
    outcome = checked_outcome(namespaced)
    out: dict[str, Any] = {
        "kuro/type": "kuro/receipt",
        "kuro/session-id": sess.id,
        "kuro/mode": sess.mode,
        "kuro/fs-root-cid": sess.fs_root_cid,
        "kuro/cwd": sess.cwd,
        "kuro/command": _plain(command, "kuro/command") if trusted is not _ALL_HOST_KEYS else _copied(command),
        "kuro/guest": command["kuro/guest"],
        "kuro/export": command["kuro/export"],
        "kuro/args": list(command["kuro/args"]),
        "kuro/effective-capabilities": sess.effective_capabilities,
        "kuro/isolation": "none",
    }
    if sess.aliases:
        out["kuro/grant-aliases"] = sess.grant_aliases
    if "kuro/env" in command:
        out["kuro/env"] = dict(command["kuro/env"])
    if closed:
        for key, value in namespaced.items():
            if value is not None:
                out[key] = value
    else:
        for key, value in namespaced.items():
            if value is not None and key in _PREFIXED:
                out[key] = value if key in trusted else _typed(key, value)
    out["kuro/outcome"] = outcome
    return out


def _copied(command: Mapping[str, Any]) -> dict[str, Any]:
    """A gated guest spec, copied so the receipt shares no list or map with it (its values are plain already)."""
    return {k: list(v) if type(v) is list else dict(v) if type(v) is dict else v for k, v in command.items()}


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

    An object that names a key twice is refused: JSON leaves its meaning open and a parser that
    keeps the last value would silently drop one (``{"env": {"A": "1", "A": "2"}}``).

    >>> from_json('{"A": 1, "A": 2}')
    Traceback (most recent call last):
    ...
    kuro_wasm.errors.ModelError: key 'A' is given twice in one object; give each key once
    >>> from_json("[" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: JSON nested too deeply to read

    Raises ModelError (a ValueError, reason ``duplicate-key``): a key given twice. Raises
    ValueError: if ``text`` is not JSON, holds malformed base64, or is nested too deeply to read.
    """
    try:
        return _from_json_value(json.loads(text, object_pairs_hook=_unique_keys))
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ModelError(f"key {key!r} is given twice in one object; give each key once", reason="duplicate-key")
        out[key] = value
    return out
