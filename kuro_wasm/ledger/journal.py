"""The ledger's private journal: an append-only file of self-checking JSON lines.

## The one decision
When SQLite cannot take a receipt (locked past its timeout, read-only, disk
full), the receipt must still reach the disk before anyone is told "pending".
Each entry is one line ``<sha256 hex of the JSON> <JSON>\\n``, written with
``O_APPEND``, then flushed and ``fsync``-ed under an exclusive ``flock``. A line
whose hash does not match its JSON (a torn last line after a crash, a bit flip)
is **ignored, never trusted**, and counted in :attr:`Journal.skipped`. Before
appending, a writer that finds the file not ending in ``\\n`` (a torn tail)
writes one first, so a torn line can never swallow the next good one.

:meth:`Journal.drain` hands every good entry to a callback under the same lock
and empties the file only if the callback returned: the callback (one SQLite
transaction) either takes all of them or none, so an entry is never dropped
between the two stores and appenders in other processes wait rather than race
the truncation.

## Effects
One file (mode ``0o600``) and its directory; ``fcntl.flock`` for threads and
processes alike. OS errors propagate as :class:`OSError` for the ledger to judge.

## Not done here
No rotation, no compaction of a journal that cannot be drained (it grows until
SQLite takes it), no recovery of unverifiable lines (they are dropped when the
journal is next drained, and counted first).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kuro_fs.atomic import fsync_dir

__all__ = ["Journal", "decode_line", "encode_line"]


def encode_line(entry: Mapping[str, Any]) -> bytes:
    """One journal line for ``entry``: ``<sha256 hex> <canonical JSON>\\n``.

    >>> encode_line({"a": 1})[:8], encode_line({"a": 1})[64:]
    (b'015abd7f', b' {"a":1}\\n')
    """
    body = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    return hashlib.sha256(body).hexdigest().encode() + b" " + body + b"\n"


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The entry a line holds, or ``None`` if the line does not check out (torn, edited, not JSON).

    >>> decode_line(encode_line({"a": 1}))
    {'a': 1}
    >>> decode_line(encode_line({"a": 1})[:-4]) is None
    True
    """
    line = line.rstrip(b"\n")
    digest, sep, body = line.partition(b" ")
    if not sep or len(digest) != 64 or hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Journal:
    """The append-only journal file at ``path`` (created on first append)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self.skipped = 0
        """Lines seen by :meth:`read`/:meth:`drain` that failed their check (torn or edited)."""

    @property
    def path(self) -> Path:
        return self._path

    def append(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` durably (write, flush, fsync). Raises OSError if the file cannot be written."""
        line = encode_line(entry)
        created = not self._path.exists()
        fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # seal a torn tail so it cannot swallow this line
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the flock
        if created:
            fsync_dir(self._path.parent)

    def read(self) -> list[dict[str, Any]]:
        """Every entry whose line checks out, in order; unverifiable lines are counted in ``skipped``."""
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return self._entries(fd)
        finally:
            os.close(fd)

    def latest(self, op_id: str) -> dict[str, Any] | None:
        """The latest entry for ``op_id`` with a receipt, or ``None`` (also if the journal cannot be read)."""
        try:
            entries = self.read()
        except OSError:
            return None
        found = [e for e in entries if e.get("op-id") == op_id and isinstance(e.get("receipt"), dict)]
        return found[-1] if found else None

    def drain(self, apply: Callable[[list[dict[str, Any]]], None]) -> int:
        """Give every good entry to ``apply``; if it returns, empty the journal. Returns how many were given.

        If ``apply`` raises, the journal is left exactly as it was and the exception propagates.
        """
        try:
            fd = os.open(self._path, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size == 0:
                return 0
            entries = self._entries(fd)
            if entries:
                apply(entries)
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return len(entries)
        finally:
            os.close(fd)

    def _entries(self, fd: int) -> list[dict[str, Any]]:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        entries: list[dict[str, Any]] = []
        for line in data.split(b"\n"):
            if not line:
                continue
            entry = decode_line(line)
            if entry is None:
                self.skipped += 1
            else:
                entries.append(entry)
        return entries
