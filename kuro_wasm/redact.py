"""Secret redaction and bounded previews: what the ledger may keep of a run's text.

## The one decision
Text that is persisted (an output preview, an error message) first passes through
one table of secret patterns, and every match is replaced by ``[REDACTED]`` and
counted. Redaction runs over the **whole** text before the preview is cut, so a
secret that straddles the cut is still caught (cutting first would leave a
too-short fragment no pattern recognises), and only the matches that land in the
kept preview are counted, so ``kuro/redactions`` describes what was stored.

The patterns (:data:`SECRET_PATTERNS`, one literal table) cover GitHub tokens
(``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), ``sk-…`` API
keys, AWS access key ids (``AKIA…``/``ASIA…``), Slack tokens (``xox?-``),
``Authorization: Bearer …`` / ``Bearer …`` values, ``password=`` / ``secret=`` /
``token=`` / ``api_key=`` style assignments (``=`` or ``:``, quoted or not; the
name is kept, the value goes) and PEM private keys (a ``BEGIN`` without its
``END`` is redacted to the end of the text).

## Pure
Values in, values out: ``re`` only.

## Not done here
Not a secret scanner: high-entropy strings without a known prefix, secrets split
across separate writes that a preview joins, and encodings (base64 of a key) pass
through. Environment variables and stdin are kept out by the ledger itself (never
stored), not by this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PREVIEW_CHARS", "REDACTED", "SECRET_PATTERNS", "Preview", "preview", "redact"]

REDACTED = "[REDACTED]"
PREVIEW_CHARS = 24_000

_ASSIGN_NAMES = r"password|passwd|pwd|secret|client[_-]?secret|token|access[_-]?token|api[_-]?key|access[_-]?key"

# (name, pattern, group holding the part to keep in front of the marker or None)
SECRET_PATTERNS: tuple[tuple[str, str, str | None], ...] = (
    (
        "pem-private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        None,
    ),
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", None),
    ("sk-key", r"\bsk-[A-Za-z0-9_\-]{16,}", None),
    ("aws-access-key-id", r"(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
    ("slack-token", r"xox[abposr]-[A-Za-z0-9\-]{10,}", None),
    ("bearer", r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9._~+/=\-]{8,}", "keep"),
    (
        "assignment",
        rf"(?P<keep>(?i:{_ASSIGN_NAMES})[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&]+",
        "keep",
    ),
)

_COMBINED = re.compile("|".join(f"(?:{pattern.replace('(?P<keep>', '(?:')})" for _, pattern, _ in SECRET_PATTERNS))
_COMPILED = tuple((name, re.compile(pattern), keep) for name, pattern, keep in SECRET_PATTERNS)


@dataclass(frozen=True, slots=True)
class Preview:
    """A bounded, redacted view of a text: what a ledger row keeps."""

    text: str
    redactions: int
    truncated: bool


def _replacement(match: re.Match[str]) -> str:
    matched = match.group(0)
    for _, pattern, keep in _COMPILED:
        inner = pattern.match(matched)
        if inner is not None and inner.end() == len(matched):
            return (inner.group(keep) if keep else "") + REDACTED
    return REDACTED  # pragma: no cover - the combined pattern only matches what one part matches


def _redact_positions(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    starts: list[int] = []
    last = 0
    length = 0
    for match in _COMBINED.finditer(text):
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


def redact(text: str) -> tuple[str, int]:
    """``text`` with every secret pattern replaced by ``[REDACTED]``, and how many were replaced.

    >>> redact("login password=hunter2 ok")
    ('login password=[REDACTED] ok', 1)
    >>> redact("nothing to see")
    ('nothing to see', 0)
    """
    redacted, starts = _redact_positions(text)
    return redacted, len(starts)


def preview(text: str, limit: int = PREVIEW_CHARS) -> Preview:
    """The first ``limit`` characters of the redacted ``text``.

    ``redactions`` counts the markers that start inside the kept characters;
    ``truncated`` says whether anything was cut.

    >>> preview("token=abc123 and more", limit=12)
    Preview(text='token=[REDAC', redactions=1, truncated=True)
    """
    if limit < 0:
        raise ValueError(f"preview limit must be >= 0, got {limit}")
    redacted, starts = _redact_positions(text)
    kept = redacted[:limit]
    return Preview(kept, sum(1 for start in starts if start < limit), len(redacted) > limit)
