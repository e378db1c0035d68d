"""An operation's identity: its id's rule, the argument digest, and the run limits it is computed over.

## The one decision
Two requests are "the same operation" exactly when their **argument digest**
is equal: the dag-cbor CID of the session's mode and sorted grant, the command,
the raw CID of stdin (never its bytes), the limits with defaults filled in (so
omitting a limit equals passing its default), the fs root the guest will
see and, when an ``Fs`` value is given, whatever of its grant, budget and layout
is not the default. The session id, cwd, callbacks, the module-cache ``home`` and the
``isolation`` backend are left out: they do not change what runs (the receipt
says which isolation ran it, and a replay returns that receipt as it was).

## Pure
Values in, values out.

## Not done here
What a ledger row keeps of a receipt: :mod:`kuro_wasm.ledger.record`. No SQLite,
no journal, no owners: see :mod:`kuro_wasm.ledger.ledger`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kuro_fs.cid import parse_cid, raw_cid
from kuro_fs.dagcbor import MAX_DEPTH, cid_of, js_number
from kuro_fs.errors import DagCborError, InvalidCID
from kuro_fs.fs import DEFAULT_GRANT, Budget, Fs
from kuro_fs.fsdir import DirLayout
from kuro_fs.unixfs import DEFAULT_CHUNK_SIZE, DEFAULT_WIDTH
from kuro_wasm.errors import ModelError
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.sessions import Session, is_guest_spec

__all__ = [
    "DEFAULT_LIMITS",
    "RUN_OPTIONS",
    "argument_digest",
    "check_op_id",
    "narrowed_fs_grant",
    "plain",
    "run_limits",
    "run_seed",
    "stdin_text",
]

#: The limits a run gets when the caller does not say (the host's defaults).
DEFAULT_LIMITS: Final[Mapping[str, int | None]] = Limits().as_options()
#: Every keyword :meth:`Ledger.run` accepts besides the limits (passed on to the starter).
RUN_OPTIONS: Final = frozenset(
    {"fs", "stdin", "home", "isolation", "on_chunk", "on_exit", "deterministic", "seed", *DEFAULT_LIMITS}
)

# ---- operation ids


def check_op_id(op_id: object) -> None:
    """Refuse an operation id that is not a non-blank string of at most 1024 characters of printable text.

    Control characters (C0, DEL, C1) are refused: an op id is printed by ``kuro ledger list`` and in
    error lines, where a newline would forge a row and an escape sequence would drive the terminal;
    so are lone surrogates (not UTF-8, so not storable).

    >>> check_op_id("tool-call-7")
    >>> check_op_id("  ")
    Traceback (most recent call last):
    ...
    kuro_wasm.errors.ModelError: operation id must be a non-blank string of at most 1024 characters, got '  '

    Raises ModelError (reason ``invalid-op-id``): otherwise.
    """
    if not isinstance(op_id, str) or not op_id.strip() or len(op_id) > 1024:
        raise ModelError(
            f"operation id must be a non-blank string of at most 1024 characters, got {_echo(op_id)}",
            reason="invalid-op-id",
        )
    bad = next((c for c in op_id if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise ModelError(
            f"operation id must not contain control characters or lone surrogates, got {_echo(op_id)} (has {bad!r})",
            reason="invalid-op-id",
        )


#: The most characters of a refused op id an error message echoes (an error line stays one readable line).
ECHO_CHARS: Final = 64


def _echo(value: object) -> str:
    """``repr(value)`` cut to :data:`ECHO_CHARS` characters, saying how long a cut string was.

    >>> _echo("a" * 5000)
    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'… (5000 characters)"
    >>> _echo("ok\\n")
    "'ok\\\\n'"
    """
    if isinstance(value, str) and len(value) > ECHO_CHARS - 2:
        return f"{value[: ECHO_CHARS - 2]!r}… ({len(value)} characters)"
    shown = repr(value)
    return shown if len(shown) <= ECHO_CHARS else shown[:ECHO_CHARS] + "…"


# ---- argument digest


def plain(value: Any, where: str, _depth: int = 0) -> Any:
    """``value`` as plain dag-cbor data (integral floats as ints); raises ModelError ``unencodable-value``
    (also for nesting deeper than dag-cbor's :data:`~kuro_fs.dagcbor.MAX_DEPTH`, before Python's own
    recursion limit could be met)."""
    if _depth > MAX_DEPTH:
        raise ModelError(f"{where}: nested deeper than {MAX_DEPTH}", reason="unencodable-value")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -(2**64) <= value < 2**64:  # dag-cbor's integer range
            raise ModelError(f"{where}: integer {value} is outside dag-cbor's range", reason="unencodable-value")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ModelError(f"{where}: {value!r} cannot be digested", reason="unencodable-value")
        return js_number(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ModelError(f"{where}: map keys must be strings", reason="unencodable-value")
        return {k: plain(v, f"{where}/{k}", _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{where}/{i}", _depth + 1) for i, v in enumerate(value)]
    raise ModelError(f"{where}: {type(value).__name__} cannot be digested", reason="unencodable-value")


def _command(command: object) -> Any:
    """``command`` as digested: its plain form, marked when the gate refuses the command but would run
    its plain form (``[1.0]`` or ``(1,)`` args, a bytearray): the gate tells the two apart, so they are
    two operations, and one must not replay the other's denial or receipt. Every other command's
    identity is its plain form, as before."""
    data = plain(command, "command")
    if not is_guest_spec(command) and is_guest_spec(data):
        return {"refused-spelling": data}
    return data


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

    Checked here, by the host's rule (:class:`~kuro_wasm.model.limits.Limits`), so a bad
    limit is refused before a ledger records anything (the host would refuse it only
    after the op id was claimed).

    Raises ModelError: ``invalid-limit`` for a value that is not an int (bools
    are not) from the limit's minimum to 2**64-1, or ``None`` where the default is not.
    """
    return Limits.from_options(options).as_options()


def run_seed(deterministic: object, seed: object) -> int | None:
    """The seed of a ``deterministic=True`` run, None for a run that reads the real clocks and entropy.

    >>> run_seed(False, 0), run_seed(True, 0), run_seed(True, 42)
    (None, 0, 42)

    Raises ModelError (``invalid-run-option``): ``deterministic`` is not a bool, ``seed`` is not an
    int in 0..2**64-1, or a nonzero ``seed`` is given without ``deterministic=True``.
    """
    if not isinstance(deterministic, bool):
        raise ModelError(f"deterministic must be True or False, got {deterministic!r}", reason="invalid-run-option")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ModelError(f"seed must be an int in 0..2**64-1, got {seed!r}", reason="invalid-run-option")
    if not deterministic:
        if seed != 0:
            raise ModelError("a seed is for deterministic runs: pass deterministic=True", reason="invalid-run-option")
        return None
    return seed


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
    passing its default), the fs root (``fs`` if given, else the session's), what an ``Fs`` value
    sets beyond its root that is not the default (its grant, budget, file and directory layout)
    and, for a ``deterministic=True`` run, its seed.
    Not covered: the session id, cwd, callbacks, ``home`` and ``isolation``.

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
    identity = {
        "kuro.ledger/version": 1,
        "mode": session.mode,
        "grant": sorted(session.grant),
        "command": _command(command),
        "stdin": _stdin_cid(run_options.get("stdin")),
        "limits": {k.replace("_", "-"): v for k, v in Limits.from_options(run_options).identity().items()},
        "fs-root": _fs_root(session, run_options.get("fs")),
    }
    view = _fs_view(run_options.get("fs"))
    if view:  # only then: operations on a default Fs value keep the identity they had before
        identity["fs-view"] = view
    seed = run_seed(run_options.get("deterministic", False), run_options.get("seed", 0))
    if seed is not None:  # only then: operations digested before the option existed keep their identity
        identity["deterministic"] = {"seed": seed}
    try:
        return cid_of(identity)
    except DagCborError as exc:  # nesting within plain()'s bound but past the encoder's, under the identity's keys
        raise ModelError(f"the operation cannot be digested: {exc}", reason="unencodable-value") from exc


_DEFAULT_BUDGET: Final = Budget()
_DEFAULT_LAYOUT: Final = DirLayout()


def narrowed_fs_grant(fs: object) -> list[str] | None:
    """An ``Fs`` value's own grant, sorted, when it allows fewer than every fs capability; else None.

    What ``kuro/fs-grant`` states and what the operation's identity covers (one rule for both).
    """
    grant = fs.grant if isinstance(fs, Fs) else None
    return sorted(grant) if grant is not None and grant != DEFAULT_GRANT else None


def _fs_view(fs: object) -> dict[str, Any]:
    """What an ``Fs`` value adds to its root, where it is not the default: its own grant (what the guest
    may do), its budget (what one call may read) and its format (chunking, width, directory layout: which
    CIDs a write makes). Each changes the receipt the same command can produce."""
    if not isinstance(fs, Fs):
        return {}
    view: dict[str, Any] = {}
    grant = narrowed_fs_grant(fs)
    if grant is not None:
        view["grant"] = grant
    if fs.budget != _DEFAULT_BUDGET:
        view["budget"] = [fs.budget.entries, fs.budget.bytes]
    if fs.chunk_size != DEFAULT_CHUNK_SIZE or fs.width != DEFAULT_WIDTH:
        view["file-layout"] = [fs.chunk_size, fs.width]
    if fs.layout != _DEFAULT_LAYOUT:
        view["dir-layout"] = [fs.layout.max_flat, fs.layout.shape.bit_width, fs.layout.shape.bucket_size]
    return view
