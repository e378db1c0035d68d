"""How a receipt is shown to a person (kuro_wasm.model.summary): pure, so tested without a CLI."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.model import ansi
from kuro_wasm.model.summary import coloured, denial_text, is_denial, receipt_text, sgr, size

CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
ONLY_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _receipt(**extra: object) -> dict[str, object]:
    return {
        "kuro/type": "kuro/receipt", "kuro/outcome": "ok", "kuro/exit-code": 0, "kuro/guest": CID,
        "kuro/export": "run", "kuro/args": [1, 2.5], "kuro/mode": "terminal-repo", "kuro/isolation": "wasmtime",
        "kuro/stdout-bytes": 12, "kuro/stderr-bytes": 0, "kuro/duration-ms": 3, **extra,
    }  # fmt: skip


def test_the_first_line_is_the_answer_outcome_and_exit_code() -> None:
    first = receipt_text(_receipt(), "bafyreiabc").splitlines()[0]
    assert first == "receipt bafyreiabc  ok · exit code 0 · 3 ms"


def test_what_ran_and_its_isolation_are_shown() -> None:
    assert f"ran {CID} run(1, 2.5) · mode terminal-repo · isolation wasmtime" in receipt_text(_receipt())


def test_truncation_says_how_much_was_dropped() -> None:
    text = receipt_text(_receipt(**{"kuro/truncated?": True, "kuro/dropped-bytes": 2048}))
    assert "truncated, 2.0 KiB dropped" in text


def test_an_untruncated_receipt_does_not_mention_truncation() -> None:
    assert "truncated" not in receipt_text(_receipt())


def test_each_refused_import_call_gets_a_line() -> None:
    denials = [{"kuro/import": "fs_write", "kuro/path": "a.txt", "kuro/missing": "fs/write"}]
    assert "  refused fs_write a.txt (missing fs/write)" in receipt_text(_receipt(**{"kuro/denials": denials}))


def test_each_block_the_store_could_not_supply_gets_a_line_saying_it_was_the_hosts() -> None:
    faults = [{"kuro/cid": "bafkreiexample", "kuro/fault": "corrupt"}, {"kuro/fault": "missing", "kuro/count": 3}]
    text = receipt_text(_receipt(**{"kuro/store-faults": faults}))
    assert "  store fault bafkreiexample (corrupt): the guest saw an I/O error" in text
    assert "  store fault (missing) ×3: the guest saw an I/O error" in text
    assert "store fault" not in receipt_text(_receipt())


def test_an_fs_values_own_grant_is_shown_when_narrower() -> None:
    assert "  fs grant fs/read" in receipt_text(_receipt(**{"kuro/fs-grant": ["fs/read"]}))
    assert "fs grant" not in receipt_text(_receipt())


def test_a_trap_is_shown_on_one_line() -> None:
    text = receipt_text(_receipt(**{"kuro/trap": {"kind": "unreachable", "message": "wasm\ntrap"}}))
    assert "  trap: kind=unreachable · message=wasm trap" in text.splitlines()


def test_a_ledger_answer_without_a_receipt_shows_its_status() -> None:
    assert receipt_text({"kuro/status": "unknown", "kuro/op-id": "op-9"}) == "operation op-9  status unknown"


def test_a_denial_explains_itself_and_what_to_do() -> None:
    value = {"kuro/allowed?": False, "kuro/reason": "argv-not-a-process", "kuro/session-id": "s", "kuro/mode": "m"}
    assert is_denial(value)
    text = denial_text(value, ["ls", "-la"], "bafyreixyz")
    assert text.splitlines()[0] == "denied: argv-not-a-process: `ls -la` looks like a shell command"
    assert "kuro guest add" in text and "receipt bafyreixyz" in text


def test_the_denied_argv_is_quoted_as_a_shell_would_need_it() -> None:
    value = {"kuro/allowed?": False, "kuro/reason": "argv-not-a-process"}
    first = denial_text(value, ["git", "commit", "-m", "two words"]).splitlines()[0]
    assert first == "denied: argv-not-a-process: `git commit -m 'two words'` looks like a shell command"


def test_missing_capabilities_are_listed_with_the_grant_hint() -> None:
    value = {"kuro/allowed?": False, "kuro/reason": "missing-capabilities", "kuro/missing": ["guest/invoke"]}
    text = denial_text(value)
    assert "(missing guest/invoke)" in text and "--grant replaces" in text


def test_sizes_are_for_people() -> None:
    assert [size(0), size(1023), size(1024), size(5 << 20), size("x")] == ["0 B", "1023 B", "1.0 KiB", "5.0 MiB", "?"]


def test_sgr_rebuilds_every_style_kind() -> None:
    assert sgr({"bold": True, "underline": True, "fg": "bright-red", "bg": {"index": 200}}) == "\x1b[0;1;4;91;48;5;200m"
    assert sgr({"fg": {"rgb": [1, 2, 3]}}) == "\x1b[0;38;2;1;2;3m"
    assert sgr({"fg": "no-such-colour", "bg": {"rgb": [1, 2, 999]}}) == "\x1b[0m"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \n\r\t\x07\x1b[];0123456789mKHJ?PX\\~")), max_size=80))
def test_coloured_output_holds_no_escape_but_the_sgr_we_build(text: str) -> None:
    rendered = coloured(ansi.lines(text))
    assert "\x1b" not in ONLY_SGR.sub("", rendered)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_coloured_output_keeps_the_plain_text(text: str) -> None:
    lines = ansi.lines(text)
    assert ONLY_SGR.sub("", coloured(lines)) == "".join("".join(s["text"] for s in line) + "\n" for line in lines)


def test_a_receipt_without_a_cid_says_so_and_a_ledger_answer_names_its_own() -> None:
    assert receipt_text(_receipt()).splitlines()[0].startswith("receipt (not stored as a block)  ok")
    named = _receipt(**{"kuro/receipt-cid": "bafyreiown"})
    assert receipt_text(named).splitlines()[0].startswith("receipt bafyreiown  ok")


HOSTILE = "\x1b]0;pwned\x07a\nforged line\r\x9b2J\x7f\u202eb"
#: Controls a terminal acts on (C0 but the newline between lines, DEL, C1) and the bidi overrides.
ACTS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@given(st.sampled_from(["kuro/export", "kuro/args", "kuro/denials", "kuro/error", "kuro/trap", "kuro/reads"]))
def test_no_string_a_guest_or_a_stored_receipt_supplies_can_act_on_the_terminal(key: str) -> None:
    # A guest names the path of a refused call (recorded before the path is checked), a trap's
    # backtrace carries the module's own function names, and a receipt read back may say anything:
    # the summary goes to a terminal, so none of it may retitle the window or forge a line.
    value: object = {
        "kuro/export": HOSTILE,
        "kuro/args": [HOSTILE],
        "kuro/denials": [{"kuro/import": "read", "kuro/capability": "fs/read", "kuro/path": HOSTILE}],
        "kuro/error": HOSTILE,
        "kuro/trap": {"kind": "unreachable", "message": HOSTILE},
        "kuro/reads": [HOSTILE],
    }[key]
    plain_lines = receipt_text(_receipt(**{key: "x" if isinstance(value, str) else value and ["x"]})).count("\n")
    text = receipt_text(_receipt(**{key: value}))
    assert not ACTS.search(text)
    assert text.count("\n") == plain_lines  # no forged line
    assert "\\x1b" in text  # shown, as evidence, not dropped


def test_a_denial_from_a_stored_record_cannot_act_on_the_terminal() -> None:
    text = denial_text(
        {"kuro/reason": HOSTILE, "kuro/missing": [HOSTILE], "kuro/session-id": HOSTILE, "kuro/mode": HOSTILE},
        [HOSTILE],
    )
    assert not ACTS.search(text)
    assert text.count("\n") == denial_text({"kuro/reason": "x", "kuro/missing": ["x"]}, ["x"]).count("\n")
