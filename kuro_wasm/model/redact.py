"""Secret redaction and bounded previews: what the ledger may keep of a run's text.

## The one decision
Text that is persisted (an output preview, an error message) first passes through
one table of secret patterns, and every match is replaced by ``[REDACTED]`` and
counted. Redaction runs over the **whole** text before the preview is cut, so a
secret that straddles the cut is still caught (cutting first would leave a
too-short fragment no pattern recognises), and only the matches that land in the
kept preview are counted, so ``kuro/redactions`` describes what was stored.

The patterns (:data:`SECRET_PATTERNS`, one literal table) cover GitHub tokens
(``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), GitLab
``glpat-`` and npm ``npm_`` tokens, ``sk-…`` API keys, Stripe ``sk_live_``/``rk_…``
keys, Google ``AIza…`` keys, AWS access key ids (``AKIA…``/``ASIA…``), Slack
tokens (``xox?-``), JWTs (``eyJ….….…``), ``Authorization:`` header credentials
(Bearer, Basic, …) and ``Bearer …`` values, ``password=`` / ``passwd=`` /
``secret=`` / ``token=`` / ``api_key=`` style assignments (``=`` or ``:``; the
name is kept, the value goes: a quoted value up to its closing quote, spaces
included) and PEM/PGP private keys (a ``BEGIN`` without its ``END`` is
redacted to the end of the text).

A preview can also **conceal** literal text the caller names (the ledger names
the run's stdin lines and the values of secret-named environment variables):
every occurrence of one of the :data:`CONCEAL_MAX_FRAGMENTS` longest such
fragments, and every whole line equal to any of them, becomes ``[REDACTED]``
and is counted like a pattern match.

## Pure
Values in, values out: ``re`` only.

## Not done here
Not a secret scanner: high-entropy strings without a known prefix, secrets split
across separate writes that a preview joins, and encodings (base64 of a key) pass
through. Concealed fragments shorter than :data:`CONCEAL_MIN_CHARS` characters
are not concealed (they would blank ordinary words); past the
:data:`CONCEAL_MAX_FRAGMENTS` longest, a fragment is concealed only where it is
a whole line; a fragment the guest transformed (upper-cased, re-encoded) passes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CONCEAL_MAX_FRAGMENTS",
    "CONCEAL_MIN_CHARS",
    "PREVIEW_CHARS",
    "REDACTED",
    "SECRET_PATTERNS",
    "Preview",
    "conceal_fragments",
    "preview",
    "redact",
]

REDACTED = "[REDACTED]"
PREVIEW_CHARS = 24_000
#: A concealed fragment (a stdin line, a secret's value) shorter than this is left alone.
CONCEAL_MIN_CHARS = 4
#: How many fragments (the longest) are concealed wherever they occur; the rest only as whole lines.
CONCEAL_MAX_FRAGMENTS = 64

_ASSIGN_NAMES = (
    r"password|passwd|pwd|secret|client[_-]?secret|token|access[_-]?token|api[_-]?key|access[_-]?key|private[_-]?key"
)

# (name, pattern, group holding the part to keep in front of the marker or None)
SECRET_PATTERNS: tuple[tuple[str, str, str | None], ...] = (
    (
        "pem-private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        None,
    ),
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", None),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}", None),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36,}", None),
    ("sk-key", r"\bsk-[A-Za-z0-9_\-]{16,}", None),
    ("stripe-key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", None),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}", None),
    ("aws-access-key-id", r"(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
    ("slack-token", r"xox[abeposr]-[A-Za-z0-9\-]{10,}", None),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*", None),
    (
        "authorization",
        r"(?P<keep>\b(?i:authorization)[\"']?\s*[=:]\s*[\"']?(?:[A-Za-z]+\s+)?)[^\s\"',;]{4,}",
        "keep",
    ),
    ("bearer", r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9._~+/=\-]{8,}", "keep"),
    (
        "assignment",
        rf"(?P<keep>(?i:{_ASSIGN_NAMES})[\"']?\s*[=:]\s*[\"']?)"
        r"(?:(?<=\")[^\"\n]+|(?<=')[^'\n]+|(?<![\"'])[^\s\"',;&]+)",
        "keep",
    ),
)

_COMBINED_TEXT = "|".join(f"(?:{pattern.replace('(?P<keep>', '(?:')})" for _, pattern, _ in SECRET_PATTERNS)


@functools.cache
def _combined() -> re.Pattern[str]:
    """The secret patterns as one regex, compiled on first use (~10 ms: not paid by a run that redacts nothing)."""
    return re.compile(_COMBINED_TEXT)


@functools.cache
def _compiled() -> tuple[tuple[str, re.Pattern[str], str | None], ...]:
    return tuple((name, re.compile(pattern), keep) for name, pattern, keep in SECRET_PATTERNS)


# A whole line equal to a concealed fragment is first swapped for this, which the pattern then matches.
_LINE_MARK = "\x00kuro-concealed-line\x00"


@dataclass(frozen=True, slots=True)
class Preview:
    """A bounded, redacted view of a text: what a ledger row keeps."""

    text: str
    redactions: int
    truncated: bool


def conceal_fragments(texts: Iterable[str]) -> frozenset[str]:
    """The fragments to conceal for ``texts``: each distinct stripped line of at least 4 characters.

    >>> sorted(conceal_fragments(["hunter22\\n  ok\\n", "line two "]))
    ['hunter22', 'line two']
    """
    found: set[str] = set()
    for text in texts:
        for line in text.splitlines():
            core = line.strip()
            if len(core) >= CONCEAL_MIN_CHARS:
                found.add(core)
    return frozenset(found)


def _pattern(conceal: frozenset[str]) -> re.Pattern[str]:
    if not conceal:
        return _combined()
    longest = sorted(conceal, key=lambda f: (-len(f), f))[:CONCEAL_MAX_FRAGMENTS]
    literals = "|".join(re.escape(f) for f in [_LINE_MARK, *longest])
    return re.compile(f"(?P<conceal>{literals})|{_COMBINED_TEXT}")


def _mark_lines(text: str, conceal: frozenset[str]) -> str:
    """``text`` with every line whose stripped content is a concealed fragment swapped for the line mark."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        core = line.strip()
        if core in conceal:
            at = line.index(core)
            line = line[:at] + _LINE_MARK + line[at + len(core) :]
        out.append(line)
    return "".join(out)


def _replacement(match: re.Match[str]) -> str:
    if match.re is not _combined() and match.group("conceal") is not None:
        return REDACTED
    matched = match.group(0)
    for _, pattern, keep in _compiled():
        inner = pattern.match(matched)
        if inner is not None and inner.end() == len(matched):
            return (inner.group(keep) if keep else "") + REDACTED
    return REDACTED  # pragma: no cover - the combined pattern only matches what one part matches


def _redact_positions(text: str, conceal: frozenset[str]) -> tuple[str, list[int]]:
    out: list[str] = []
    starts: list[int] = []
    last = 0
    length = 0
    if conceal:
        text = _mark_lines(text, conceal)
    for match in _pattern(conceal).finditer(text):
        before = text[last : match.start()]
        out.append(before)
        length += len(before)
        replacement = _replacement(match)
        kept = len(replacement) - len(REDACTED)
        starts.append(length + kept)
        out.append(replacement)
        length += len(replacement)
        last = match.end()
    out.append(text[last:])
    return "".join(out), starts


def _fragments(conceal: Iterable[str]) -> frozenset[str]:
    return frozenset(f for f in conceal if len(f) >= CONCEAL_MIN_CHARS)


def redact(text: str, conceal: Iterable[str] = ()) -> tuple[str, int]:
    """``text`` with every secret pattern (and concealed fragment) replaced by ``[REDACTED]``, and how many.

    >>> redact("login password=hunter2 ok")
    ('login password=[REDACTED] ok', 1)
    >>> redact("nothing to see")
    ('nothing to see', 0)
    >>> redact("echo: my stdin line", conceal={"my stdin line"})
    ('echo: [REDACTED]', 1)
    """
    redacted, starts = _redact_positions(text, _fragments(conceal))
    return redacted, len(starts)


def preview(text: str, limit: int = PREVIEW_CHARS, conceal: Iterable[str] = ()) -> Preview:
    """The first ``limit`` characters of the redacted ``text`` (``conceal``: fragments to hide as well).

    ``redactions`` counts the markers that start inside the kept characters;
    ``truncated`` says whether anything was cut.

    >>> preview("token=abc123 and more", limit=12)
    Preview(text='token=[REDAC', redactions=1, truncated=True)
    """
    if limit < 0:
        raise ValueError(f"preview limit must be >= 0, got {limit}")
    redacted, starts = _redact_positions(text, _fragments(conceal))
    kept = redacted[:limit]
    return Preview(kept, sum(1 for start in starts if start < limit), len(redacted) > limit)
