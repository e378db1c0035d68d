"""Secret redaction and bounded previews (kuro_wasm.redact)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.redact import REDACTED, preview, redact

SECRETS = [
    ("ghp_" + "a1B2" * 9, ""),
    ("github_pat_" + "x" * 30, ""),
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
    "text", ["hello, kuro", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "sk-short", ""]
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == (text, 0)


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
