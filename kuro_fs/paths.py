"""kuro.fs paths: which strings name a place in the tree, and which are refused as ``bad-path``.

## The one decision
A path is relative to the ``Fs`` root and nothing exists above that root, so
there is nowhere to escape to — but a path that *tries* is refused rather
than quietly clamped. :func:`clean_path` splits on runs of ``/``, drops ``""``
and ``"."`` segments, and refuses (``bad-path``):

* anything that is not a ``str``; an empty or whitespace-only string;
* a NUL byte anywhere (C strings stop there; the host and the guest would
  disagree about the name);
* any ``..`` segment, including absolute escapes like ``/../etc`` — the
  original kuro refused these too;
* a string that cannot be UTF-8 encoded (lone surrogates: no byte name exists);
* a segment longer than :data:`MAX_NAME_BYTES` or a path longer than
  :data:`MAX_PATH_BYTES` (UTF-8 bytes).

A leading ``/`` names the ``Fs`` root (as in the original kuro, where
``"/etc/passwd"`` is ``"etc/passwd"``): it is re-rooted, not refused, because
the root is the whole world a guest can see. ``"."``, ``"/"`` and ``"./"`` are
the root itself, the empty tuple.

## Pure
No I/O; strings in, tuples out.

## Not done here
No symlinks, no case folding, no Unicode normalisation: names compare as exact
code points (the same bytes a UnixFS link carries).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_NAME_BYTES", "MAX_PATH_BYTES", "PATH_REASONS", "clean_path", "join_path"]

MAX_NAME_BYTES: Final = 255
MAX_PATH_BYTES: Final = 4096
#: The denial reasons this module decides (a subset of ``kuro_fs.fs.DENIAL_REASONS``).
PATH_REASONS: Final = ("bad-path",)

_SEP: Final = re.compile(r"/+")


def clean_path(path: object) -> tuple[str, ...] | None:
    """The segments ``path`` names under the root, or ``None`` if it is a ``bad-path``.

    >>> clean_path("docs//notes/./a.txt")
    ('docs', 'notes', 'a.txt')
    >>> clean_path("/"), clean_path("."), clean_path("/etc/passwd")
    ((), (), ('etc', 'passwd'))
    >>> clean_path("../etc/passwd") is None, clean_path("a\\x00b") is None, clean_path("  ") is None
    (True, True, True)
    """
    if not isinstance(path, str) or path.strip() == "" or "\x00" in path:
        return None
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    if size > MAX_PATH_BYTES:
        return None
    parts = tuple(seg for seg in _SEP.split(path) if seg not in ("", "."))
    for seg in parts:
        if seg == ".." or len(seg.encode("utf-8")) > MAX_NAME_BYTES:
            return None
    return parts


def join_path(parts: tuple[str, ...]) -> str:
    """The canonical string for ``parts`` (``"."`` for the root).

    >>> join_path(()), join_path(("a", "b"))
    ('.', 'a/b')
    """
    return "/".join(parts) if parts else "."
