"""The terminal model: modes, grants, sessions, guest specs and the denial gate.

``kuro = terminal session + command intent + effective grant + receipt``.

## The one decision
:func:`denial` decides, before anything is loaded or run, whether a command may
run in a session, and its body *is* the decision order:

1. a ``terminal-host`` session (which :func:`session` builds only with
   ``signed_opt_in=True``, raising ``signed-opt-in-required`` otherwise) →
   ``unsupported-mode`` (there is no shell behind a wasm guest; the mode exists
   so that asking for it is explicit and refused);
2. an argv vector (a non-empty list/tuple of strings) → ``argv-not-a-process``,
   even when every capability is granted: a wasm host has no processes, and a
   receipt that pretended otherwise would lie about what ran;
3. anything that is not exactly a :func:`guest` spec → ``guest-spec-required``;
4. a grant without ``guest/invoke`` → ``missing-capabilities`` with a sorted
   ``kuro/missing``.

A denial is a value of one fixed shape (:data:`DENIAL_KEYS`), never an
exception. A mode is a *grant scope*, not an isolation level: nothing here is
called "safe".

**Two vocabularies, one grant.** A grant may name this host's capabilities
(:data:`CAPABILITIES`) or the original kuro's (:data:`ORIGINAL_CAPABILITIES`:
``repo/read``, ``repo/write``, ``tmp/write``, …). An original name is an
*alias* (:data:`ALIASES`) that stands for host capabilities — possibly none,
when the original names something this host does not have (``net/fetch``:
guests have no network). The session's grant, and every receipt's
``kuro/effective-capabilities``, is in this host's names only; the aliases
used, each with what it stood for, are kept beside it (:attr:`Session.aliases`,
the receipt's ``kuro/grant-aliases``), so a grant that named ``net/fetch``
says on its face that it granted nothing. A name in neither vocabulary is
refused (``unknown-capability``).

## Pure
No I/O, no clock. Values in, values out; tables (:data:`MODES`,
:data:`CAPABILITIES`, :data:`DENIAL_REASONS`) are data.

## Not done here
Per-import capability checks (``fs/read`` …) happen at call time in the host and
land in the receipt's ``kuro/denials``; whether an arg fits an export's parameter
is the guest kind's decision when it runs (a ``load-error``), not this module's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_fs.cid import parse as _parse_cid
from kuro_fs.dagcbor import js_number
from kuro_fs.errors import InvalidCID
from kuro_fs.paths import clean_path
from kuro_wasm.errors import ModelError

__all__ = [
    "ALIASES",
    "CAPABILITIES",
    "DEFAULT_MODE",
    "DENIAL_KEYS",
    "DENIAL_REASONS",
    "GUEST_OPTIONAL_KEYS",
    "GUEST_REQUIRES",
    "I64_MAX",
    "I64_MIN",
    "MODES",
    "ORIGINAL_CAPABILITIES",
    "Alias",
    "Mode",
    "Session",
    "denial",
    "guest",
    "is_argv",
    "is_guest_spec",
    "missing_capabilities",
    "session",
]

#: The capability vocabulary of this host: name → what it lets a guest do.
CAPABILITIES: Final[Mapping[str, str]] = {
    "guest/invoke": "run a guest export at all",
    "fs/read": "read file bytes from the session's kuro.fs root",
    "fs/ls": "list a directory of the session's kuro.fs root",
    "fs/write": "write a file, producing a new fs root",
    "fs/rm": "remove a path, producing a new fs root",
    "stdin/read": "read the bytes the caller supplied as stdin",
    "fs/scratch": "read, write, list and remove under tmp/, a per-run scratch directory never committed to the fs root",
    "agent/checkpoint": "take a checkpoint of a run (kuro_wasm.model.checkpoint.to_data, Handle.checkpoint)",
    "host/shell": "a host shell; named so terminal-host can be spelled, never backed here",
}


@dataclass(frozen=True, slots=True)
class Alias:
    """An original kuro capability name: the host capabilities it stands for, and why those."""

    name: str
    grants: frozenset[str]
    meaning: str


_NO_CACHE: Final = "nothing: no cache a guest can reach (the compiled-module cache is the host's own)"
#: The original kuro's capability names that are not this host's, each an alias of host capabilities.
ALIASES: Final[Mapping[str, Alias]] = {
    a.name: a
    for a in (
        Alias("repo/read", frozenset({"fs/read", "fs/ls"}), "read and list the session's kuro.fs root"),
        Alias("repo/write", frozenset({"fs/write", "fs/rm"}), "write and remove files, producing new fs roots"),
        Alias("tmp/write", frozenset({"fs/scratch"}), "a per-run scratch directory under tmp/, never committed"),
        Alias(
            "cache/read", frozenset(), "nothing: no cache a guest can reach (the compiled-module cache is the host's)"
        ),
        Alias(
            "cache/write", frozenset(), "nothing: no cache a guest can reach (the compiled-module cache is the host's)"
        ),
        Alias("net/fetch", frozenset(), "nothing: guests have no network in this host"),
        Alias("log/write", frozenset(), "nothing: writing to stdout/stderr needs no capability in this host"),
    )
}
#: Every capability name of the original kuro's modes (``agent/checkpoint`` is the same name in both vocabularies).
ORIGINAL_CAPABILITIES: Final = (*ALIASES, "agent/checkpoint")


@dataclass(frozen=True, slots=True)
class Mode:
    """One terminal mode: its label, its default grant, whether it asks for the host."""

    name: str
    label: str
    default_grant: frozenset[str]
    host: bool


_REPO: Final = frozenset({"guest/invoke", "fs/read", "fs/ls", "stdin/read"})

#: The modes, each a grant scope with a default grant. ``terminal-safe`` does not exist.
MODES: Final[Mapping[str, Mode]] = {
    "terminal-repo": Mode("terminal-repo", "repo", _REPO, host=False),
    "terminal-build": Mode("terminal-build", "build", _REPO | {"fs/write", "fs/rm"}, host=False),
    "terminal-agent": Mode("terminal-agent", "agent", _REPO | {"agent/checkpoint"}, host=False),
    "terminal-host": Mode("terminal-host", "host", frozenset({"host/shell"}), host=True),
}
DEFAULT_MODE: Final = "terminal-repo"

#: Denial reasons, in decision order: reason → why.
DENIAL_REASONS: Final[Mapping[str, str]] = {
    "unsupported-mode": "terminal-host has no shell behind a wasm guest; this host refuses it",
    "argv-not-a-process": "an argv vector names a process; a wasm host runs guest exports, not processes",
    "guest-spec-required": "the command is not a kuro/guest spec (see kuro_wasm.model.sessions.guest)",
    "missing-capabilities": "the session's grant lacks capabilities the command needs (kuro/missing)",
}
#: Every denial has exactly these keys.
DENIAL_KEYS: Final = (
    "kuro/allowed?",
    "kuro/isolation",
    "kuro/missing",
    "kuro/mode",
    "kuro/reason",
    "kuro/session-id",
    "kuro/type",
)
#: What running a guest spec requires of the grant.
GUEST_REQUIRES: Final = frozenset({"guest/invoke"})
I64_MIN: Final = -(2**63)
I64_MAX: Final = 2**63 - 1
_ARG_INT_END: Final = 2**64  # args are ints in i64_min..u64_max
_GUEST_KEYS: Final = frozenset({"kuro/type", "kuro/guest", "kuro/export", "kuro/args"})
#: Optional guest-spec keys: name → meaning.
GUEST_OPTIONAL_KEYS: Final[Mapping[str, str]] = {
    "kuro/fs-read-path": "the file a kuro-browser-v0 guest's fs_read(buf_ptr, len) reads (a kuro.fs path)",
    "kuro/env": "a WASI command's environment: names (non-empty, no '=' or NUL) to values (no NUL)",
    "kuro/argv0": "a WASI command's argv[0] (default: the guest's CID)",
}


# ---- sessions


#: grant → its capabilities sorted (every receipt carries them as a list; a run sorted its grant each time).
_SORTED_GRANTS: dict[frozenset[str], tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class Session:
    """A terminal session: who runs, over which fs root, with which grant.

    ``grant`` is the effective capability set in this host's names (the mode's
    default unless a grant replaced it); ``aliases`` the original kuro names the
    grant was given in, each with the host capabilities it stood for (sorted
    pairs). Build with :func:`session`, which validates.
    """

    id: str
    fs_root_cid: str
    mode: str
    grant: frozenset[str]
    cwd: str = "."
    signed_opt_in: bool = False
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def effective_capabilities(self) -> list[str]:
        """The grant as a sorted list (the form receipts carry): a new list each time, sorted once per grant."""
        grant = self.grant
        if type(grant) is not frozenset:  # (a Session built by hand may hold any iterable)
            return sorted(grant)
        known = _SORTED_GRANTS.get(grant)
        if known is None:
            known = tuple(sorted(grant))
            if len(_SORTED_GRANTS) < 256:  # (a handful of grants in a process; a bound all the same)
                _SORTED_GRANTS[grant] = known
        return list(known)

    @property
    def grant_aliases(self) -> dict[str, list[str]]:
        """``{original name: [host capabilities it stood for]}`` (empty when no alias was used)."""
        return {name: list(caps) for name, caps in self.aliases}

    def allows(self, required: Iterable[str]) -> bool:
        """True when every capability in ``required`` is granted."""
        return set(required) <= self.grant

    def to_data(self) -> dict[str, Any]:
        """Plain data with ``kuro/`` keys (encodable as dag-cbor and JSON); ``kuro/grant-aliases`` only when used."""
        data = {
            "kuro/type": "kuro/session",
            "kuro/session-id": self.id,
            "kuro/fs-root-cid": self.fs_root_cid,
            "kuro/mode": self.mode,
            "kuro/cwd": self.cwd,
            "kuro/grant": sorted(self.grant),
            "kuro/signed-opt-in?": self.signed_opt_in,
        }
        if self.aliases:
            data["kuro/grant-aliases"] = self.grant_aliases
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Session:
        """Rebuild a session from :meth:`to_data` output, validating as :func:`session` does.

        Raises ModelError: if the data is not a session's data.
        """
        if not isinstance(data, Mapping) or data.get("kuro/type") != "kuro/session":
            raise ModelError("not session data (kuro/type must be kuro/session)", reason="invalid-session")
        grant = data.get("kuro/grant")
        if not isinstance(grant, (list, tuple)):
            raise ModelError("session data needs a kuro/grant list", reason="invalid-session")
        aliases = data.get("kuro/grant-aliases", {})
        if not isinstance(aliases, Mapping) or any(
            name not in ALIASES or sorted(ALIASES[name].grants) != caps for name, caps in aliases.items()
        ):
            raise ModelError("session kuro/grant-aliases do not match the alias table", reason="invalid-session")
        return session(
            data.get("kuro/session-id"),  # type: ignore[arg-type]
            data.get("kuro/fs-root-cid"),  # type: ignore[arg-type]
            data.get("kuro/mode"),  # type: ignore[arg-type]
            grant=[*grant, *aliases],
            cwd=data.get("kuro/cwd", "."),
            signed_opt_in=data.get("kuro/signed-opt-in?", False) is True,
        )


def session(
    id: str,
    fs_root_cid: str,
    mode: str = DEFAULT_MODE,
    grant: Iterable[str] | None = None,
    cwd: str = ".",
    *,
    signed_opt_in: bool = False,
) -> Session:
    """A validated :class:`Session`.

    ``grant`` (an iterable of capability names) *replaces* the mode's default
    grant; ``None`` keeps the default. A name may be this host's (:data:`CAPABILITIES`)
    or an original kuro alias (:data:`ALIASES`), which adds the host capabilities
    it stands for and is kept in :attr:`Session.aliases`.

    >>> session("s2", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
    ...         grant=["guest/invoke", "repo/read", "net/fetch"]).grant_aliases
    {'net/fetch': [], 'repo/read': ['fs/ls', 'fs/read']}

    >>> s = session("s1", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    >>> s.effective_capabilities
    ['fs/ls', 'fs/read', 'guest/invoke', 'stdin/read']

    Raises ModelError: ``invalid-session`` if ``id`` is not a non-empty string or
    ``cwd`` not a string; ``invalid-fs-root`` if ``fs_root_cid`` is not a CID;
    ``unknown-mode``; ``unknown-capability`` (a name in neither vocabulary, or a grant that is a bare string);
    ``signed-opt-in-required`` for ``terminal-host`` without ``signed_opt_in=True``.
    """
    if not isinstance(id, str) or not id.strip():
        raise ModelError(f"session id must be a non-blank string, got {id!r}", reason="invalid-session")
    try:
        _parse_cid(fs_root_cid)
    except InvalidCID as exc:
        raise ModelError(f"fs_root_cid is not a CID: {exc}", reason="invalid-fs-root") from exc
    if not isinstance(mode, str) or mode not in MODES:
        raise ModelError(
            f"unknown terminal mode {mode!r}", reason="unknown-mode", hint=f"one of {', '.join(sorted(MODES))}"
        )
    if not isinstance(cwd, str):
        raise ModelError(f"cwd must be a string, got {type(cwd).__name__}", reason="invalid-session")
    spec = MODES[mode]
    if spec.host and signed_opt_in is not True:
        raise ModelError(
            "terminal-host requires signed opt-in", reason="signed-opt-in-required", hint="pass signed_opt_in=True"
        )
    caps, aliases = _grant(grant, spec)
    return Session(id, fs_root_cid, mode, caps, cwd, signed_opt_in is True, aliases)


def _grant(grant: Iterable[str] | None, spec: Mode) -> tuple[frozenset[str], tuple[tuple[str, tuple[str, ...]], ...]]:
    if grant is None:
        return spec.default_grant, ()
    if isinstance(grant, (str, bytes)) or not isinstance(grant, Iterable):
        raise ModelError(
            f"grant must be an iterable of capability names, got {type(grant).__name__}",
            reason="unknown-capability",
        )
    names = list(grant)
    unknown = sorted(repr(n) for n in names if not isinstance(n, str) or (n not in CAPABILITIES and n not in ALIASES))
    if unknown:
        raise ModelError(
            f"unknown capability {', '.join(unknown)}",
            reason="unknown-capability",
            hint=f"one of {', '.join(sorted(CAPABILITIES))}; or an original kuro name: {', '.join(sorted(ALIASES))}",
        )
    caps = {n for n in names if n in CAPABILITIES}
    used = sorted({n for n in names if n in ALIASES})
    for name in used:
        caps |= ALIASES[name].grants
    return frozenset(caps), tuple((name, tuple(sorted(ALIASES[name].grants))) for name in used)


def missing_capabilities(sess: Session, required: Iterable[str]) -> dict[str, Any] | None:
    """The ``missing-capabilities`` denial if ``sess`` lacks any of ``required``, else None.

    For gates other than running a guest (e.g. taking a checkpoint of a run:
    ``agent/checkpoint``); the denial has the one fixed shape of :func:`denial`.
    """
    missing = frozenset(required) - sess.grant
    return _denied(sess, "missing-capabilities", missing) if missing else None


# ---- guest specs


_MAX_ARG_DEPTH: Final = 64


def _arg(value: object, where: str, depth: int = 0) -> Any:
    """One spec arg as canonical plain data (numbers as before; strings, bools, null, bytes, lists, maps)."""
    if depth > _MAX_ARG_DEPTH:
        raise ModelError(f"guest arg {where} is nested more than {_MAX_ARG_DEPTH} deep", reason="invalid-guest-spec")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ModelError(f"guest arg {where} is not valid Unicode: {exc}", reason="invalid-guest-spec") from exc
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [_arg(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ModelError(f"guest arg {where}: map keys must be strings, got {k!r}", reason="invalid-guest-spec")
            out[_arg(k, where, depth + 1)] = _arg(v, f"{where}.{k}", depth + 1)
        return out
    if not isinstance(value, (int, float)):
        raise ModelError(
            f"guest arg {where} must be a number, string, bool, null, bytes, list or map, got {type(value).__name__}",
            reason="invalid-guest-spec",
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ModelError(f"guest arg {where} is {value!r}: not a finite number", reason="invalid-guest-spec")
        value = js_number(value)  # JS-number semantics: 2.0 is 2, 2.5 and 1e300 (past 2^53) stay floats
        if isinstance(value, float):
            return value
    if not I64_MIN <= value <= 2**64 - 1:
        raise ModelError(f"guest arg {where} = {value} does not fit in i64 or u64", reason="invalid-guest-spec")
    return value


def _env(env: object) -> dict[str, str]:
    if not isinstance(env, Mapping):
        raise ModelError(
            f"env must be a mapping of names to strings, got {type(env).__name__}", reason="invalid-guest-spec"
        )
    out: dict[str, str] = {}
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ModelError(f"env {name!r}: names and values are strings", reason="invalid-guest-spec")
        if name == "" or "=" in name or "\x00" in name:
            raise ModelError(f"env name {name!r} must be non-empty, without '=' or NUL", reason="invalid-guest-spec")
        if "\x00" in value:
            raise ModelError(f"env {name!r}: a value cannot hold a NUL character", reason="invalid-guest-spec")
        out[_unicode(name, "an env name")] = _unicode(value, f"env {name!r}")
    return dict(sorted(out.items()))


def _is_unicode(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unicode(value: str, where: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no program could be given it
        raise ModelError(f"{where} is not valid Unicode: {exc}", reason="invalid-guest-spec") from exc
    return value


def guest(
    cid: str,
    export: str,
    args: Iterable[Any] = (),
    *,
    fs_read_path: str | None = None,
    env: Mapping[str, str] | None = None,
    argv0: str | None = None,
) -> dict[str, Any]:
    """The guest invocation spec: run ``export`` of the guest named by ``cid`` with ``args``.

    ``args`` are plain data: numbers (what a core module's export takes),
    and for component exports also strings, bools, null, bytes, lists and
    maps with string keys (converted by the export's WIT types when it runs;
    a core module refuses anything but numbers with a ``load-error``).

    ``fs_read_path`` names the one file the original kuro's browser guests read
    through their two-parameter ``fs_read(buf_ptr, len)`` (guest kind
    ``kuro-browser-v0``): the file is part of what was asked, so it is in the
    spec (and the receipt's ``kuro/command``), never implied. Absent unless given.

    ``env`` (a WASI command's environment, names sorted) and ``argv0`` (its
    argv[0]; by default the guest's CID) are in the spec only when given, too, so
    a spec without them is the same value, with the same digest, as before they
    existed; for a WASI command, string ``args`` are its argv[1:].

    Integral floats become ints (JavaScript number semantics; the
    host converts per the export's signature anyway), so a spec and every
    receipt built from it are dag-cbor-canonical.

    >>> guest("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "run", [40, 2.0])["kuro/args"]
    [40, 2]
    >>> wc = guest("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "_start", ["-l"], env={"LANG": "C"})
    >>> wc["kuro/args"], wc["kuro/env"]
    (['-l'], {'LANG': 'C'})

    Raises ModelError (reason ``invalid-guest-spec``): if ``cid`` is not a CID in
    kuro's profile, ``export`` is not a non-empty string of valid Unicode, ``args`` is not a
    list/tuple, or an arg (at any depth) is none of the above, is NaN or
    infinite, is an integer outside i64..u64, is a string that is not valid
    Unicode (a lone surrogate), has a non-string map key, or nests deeper than 64;
    or ``fs_read_path`` is not a kuro.fs path of a file (a string
    :func:`kuro_fs.paths.clean_path` accepts, not the root); or ``env`` is not a
    mapping of strings with non-empty names free of ``=`` and NUL and values free
    of NUL; or ``argv0`` is not a string free of NUL.
    """
    try:
        _parse_cid(cid)
    except InvalidCID as exc:
        raise ModelError(f"guest is not a CID: {exc}", reason="invalid-guest-spec") from exc
    if not isinstance(export, str) or not export:
        raise ModelError(f"export must be a non-empty string, got {export!r}", reason="invalid-guest-spec")
    _unicode(export, "export")
    if not isinstance(args, (list, tuple)):
        raise ModelError(f"args must be a list, got {type(args).__name__}", reason="invalid-guest-spec")
    spec: dict[str, Any] = {
        "kuro/type": "kuro/guest",
        "kuro/guest": cid,
        "kuro/export": export,
        "kuro/args": [_arg(a, str(i)) for i, a in enumerate(args)],
    }
    if fs_read_path is not None:
        parts = clean_path(fs_read_path)
        if not parts:
            raise ModelError(
                f"fs_read_path must name a file under the fs root, got {fs_read_path!r}", reason="invalid-guest-spec"
            )
        spec["kuro/fs-read-path"] = fs_read_path
    if env is not None:
        spec["kuro/env"] = _env(env)
    if argv0 is not None:
        if not isinstance(argv0, str) or "\x00" in argv0:
            raise ModelError(f"argv0 must be a string without NUL, got {argv0!r}", reason="invalid-guest-spec")
        spec["kuro/argv0"] = _unicode(argv0, "argv0")
    return spec


def _quick_arg(a: object) -> bool:
    """True for an arg :func:`guest` keeps as it is: an int in i64..u64, or a string of valid Unicode."""
    if type(a) is int:
        return I64_MIN <= a < _ARG_INT_END
    return type(a) is str and (a.isascii() or _is_unicode(a))


def is_guest_spec(command: object) -> bool:
    """True only for a mapping that equals :func:`guest` of its own fields (closed shape)."""
    if type(command) is dict and command.keys() == _GUEST_KEYS and command["kuro/type"] == "kuro/guest":
        # The common spec — a dict of exactly the four keys, int or string args (a core module's, a component's
        # or a WASI command's) — decided without rebuilding it (every run asks; rebuilding cost a tenth of a warm
        # invocation, 16 µs with two string args). Property-tested equal to the rule below.
        cid, export, args = command["kuro/guest"], command["kuro/export"], command["kuro/args"]
        if (
            type(cid) is str
            and type(export) is str
            and export
            and (export.isascii() or _is_unicode(export))
            and type(args) is list
            and (not args or all(_quick_arg(a) for a in args))
        ):
            try:
                _parse_cid(cid)
            except InvalidCID:
                return False
            return True
    if (
        not isinstance(command, Mapping)
        or not _GUEST_KEYS <= set(command) <= _GUEST_KEYS | set(GUEST_OPTIONAL_KEYS)
        or command["kuro/type"] != "kuro/guest"
    ):
        return False
    try:
        rebuilt = guest(
            command["kuro/guest"],
            command["kuro/export"],
            command["kuro/args"],
            fs_read_path=command.get("kuro/fs-read-path"),
            env=command.get("kuro/env"),
            argv0=command.get("kuro/argv0"),
        )
    except ModelError:
        return False
    return rebuilt == dict(command) and _same_types(rebuilt["kuro/args"], command["kuro/args"])


def _same_types(a: Any, b: Any) -> bool:
    """True when ``b`` has exactly ``a``'s types all the way down (1 vs 1.0 vs True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_types(a[k], b[k]) for k in a)
    return True


def is_argv(command: object) -> bool:
    """True for an argv vector: a non-empty list or tuple whose every item is a string."""
    return isinstance(command, (list, tuple)) and len(command) > 0 and all(isinstance(a, str) for a in command)


# ---- the gate


def _denied(sess: Session, reason: str, missing: Iterable[str] = ()) -> dict[str, Any]:
    return {
        "kuro/type": "kuro/denial",
        "kuro/allowed?": False,
        "kuro/reason": reason,
        "kuro/session-id": sess.id,
        "kuro/mode": sess.mode,
        "kuro/isolation": "none",
        "kuro/missing": sorted(missing),
    }


def denial(sess: Session, command: object) -> dict[str, Any] | None:
    """``None`` when ``command`` may run in ``sess``, else the denial value.

    The denial has exactly :data:`DENIAL_KEYS`: ``kuro/allowed?`` False,
    ``kuro/reason`` (one of :data:`DENIAL_REASONS`, checked in that order),
    ``kuro/session-id``, ``kuro/mode``, ``kuro/isolation`` ``"none"`` (nothing
    ran), ``kuro/missing`` (sorted; empty unless the reason is
    ``missing-capabilities``) and ``kuro/type`` ``"kuro/denial"``.

    Raises ModelError: if ``sess`` is not a :class:`Session` (``invalid-session``), or is one
    built by hand with a mode :data:`MODES` does not have (``unknown-mode``).
    """
    if not isinstance(sess, Session):
        raise ModelError(f"denial needs a Session, got {type(sess).__name__}", reason="invalid-session")
    mode = MODES.get(sess.mode) if isinstance(sess.mode, str) else None
    if mode is None:  # a Session built by hand, not by session()
        raise ModelError(f"unknown terminal mode {sess.mode!r}", reason="unknown-mode")
    if mode.host:
        return _denied(sess, "unsupported-mode")
    if is_argv(command):
        return _denied(sess, "argv-not-a-process")
    if not is_guest_spec(command):
        return _denied(sess, "guest-spec-required")
    if GUEST_REQUIRES <= sess.grant:
        return None
    return _denied(sess, "missing-capabilities", GUEST_REQUIRES - sess.grant)
