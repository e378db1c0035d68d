"""kuro.fs paths: which strings name a place in the tree, and which are refused as ``bad-path``.

## The one decision
A path is relative to the ``Fs`` root and nothing exists above that root, so
there is nowhere to escape to — but a path that *tries* is refused rather
than quietly clamped. :func:`clean_path` splits on runs of ``/``, drops ``""``
and ``"."`` segments, and refuses (``bad-path``):

* anything that is not a ``str``; an empty or whitespace-only string;
* a NUL byte anywhere (C strings stop there; the host and the guest would
  disagree about the name);
* a **control character** in any segment: C0 (U+0001–U+001F), DEL (U+007F)
  or C1 (U+0080–U+009F). A name is shown to people and to guests (``fs_ls``
  answers ``name\\n`` lines), and ``evil\\nfake/`` would list a phantom entry
  while ``\\x1b]0;…`` would retitle the terminal that prints it: such a name
  lies about the tree, so it cannot be created;
* a segment that is only whitespace (it lists as nothing);
* any ``..`` segment, including absolute escapes like ``/../etc`` — the
  original kuro refused these too;
* a string that cannot be UTF-8 encoded (lone surrogates: no byte name exists);
* a segment longer than :data:`MAX_NAME_BYTES` or a path longer than
  :data:`MAX_PATH_BYTES` (UTF-8 bytes).

A leading ``/`` names the ``Fs`` root (as in the original kuro, where
``"/etc/passwd"`` is ``"etc/passwd"``): it is re-rooted, not refused, because
the root is the whole world a guest can see. ``"."``, ``"/"`` and ``"./"`` are
the root itself, the empty tuple. A path that ends in ``/`` (or ``/.``) names
a *directory* (:func:`names_a_directory`): ``greeting.txt/`` is not the file,
and :mod:`kuro_fs.fs` refuses it ``not-a-directory`` where a file is found or
would be put, as POSIX does (``ENOTDIR``).

Stored names are checked by the looser :func:`stored_name_ok`: a directory
written before control characters were refused may hold such a name, and it
stays readable (listed with its exact name, reachable through its CID) rather
than making the whole directory unreadable. Anything that prints a name uses
:func:`escape_name`, whose output has no control character and tells every
name apart.

## Pure
No I/O; strings in, tuples out.

## Not done here
No symlinks, no case folding, no Unicode normalisation: names compare as exact
code points (the same bytes a UnixFS link carries). Bidirectional overrides and
look-alike characters are not refused (:func:`escape_name` shows the overrides escaped).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "PATH_REASONS",
    "clean_path",
    "escape_name",
    "has_control",
    "join_path",
    "names_a_directory",
    "stored_name_ok",
]

MAX_NAME_BYTES: Final = 255
MAX_PATH_BYTES: Final = 4096
#: The denial reasons this module decides (a subset of ``kuro_fs.fs.DENIAL_REASONS``).
PATH_REASONS: Final = ("bad-path",)

_SEP: Final = re.compile(r"/+")
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
_DIR_SUFFIX: Final = re.compile(r"(?:^|/)\.?$")
# Also the bidirectional controls (U+061C, U+200E/F, U+202A–E, U+2066–9): they reorder a printed line unseen.
_SHOWN: Final = re.compile("[\x00-\x1f\x7f-\x9f\\\\\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def stored_name_ok(name: object) -> bool:
    """True if ``name`` may be an entry of a stored directory (the rule for *reading* blocks).

    A non-empty ``str`` that is not only whitespace, not ``.`` or ``..``, holds no
    ``/`` and no NUL, is UTF-8 encodable and at most :data:`MAX_NAME_BYTES` bytes.
    Control characters other than NUL are allowed here, and only here (see the module docstring).

    >>> stored_name_ok("a.txt"), stored_name_ok("old\\nname"), stored_name_ok("a/b"), stored_name_ok("..")
    (True, True, False, False)
    """
    if not isinstance(name, str) or name in (".", "..") or name.strip() == "" or "/" in name or "\x00" in name:
        return False
    try:
        return len(name.encode("utf-8")) <= MAX_NAME_BYTES
    except UnicodeEncodeError:
        return False


def clean_path(path: object) -> tuple[str, ...] | None:
    """The segments ``path`` names under the root, or ``None`` if it is a ``bad-path``.

    >>> clean_path("docs//notes/./a.txt")
    ('docs', 'notes', 'a.txt')
    >>> clean_path("/"), clean_path("."), clean_path("/etc/passwd")
    ((), (), ('etc', 'passwd'))
    >>> clean_path("../etc/passwd") is None, clean_path("a\\x00b") is None, clean_path("  ") is None
    (True, True, True)
    >>> clean_path("evil\\nfake/x") is None, clean_path("a/\\x1b]0;title") is None, clean_path("a/ /b") is None
    (True, True, True)
    """
    if not isinstance(path, str) or path.strip() == "" or _CONTROL.search(path):
        return None
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    if size > MAX_PATH_BYTES:
        return None
    parts = tuple(seg for seg in _SEP.split(path) if seg not in ("", "."))
    for seg in parts:
        if seg == ".." or seg.strip() == "" or len(seg.encode("utf-8")) > MAX_NAME_BYTES:
            return None
    return parts


def names_a_directory(path: str) -> bool:
    """True if ``path`` ends in ``/`` or ``/.`` (or is ``.``): it can only name a directory.

    >>> names_a_directory("greeting.txt/"), names_a_directory("a/."), names_a_directory("a"), names_a_directory("a.")
    (True, True, False, False)
    """
    return _DIR_SUFFIX.search(path) is not None


def has_control(name: str) -> bool:
    """True if ``name`` holds a control character (C0, DEL, C1): no path can name it, printing it raw could lie.

    >>> has_control("old\\nname"), has_control("plain.txt")
    (True, False)
    """
    return _CONTROL.search(name) is not None


def escape_name(name: str) -> str:
    """``name`` as it may be printed: control characters as ``\\xNN``, bidirectional controls
    (which reorder the printed line unseen) as ``\\uNNNN``, and ``\\`` as ``\\\\``.

    The result holds no control character, and two different names never print
    the same (the backslash is escaped too). A name that needs no escaping is
    returned as is.

    >>> escape_name("evil\\nfake"), escape_name("a\\\\b"), escape_name("\\x9b2J"), escape_name("plain.txt")
    ('evil\\\\x0afake', 'a\\\\\\\\b', '\\\\x9b2J', 'plain.txt')
    """
    return _SHOWN.sub(_shown, name)


def _shown(m: re.Match[str]) -> str:
    c = m.group()
    if c == "\\":
        return "\\\\"
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def join_path(parts: tuple[str, ...]) -> str:
    """The canonical string for ``parts`` (``"."`` for the root).

    >>> join_path(()), join_path(("a", "b"))
    ('.', 'a/b')
    """
    return "/".join(parts) if parts else "."
