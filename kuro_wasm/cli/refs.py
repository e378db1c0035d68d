"""Named fs roots: a name in the home that points at a kuro.fs root CID, with its history.

## The one decision
A kuro.fs value is immutable, so "the filesystem" a user keeps working on is just a
*name* for the latest root, like a git branch. Each name is two files under
``kuro_fs.home.refs_dir(home)``: ``<name>.ref`` holds the current root CID (one line,
replaced atomically: temp file + fsync + rename), and ``<name>.log`` is an
append-only history, one JSON object per line (``seq``, ``root``, ``note``, ``at``).
Moving back (``checkout``) appends to the log too: history is never rewritten, so
every root a name ever held stays listed and readable. Updates take an exclusive
``flock`` on ``<name>.lock`` and may name the root they expect to replace, so two
CLI processes cannot silently lose one another's write.

The log is written first, then the ref: a crash between the two leaves a logged
entry the ref does not show yet, and :meth:`Refs.get` falls back to the log only
when the ref file is missing. A torn last log line (crash mid-append) is ignored
on read and cut off before the next append.

## Pure / Effects
:func:`check_name`, :func:`parse_log` and :func:`resolve_target` are pure.
:class:`Refs` does the file I/O; the clock is injected (``now``).

## Not done here
No merge, no remote refs, no garbage collection of unreferenced blocks. Whether a
root CID is present in the block store is the caller's check.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from kuro_fs.atomic import write_atomic
from kuro_fs.cid import parse
from kuro_wasm.errors import KuroError

__all__ = ["DEFAULT_NAME", "RefConflict", "RefEntry", "RefError", "Refs", "check_name", "parse_log", "resolve_target"]

#: The name used when the user names none.
DEFAULT_NAME: Final = "main"
_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class RefError(KuroError, ValueError):
    """A ref name or checkout target is malformed, or names nothing in the history."""

    reference = "bad-ref"


class RefConflict(KuroError):
    """The ref moved between reading it and writing it (another writer got there first).

    Not a :class:`RefError`: the input was fine, the operation lost a race.
    """

    reference = "ref-conflict"


@dataclass(frozen=True, slots=True)
class RefEntry:
    """One line of a ref's history: the ``seq``-th root the name held, and why."""

    seq: int
    root: str
    note: str
    at: str

    def to_data(self) -> dict[str, Any]:
        """The JSON-able form written to the log."""
        return {"seq": self.seq, "root": self.root, "note": self.note, "at": self.at}


# ---- pure


def check_name(name: str) -> str:
    """Return ``name`` if it is a usable ref name, else raise :class:`RefError`.

    Letters, digits, ``.``, ``_``, ``-``; starts with a letter or digit; at most 100
    characters. So a name can never be a path (no ``/``) nor hide as a dotfile.

    >>> check_name("main")
    'main'
    """
    if not isinstance(name, str) or _NAME_RE.fullmatch(name) is None:
        raise RefError(f"bad fs name {name!r}: use letters, digits, '.', '_' or '-' (starting with a letter or digit)")
    return name


def parse_log(text: str) -> list[RefEntry]:
    """Parse a ref log. A last line without its newline (a torn append) is ignored.

    Raises :class:`RefError` for a whole line that is not a history entry.

    >>> parse_log('{"seq": 0, "root": "bafy", "note": "init", "at": "t"}\\n{"seq": 1, "ro')
    [RefEntry(seq=0, root='bafy', note='init', at='t')]
    """
    complete = text.split("\n")[:-1]  # the piece after the last newline is a torn append: never shown
    entries: list[RefEntry] = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        entry = _entry(line)
        if entry is None:
            raise RefError(f"ref log line {number} is not a history entry: {line[:80]!r}")
        entries.append(entry)
    return entries


def resolve_target(entries: list[RefEntry], target: str) -> str:
    """The root CID a checkout ``target`` names: a history number (``3``) or a CID.

    Raises :class:`RefError` for a number not in the history, and
    :class:`kuro_fs.errors.InvalidCID` for anything else that is not a CID.

    >>> resolve_target([RefEntry(0, "bafyroot", "init", "t")], "0")
    'bafyroot'
    """
    if target.isascii() and target.isdigit():  # not "²": str.isdigit() says yes, int() cannot read it
        seq = int(target)
        for entry in entries:
            if entry.seq == seq:
                return entry.root
        last = entries[-1].seq if entries else None
        shown = f"0..{last}" if last is not None else "none yet"
        raise RefError(f"no history entry {seq} (entries: {shown})")
    return str(parse(target))


def _entry(line: str) -> RefEntry | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    seq, root, note, at = data.get("seq"), data.get("root"), data.get("note", ""), data.get("at", "")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(root, str):
        return None
    return RefEntry(seq, root, str(note), str(at))


# ---- effects


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Refs:
    """The named roots kept in one directory (normally ``refs_dir(home)``)."""

    def __init__(self, directory: str | os.PathLike[str], *, now: Callable[[], str] = _utc_now) -> None:
        self.directory = Path(directory)
        self._now = now

    def names(self) -> list[str]:
        """Every name that has a ref or a history, sorted."""
        if not self.directory.is_dir():
            return []
        found = {p.stem for p in self.directory.iterdir() if p.suffix in (".ref", ".log")}
        return sorted(n for n in found if _NAME_RE.fullmatch(n))

    def get(self, name: str) -> str | None:
        """The root CID ``name`` points at now, or None if the name was never set."""
        ref = self._path(name, ".ref")
        try:
            text = ref.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            entries = self.log(name)
            return entries[-1].root if entries else None
        return str(parse(text))

    def log(self, name: str) -> list[RefEntry]:
        """The history of ``name``, oldest first (empty if it was never set)."""
        try:
            return parse_log(self._path(name, ".log").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []

    def set(self, name: str, root: str, note: str, *, expected: str | bool | None = True) -> RefEntry:
        """Point ``name`` at ``root`` and append the move to its history; returns the new entry.

        ``expected`` is the root the caller read before deciding (None = "the name
        must not exist yet"); pass ``True`` to skip the check. Raises
        :class:`RefConflict` if the ref moved meanwhile, :class:`RefError` for a bad
        name, :class:`~kuro_fs.errors.InvalidCID` for a bad root.
        """
        root = str(parse(root))
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked(name):
            if expected is not True:  # (unchecked, a damaged ref file is simply replaced)
                current = self.get(name)
                if current != expected:
                    raise RefConflict(f"fs {name!r} moved to {current} while this command ran (expected {expected})")
            history = self.log(name)
            entry = RefEntry(history[-1].seq + 1 if history else 0, root, note, self._now())
            self._append_log(name, entry)
            self._write_ref(name, root)
        return entry

    # ---- private

    def _path(self, name: str, suffix: str) -> Path:
        return self.directory / f"{check_name(name)}{suffix}"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        fd = os.open(self._path(name, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _append_log(self, name: str, entry: RefEntry) -> None:
        line = json.dumps(entry.to_data(), sort_keys=True) + "\n"
        path = self._path(name, ".log")
        existing = path.read_bytes() if path.exists() else b""
        if existing and not existing.endswith(b"\n"):
            # A torn line from an earlier crash (never shown by parse_log): cut it off, so
            # the log stays a sequence of whole lines.
            with open(path, "r+b") as handle:
                handle.truncate(existing.rfind(b"\n") + 1)
        with open(path, "ab") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    def _write_ref(self, name: str, root: str) -> None:
        target = self._path(name, ".ref")
        write_atomic(target, (root + "\n").encode("ascii"))
