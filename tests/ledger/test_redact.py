"""Secret redaction and bounded previews (kuro_wasm.model.redact)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.model.redact import (
    CONCEAL_MAX_FRAGMENTS,
    CONCEAL_MIN_CHARS,
    REDACTED,
    conceal_fragments,
    preview,
    redact,
)

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

SECRETS = [
    ("ghp_" + "a1B2" * 9, ""),
    ("gho_" + "Zz09" * 9, ""),
    ("github_pat_" + "x" * 30, ""),
    ("glpat-" + "Ab1_" * 5, ""),
    ("npm_" + "n0P" * 12, ""),
    ("sk_live_" + "s4" * 12, ""),
    ("AIza" + "G" * 35, ""),
    (JWT, ""),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic "),
    ("passwd=letmein1", "passwd="),
    ("token=tok_9f8e7d", "token="),
    ("api_key=0a1b2c3d", "api_key="),
    ('password = "correct horse battery"', 'password = "'),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", ""),
    ("sk-proj-" + "Z" * 24, ""),
    ("AKIAIOSFODNN7EXAMPLE", ""),
    ("xoxb-123456789012-abcdef", ""),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Authorization: Bearer "),
    ("password=hunter2", "password="),
    ("DB_PASSWORD: 's3cr3t!'", "DB_PASSWORD: '"),
    ('{"token": "abc.def"}', '{"token": "'),
    ("secret=xyz", "secret="),
    ("API_KEY=0123456789", "API_KEY="),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", ""),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", ""),  # cut off before its END
]


@pytest.mark.parametrize(("secret", "kept"), SECRETS)
def test_each_secret_pattern_is_replaced_and_counted(secret: str, kept: str) -> None:
    text, count = redact(f"before {secret}\nafter")
    assert count == 1
    assert f"before {kept}{REDACTED}" in text
    assert secret not in text


@pytest.mark.parametrize(
    "text",
    [
        "hello, kuro",
        "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        "sk-short",
        "",
        "the bearer of this letter",
        "authorization required",
        "tokens: 5",
        'password=""',
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == (text, 0)


def test_a_quoted_value_is_redacted_up_to_its_closing_quote_spaces_included() -> None:
    assert redact('password = "correct horse battery" next') == ('password = "[REDACTED]" next', 1)


# ---- concealed fragments (the ledger's stdin lines and secret environment values)


def test_a_concealed_fragment_is_hidden_wherever_it_occurs_and_counted() -> None:
    text, count = redact("echo: my stdin line!\nand again my stdin line", conceal={"my stdin line"})
    assert text == "echo: [REDACTED]!\nand again [REDACTED]"
    assert count == 2


def test_a_fragment_shorter_than_the_minimum_is_not_concealed() -> None:
    assert redact("yes and no", conceal={"yes", "no"}) == ("yes and no", 0)


def test_fragments_are_the_stripped_lines_of_the_concealed_texts() -> None:
    assert conceal_fragments(["  one line  \r\nab\n\nanother\n"]) == frozenset({"one line", "another"})


def test_past_the_longest_fragments_a_fragment_is_still_concealed_as_a_whole_line() -> None:
    lines = [f"line number {i:04d}" for i in range(CONCEAL_MAX_FRAGMENTS * 3)]
    echoed = "\n".join(lines) + "\n"
    text, count = redact(echoed, conceal=conceal_fragments([echoed]))
    assert text == "[REDACTED]\n" * len(lines)
    assert count == len(lines)


def test_a_concealed_line_holding_a_secret_is_hidden_whole() -> None:
    text, count = redact("my password=hunter2 ok\n", conceal={"my password=hunter2 ok"})
    assert text == "[REDACTED]\n" and count == 1


def test_the_preview_conceals_and_counts_only_what_it_keeps() -> None:
    shown = preview("secret line A " + "x" * 50 + " secret line A", limit=30, conceal={"secret line A"})
    assert shown.text.startswith(REDACTED)
    assert "secret line A" not in shown.text
    assert shown.redactions == 1 and shown.truncated


def test_a_secret_straddling_the_preview_cut_is_still_redacted() -> None:
    token = "ghp_" + "Q" * 36
    whole = preview("x" * 23_990 + " " + token)
    assert whole.text == "x" * 23_990 + " " + REDACTED[:9]  # cut after redacting, never before
    assert whole.redactions == 1 and whole.truncated is True
    glued = preview("x" * 23_995 + token)
    assert glued.text == "x" * 23_995 + REDACTED[:5]


def test_only_redactions_inside_the_preview_are_counted() -> None:
    shown = preview("password=a " + "y" * 100 + " password=b", limit=50)
    assert shown.redactions == 1


def test_a_negative_preview_limit_is_refused() -> None:
    with pytest.raises(ValueError):
        preview("x", limit=-1)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(0, 400))
def test_a_preview_is_never_longer_than_its_limit_and_is_a_prefix_of_the_redacted_text(text: str, limit: int) -> None:
    shown = preview(text, limit)
    full, total = redact(text)
    assert len(shown.text) <= limit
    assert full.startswith(shown.text)
    assert shown.truncated == (len(full) > limit)
    assert 0 <= shown.redactions <= total


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=50), st.sampled_from([s for s, _ in SECRETS]), st.text(max_size=50))
def test_a_known_secret_never_survives_redaction_whatever_surrounds_it(before: str, secret: str, after: str) -> None:
    text, count = redact(f"{before} {secret}\n{after}")
    assert secret not in text
    assert count >= 1


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=40),
    st.text(min_size=CONCEAL_MIN_CHARS, max_size=20).filter(lambda f: REDACTED not in f),
    st.text(max_size=40),
)
def test_a_concealed_fragment_never_survives_whatever_surrounds_it(before: str, fragment: str, after: str) -> None:
    text, count = redact(before + fragment + after, conceal={fragment})
    assert fragment not in text
    assert count >= 1
