"""One invocation of a batch: a line of ``kuro batch FILE.jsonl`` (or a mapping given to ``run_many``) as a value.

## The one decision
A batch line names its options with the **command line's own words** (:data:`FIELDS`:
``guest``, ``export``, ``args``, ``mode``, ``grant``, ``fs``, ``stdin``, ``timeout_ms``,
``max_output_bytes``, ``max_memory_bytes``, ``fuel``, ``op_id``, ``env``, ``argv0``), and a line is either
turned whole into an :class:`Invocation` — a validated session, guest spec, limits, stdin and
operation id — or refused whole with a :class:`~kuro_wasm.errors.ModelError` whose message
names the offending field (``invalid-invocation``; the rules of :func:`~kuro_wasm.model.sessions.session`,
:func:`~kuro_wasm.model.sessions.guest` and :class:`~kuro_wasm.model.limits.Limits` keep their
own reasons). An unknown field is refused, with the field it was probably meant to be, never
ignored: a typo in ``timeout_ms`` must not silently run a guest for two minutes. Everything is
checked here, before a batch claims an operation id or starts a cluster.

``env`` and ``argv0`` go into the guest spec (a WASI command's environment and argv[0]; an empty
``env`` is none); a guest whose kind takes neither refuses them when it runs (a ``load-error``),
so a line that asks for variables never runs as though it got them. ``stdin`` is text (its UTF-8
bytes) or DAG-JSON bytes (``{"/": {"bytes": "<base64>"}}``). ``fs`` must already be a root CID
here: the command line resolves an fs *name* to its root before calling :func:`invocation`.

## Pure
Values in, values out.

## Not done here
Running (:mod:`kuro_wasm.batch`), fs names (:mod:`kuro_wasm.cli.refs`), JSON text (the caller
decodes the line; :func:`kuro_wasm.model.receipt.from_json` turns DAG-JSON bytes into bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kuro_wasm.errors import ModelError
from kuro_wasm.model.sessions import DEFAULT_MODE, Session, guest, session

if TYPE_CHECKING:  # loaded when a line is read: `kuro --help` shows FIELDS without them
    from kuro_wasm.model.limits import Limits

__all__ = ["FIELDS", "REQUIRED", "Invocation", "invocation"]

#: Every field a batch line may carry → what it means (the ``kuro run`` option it stands for).
FIELDS: Final[Mapping[str, str]] = {
    "guest": "the guest's CID (required; `kuro run CID`)",
    "export": "the export to call (required; `kuro run CID EXPORT`)",
    "args": "the export's args, a list (default []): numbers, or typed values for a component's export",
    "mode": f"the session mode, a grant scope (default {DEFAULT_MODE}; --mode)",
    "grant": "capabilities, a list; replaces the mode's default grant (--grant)",
    "fs": "the fs root the guest sees: a root CID, or on the command line a named fs (--fs)",
    "stdin": 'the guest\'s stdin: text, or bytes as {"/": {"bytes": "<base64>"}} (--stdin)',
    "timeout_ms": "deadline in ms (--timeout-ms; default 120000)",
    "max_output_bytes": "output cap in bytes, stdout and stderr together (--max-output; default 1048576)",
    "max_memory_bytes": "memory limit in bytes, all memories and tables together (--max-memory)",
    "fuel": "wasmtime fuel budget (--fuel)",
    "op_id": "run through the ledger under this operation id (--op-id): replayed if done, never run twice",
    "env": "a WASI command's environment, an object of names to strings (--env; a kuro ABI export takes none)",
    "argv0": "a WASI command's argv[0] (--argv0; default the guest's CID)",
}
#: The fields every line must have.
REQUIRED: Final = ("guest", "export")
_LIMIT_FIELDS: Final = ("timeout_ms", "max_output_bytes", "max_memory_bytes", "fuel")


@dataclass(frozen=True, slots=True)
class Invocation:
    """One guest run a batch is asked for: what to run, in which session, under which limits.

    ``session.fs_root_cid`` is the fs root the guest sees. ``op_id`` (or None) routes the run
    through the ledger. Build it with :func:`invocation` (from a batch line) or directly.
    """

    session: Session
    command: Mapping[str, Any]
    limits: Limits
    stdin: bytes | None = None
    op_id: str | None = None

    def run_options(self) -> dict[str, Any]:
        """The keyword options of :func:`kuro_wasm.host.api.run` (and ``Ledger.run``) for this invocation."""
        return {"fs": self.session.fs_root_cid, "stdin": self.stdin, **self.limits.as_options()}


def _refuse(message: str) -> ModelError:
    return ModelError(message, reason="invalid-invocation")


def _unknown_field(name: str) -> ModelError:
    import difflib

    close = difflib.get_close_matches(name, list(FIELDS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ModelError(f"unknown field {name!r}: {hint}a line takes {', '.join(FIELDS)}", reason="invalid-invocation")


def _stdin(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise _refuse(f'stdin must be text or {{"/": {{"bytes": …}}}}, got {type(value).__name__}')


def _str_list(name: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _refuse(f"{name} must be a list of strings, got {value!r}")
    return value


def invocation(data: Mapping[str, Any], *, session_id: str, default_fs: str) -> Invocation:
    """The :class:`Invocation` a batch line describes (see :data:`FIELDS`).

    ``session_id`` names its session (a batch gives every line its own); ``default_fs`` is the
    root CID the guest sees when the line has no ``fs``.

    >>> cid = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    >>> inv = invocation({"guest": cid, "export": "run", "args": [1], "timeout_ms": 50}, session_id="b-1",
    ...                  default_fs=cid)
    >>> inv.command["kuro/args"], inv.limits.timeout_ms, inv.op_id
    ([1], 50, None)
    >>> invocation({"guest": cid, "export": "run", "timeout": 5}, session_id="b-1", default_fs=cid)
    Traceback (most recent call last):
    ...
    kuro_wasm.errors.ModelError: unknown field 'timeout': did you mean 'timeout_ms'? a line takes guest, export, ...

    Raises ModelError: ``invalid-invocation`` (not a map, an unknown or missing field, a value
    of the wrong type); ``invalid-op-id``; the session's, guest spec's and
    limits' own reasons (``invalid-fs-root``, ``unknown-mode``, ``unknown-capability``,
    ``signed-opt-in-required``, ``invalid-guest-spec``, ``invalid-limit``).
    """
    from kuro_wasm.model.limits import Limits
    from kuro_wasm.model.operation import check_op_id

    if not isinstance(data, Mapping):
        raise _refuse(f"an invocation is a JSON object, got {type(data).__name__}")
    for name in data:
        if name not in FIELDS:
            raise _unknown_field(str(name))
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        raise _refuse(f"missing {' and '.join(missing)} (every line needs guest and export)")
    env = data.get("env")
    if env is not None and not isinstance(env, Mapping):
        raise _refuse(f"env must be an object, got {type(env).__name__}")
    fs = data.get("fs", default_fs)
    if not isinstance(fs, str):
        raise _refuse(f"fs must be a root CID string, got {type(fs).__name__}")
    mode = data.get("mode", DEFAULT_MODE)
    grant = data.get("grant")
    sess = session(session_id, fs, mode, grant=None if grant is None else _str_list("grant", grant))
    args = data.get("args", [])
    command = guest(data["guest"], data["export"], args, env=env or None, argv0=data.get("argv0"))
    limits = Limits.from_options({name: data[name] for name in _LIMIT_FIELDS if name in data})
    op_id = data.get("op_id")
    if op_id is not None:
        check_op_id(op_id)
    return Invocation(sess, command, limits, _stdin(data.get("stdin")), op_id)
