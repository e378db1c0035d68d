"""The terminal model: modes, grants, sessions, guest specs and the denial gate."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_strategies import EMPTY_CID, GUEST_CID, grants, guest_args

from kuro_fs.dagcbor import decode, encode
from kuro_wasm.errors import ModelError
from kuro_wasm.model.sessions import (
    ALIASES,
    CAPABILITIES,
    DENIAL_KEYS,
    DENIAL_REASONS,
    I64_MAX,
    I64_MIN,
    MODES,
    ORIGINAL_CAPABILITIES,
    Session,
    denial,
    guest,
    is_argv,
    is_guest_spec,
    session,
)

ALL_BUT_HOST = sorted(set(CAPABILITIES) - {"host/shell"})

# ---- bad input first


@pytest.mark.parametrize("mode", ["terminal-safe", "safe", "wat", "", None, "TERMINAL-REPO"])
def test_an_unknown_mode_is_a_clear_error(mode: Any) -> None:
    with pytest.raises(ModelError, match="unknown terminal mode") as info:
        session("s1", EMPTY_CID, mode)
    assert info.value.reason == "unknown-mode"
    assert info.value.reference == "invalid-kuro-model-input"


def test_no_mode_and_no_capability_is_called_safe() -> None:
    names = [*MODES, *(m.label for m in MODES.values()), *CAPABILITIES]
    assert [n for n in names if "safe" in n] == []


@pytest.mark.parametrize(
    "grant", [["fs/read", "net/send"], ["repo/delete"], ["terminal-repo"], [""], [1], "fs/read", b"fs/read", 42]
)
def test_an_unknown_capability_or_a_bare_string_grant_is_refused(grant: Any) -> None:
    with pytest.raises(ModelError) as info:
        session("s1", EMPTY_CID, grant=grant)
    assert info.value.reason == "unknown-capability"


@pytest.mark.parametrize("sid", ["", "  ", None, 7])
def test_a_session_needs_a_non_blank_id(sid: Any) -> None:
    with pytest.raises(ModelError):
        session(sid, EMPTY_CID)


@pytest.mark.parametrize("root", ["", "Qmfoo", "not-a-cid", None, b"bafk"])
def test_a_session_root_must_be_a_cid(root: Any) -> None:
    with pytest.raises(ModelError) as info:
        session("s1", root)
    assert info.value.reason == "invalid-fs-root"


def test_terminal_host_requires_a_signed_opt_in_to_build_a_session() -> None:
    with pytest.raises(ModelError, match="signed opt-in") as info:
        session("s1", EMPTY_CID, "terminal-host")
    assert info.value.reason == "signed-opt-in-required"
    with pytest.raises(ModelError):
        session("s1", EMPTY_CID, "terminal-host", signed_opt_in=1)  # type: ignore[arg-type]
    assert session("s1", EMPTY_CID, "terminal-host", signed_opt_in=True).grant == {"host/shell"}


@pytest.mark.parametrize("cid", ["", "Qmfoo", "bafkrei", "zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA", None, 5])
def test_a_guest_spec_needs_a_cid_in_kuros_profile(cid: Any) -> None:
    with pytest.raises(ModelError) as info:
        guest(cid, "run")
    assert info.value.reason == "invalid-guest-spec"


@pytest.mark.parametrize("export", ["", None, 3, b"run"])
def test_a_guest_spec_needs_a_non_empty_export_name(export: Any) -> None:
    with pytest.raises(ModelError, match="export"):
        guest(GUEST_CID, export)


def _deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize(
    "args",
    ["12", b"12", 12, None, {1: 2}, [math.nan], [math.inf], [[-math.inf]], [2**64], [I64_MIN - 1],
     [{1: 2}], ["\ud800"], [object()], [{"a": [set()]}], [_deep(70)]],
)  # fmt: skip
def test_guest_args_are_plain_data_only(args: Any) -> None:
    with pytest.raises(ModelError) as info:
        guest(GUEST_CID, "run", args)
    assert info.value.reason == "invalid-guest-spec"


def test_string_args_env_and_argv0_are_part_of_the_spec_only_when_given() -> None:
    plain = guest(GUEST_CID, "_start", ["in.txt", "-n"])
    assert set(plain) == {"kuro/type", "kuro/guest", "kuro/export", "kuro/args"}
    full = guest(GUEST_CID, "_start", ["in.txt"], env={"LANG": "C", "A": ""}, argv0="wc")
    assert full["kuro/args"] == ["in.txt"] and full["kuro/env"] == {"A": "", "LANG": "C"} and full["kuro/argv0"] == "wc"
    assert is_guest_spec(full) and is_guest_spec(plain)
    assert not is_guest_spec({**full, "kuro/env": {"A=B": "x"}})
    assert not is_guest_spec({**full, "kuro/shell": "sh"})


@pytest.mark.parametrize(
    ("env", "argv0"),
    [
        ({"": "x"}, None),
        ({"A=B": "x"}, None),
        ({"A": "x\0y"}, None),
        ({"A\0": "x"}, None),
        ({"A": 1}, None),
        ({1: "x"}, None),
        (["A=B"], None),
        ([("A", "1"), ("A", "2")], None),  # pairs are not a mapping: a name given twice cannot slip in
        ({"A": "\ud800"}, None),
        (None, "a\0b"),
        (None, 7),
        (None, "\udfff"),
    ],
)
def test_a_bad_env_or_argv0_is_refused_in_the_spec(env: Any, argv0: Any) -> None:
    with pytest.raises(ModelError) as info:
        guest(GUEST_CID, "_start", [], env=env, argv0=argv0)
    assert info.value.reason == "invalid-guest-spec"


def test_a_lone_surrogate_string_arg_is_refused() -> None:
    with pytest.raises(ModelError, match="not valid Unicode"):
        guest(GUEST_CID, "_start", ["ok", "\udc80"])


@pytest.mark.parametrize("export", ["\udcff", "run\ud800", "é\udfff"])
def test_an_export_name_that_is_not_unicode_is_refused_and_a_spec_holding_one_is_not_a_spec(export: str) -> None:
    with pytest.raises(ModelError, match="export is not valid Unicode") as info:
        guest(GUEST_CID, export)
    assert info.value.reason == "invalid-guest-spec"
    forged = {**guest(GUEST_CID, "run"), "kuro/export": export}
    assert not is_guest_spec(forged)
    assert is_guest_spec({**forged, "kuro/export": "é"})


def test_guest_args_may_be_any_plain_data_a_component_takes() -> None:
    args = [1, -2.5, "a", True, None, b"\x00", [1, [2.0]], {"k": {"v": 3.0}}, I64_MAX + 1]
    assert guest(GUEST_CID, "run", args)["kuro/args"] == [
        1,
        -2.5,
        "a",
        True,
        None,
        b"\x00",
        [1, [2]],
        {"k": {"v": 3}},
        2**63,
    ]


@pytest.mark.parametrize("path", ["", ".", "/", "../a", "a\x00b", "  ", 5, b"a.txt", "a/" + "x" * 256])
def test_a_guest_specs_fs_read_path_must_name_a_file_under_the_root(path: Any) -> None:
    with pytest.raises(ModelError) as info:
        guest(GUEST_CID, "run", fs_read_path=path)
    assert info.value.reason == "invalid-guest-spec"


def test_a_guest_spec_may_name_the_file_a_browser_guest_reads() -> None:
    spec = guest(GUEST_CID, "run", [19], fs_read_path="docs/greeting.txt")
    assert spec["kuro/fs-read-path"] == "docs/greeting.txt" and is_guest_spec(spec)
    assert "kuro/fs-read-path" not in guest(GUEST_CID, "run")


@pytest.mark.parametrize("extra", [{"kuro/fs-read-path": 5}, {"kuro/fs-read-path": ".."}, {"kuro/other": "x"}])
def test_a_spec_with_an_unknown_or_bad_optional_key_is_not_a_guest_spec(extra: dict[str, Any]) -> None:
    assert not is_guest_spec({**guest(GUEST_CID, "run"), **extra})


# ---- tables


def test_the_modes_and_their_default_grants_are_the_documented_table() -> None:
    repo = {"guest/invoke", "fs/read", "fs/ls", "stdin/read"}
    assert {name: (m.label, set(m.default_grant), m.host) for name, m in MODES.items()} == {
        "terminal-repo": ("repo", repo, False),
        "terminal-build": ("build", repo | {"fs/write", "fs/rm"}, False),
        "terminal-agent": ("agent", repo | {"agent/checkpoint"}, False),
        "terminal-host": ("host", {"host/shell"}, True),
    }


def test_every_default_grant_uses_the_capability_vocabulary() -> None:
    for mode in MODES.values():
        assert mode.default_grant <= set(CAPABILITIES)


def test_the_capability_vocabulary_is_the_hosts() -> None:
    assert set(CAPABILITIES) == {
        "guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "fs/scratch", "stdin/read", "agent/checkpoint",
        "host/shell",
    }  # fmt: skip


def test_every_capability_name_of_the_original_modes_is_understood() -> None:
    # The original kuro's mode table (kuro.terminal/terminal-modes), every default capability of every mode.
    original = {"repo/read", "repo/write", "tmp/write", "cache/read", "cache/write", "net/fetch", "log/write",
                "agent/checkpoint"}  # fmt: skip
    assert set(ORIGINAL_CAPABILITIES) == original
    for name in original:
        assert name in ALIASES or name in CAPABILITIES
    assert not set(ALIASES) & set(CAPABILITIES)  # an alias never shadows a host name
    for alias in ALIASES.values():
        assert alias.grants <= set(CAPABILITIES) and alias.meaning


def test_the_aliases_stand_for_the_documented_host_capabilities() -> None:
    assert {name: sorted(a.grants) for name, a in ALIASES.items()} == {
        "repo/read": ["fs/ls", "fs/read"],
        "repo/write": ["fs/rm", "fs/write"],
        "tmp/write": ["fs/scratch"],
        "cache/read": [],
        "cache/write": [],
        "net/fetch": [],
        "log/write": [],
    }


def test_the_originals_own_example_grant_is_accepted_and_named_in_host_capabilities() -> None:
    s = session("s1", EMPTY_CID, grant=["repo/read", "tmp/write", "log/write"])  # the original's terminal-repo
    assert s.effective_capabilities == ["fs/ls", "fs/read", "fs/scratch"]
    assert s.grant_aliases == {"log/write": [], "repo/read": ["fs/ls", "fs/read"], "tmp/write": ["fs/scratch"]}
    assert Session.from_data(s.to_data()) == s


def test_an_alias_that_grants_nothing_here_says_so_and_adds_nothing() -> None:
    s = session("s1", EMPTY_CID, grant=["guest/invoke", "net/fetch", "cache/read", "cache/write"])
    assert s.grant == {"guest/invoke"}
    assert s.grant_aliases == {"cache/read": [], "cache/write": [], "net/fetch": []}


def test_a_host_name_and_its_alias_together_give_one_grant() -> None:
    s = session("s1", EMPTY_CID, grant=["fs/read", "repo/read", "repo/read"])
    assert s.effective_capabilities == ["fs/ls", "fs/read"]
    assert s.aliases == (("repo/read", ("fs/ls", "fs/read")),)


def test_without_aliases_the_session_data_has_no_alias_key(sess: Session) -> None:
    assert "kuro/grant-aliases" not in sess.to_data()
    assert sess.grant_aliases == {}


@pytest.mark.parametrize("aliases", [{"repo/read": ["fs/read"]}, {"fs/read": ["fs/read"]}, ["repo/read"]])
def test_session_data_with_aliases_that_do_not_match_the_table_is_refused(sess: Session, aliases: Any) -> None:
    data = {**sess.to_data(), "kuro/grant-aliases": aliases}
    with pytest.raises(ModelError) as info:
        Session.from_data(data)
    assert info.value.reason == "invalid-session"


# ---- sessions


def test_the_default_mode_is_terminal_repo_with_its_default_grant(sess: Session) -> None:
    assert sess.mode == "terminal-repo"
    assert sess.cwd == "."
    assert sess.effective_capabilities == ["fs/ls", "fs/read", "guest/invoke", "stdin/read"]


@pytest.mark.parametrize("mode", ["terminal-repo", "terminal-build", "terminal-agent"])
def test_sessions_get_their_modes_default_grant(mode: str) -> None:
    assert session("s1", EMPTY_CID, mode).grant == MODES[mode].default_grant


def test_a_grant_replaces_the_modes_default_grant() -> None:
    s = session("s1", EMPTY_CID, "terminal-build", grant=("fs/read",))
    assert s.effective_capabilities == ["fs/read"]
    assert session("s1", EMPTY_CID, grant=[]).grant == frozenset()


def test_the_sorted_capabilities_are_a_new_list_each_time(sess: Session) -> None:
    first = sess.effective_capabilities  # (sorted once per grant: a caller changing its list changes no other)
    first.append("zz/not-granted")
    assert sess.effective_capabilities == ["fs/ls", "fs/read", "guest/invoke", "stdin/read"]
    by_hand = Session("s1", EMPTY_CID, "terminal-repo", {"b", "a"})  # type: ignore[arg-type]  # a set, not frozen
    assert by_hand.effective_capabilities == ["a", "b"]


def test_a_session_is_frozen(sess: Session) -> None:
    with pytest.raises(AttributeError):
        sess.mode = "terminal-build"  # type: ignore[misc]


def test_session_data_has_only_kuro_keys_and_round_trips() -> None:
    s = session("s1", EMPTY_CID, "terminal-agent", cwd="src")
    data = s.to_data()
    assert all(k.startswith("kuro/") for k in data)
    assert data["kuro/grant"] == sorted(data["kuro/grant"])
    assert Session.from_data(decode(encode(data))) == s


def test_session_data_for_terminal_host_keeps_the_opt_in() -> None:
    s = session("s1", EMPTY_CID, "terminal-host", signed_opt_in=True)
    assert Session.from_data(s.to_data()) == s


@pytest.mark.parametrize("data", [{}, {"kuro/type": "kuro/receipt"}, {"kuro/type": "kuro/session"}, None])
def test_session_data_that_is_not_a_session_is_refused(data: Any) -> None:
    with pytest.raises(ModelError):
        Session.from_data(data)


# ---- guest specs


def test_a_guest_spec_is_plain_namespaced_data(spec: dict[str, Any]) -> None:
    assert spec == {"kuro/type": "kuro/guest", "kuro/guest": GUEST_CID, "kuro/export": "run", "kuro/args": [40, 2]}


def test_integral_float_args_become_ints_and_others_stay_floats() -> None:
    args = guest(GUEST_CID, "run", (2.0, -0.0, 1.5, 3))["kuro/args"]
    assert args == [2, 0, 1.5, 3]
    assert [type(a) for a in args] == [int, int, float, int]


def test_a_whole_float_past_every_integer_parameter_stays_a_float() -> None:
    # 1e300 is a number an f64 export takes; it was refused as "does not fit in i64 or u64"
    # (past 2^53 a whole float is a float in JavaScript's dag-cbor too, so it stays one here)
    args = guest(GUEST_CID, "run", (1e300, -1e300, 2.0**64, 2.0**60, 2.0**53 - 1))["kuro/args"]
    assert args == [1e300, -1e300, 2.0**64, 2.0**60, 2**53 - 1]
    assert [type(a) for a in args] == [float, float, float, float, int]
    assert decode(encode(guest(GUEST_CID, "run", (1e300,)))) == guest(GUEST_CID, "run", (1e300,))


@settings(max_examples=100, deadline=None)
@given(guest_args)
def test_any_valid_guest_spec_is_canonical_dag_cbor(args: list[Any]) -> None:
    spec = guest(GUEST_CID, "run", args)
    assert decode(encode(spec)) == spec
    assert is_guest_spec(spec)


def test_only_the_exact_guest_shape_counts_as_a_spec(spec: dict[str, Any]) -> None:
    assert is_guest_spec(spec)
    assert not is_guest_spec({**spec, "kuro/extra": 1})
    assert not is_guest_spec({**spec, "kuro/args": (40, 2)})
    assert not is_guest_spec({**spec, "kuro/args": [40.0, 2]})
    assert not is_guest_spec({**spec, "kuro/args": [[40.0]]})  # not canonical at depth either
    assert not is_guest_spec({**spec, "kuro/args": [{"a": (1,)}]})
    assert not is_guest_spec({**spec, "kuro/type": "kuro/command"})
    assert not is_guest_spec({**spec, "kuro/guest": "Qmfoo"})
    assert not is_guest_spec({k: v for k, v in spec.items() if k != "kuro/export"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["echo", "hi"], True),
        (("ls",), True),
        ([""], True),
        ([], False),
        (["a", 1], False),
        ("echo hi", False),
        (None, False),
    ],
)
def test_an_argv_is_a_non_empty_list_or_tuple_of_strings(value: Any, expected: bool) -> None:
    assert is_argv(value) is expected


# ---- the gate


@pytest.mark.parametrize("argv", [["kbb", "-M:test"], ("sh", "-c", "true"), ["true && rm -rf /"], [""]])
@pytest.mark.parametrize("mode", ["terminal-repo", "terminal-build", "terminal-agent"])
def test_an_argv_is_refused_even_with_every_capability(argv: Any, mode: str) -> None:
    s = session("s1", EMPTY_CID, mode, grant=ALL_BUT_HOST)
    assert denial(s, argv) == {
        "kuro/type": "kuro/denial",
        "kuro/allowed?": False,
        "kuro/reason": "argv-not-a-process",
        "kuro/session-id": "s1",
        "kuro/mode": mode,
        "kuro/isolation": "none",
        "kuro/missing": [],
    }


@pytest.mark.parametrize(
    "command",
    [
        "echo hi",
        None,
        42,
        [],
        [1, 2],
        {},
        {"kuro/guest": GUEST_CID},
        {"kuro/type": "kuro/guest", "kuro/guest": GUEST_CID, "kuro/export": "", "kuro/args": []},
        {"kuro.browser/guest": GUEST_CID, "kuro.browser/export": "run"},
    ],
)
def test_anything_that_is_neither_argv_nor_guest_spec_needs_a_guest_spec(command: Any, sess: Session) -> None:
    d = denial(sess, command)
    assert d is not None
    assert d["kuro/reason"] == "guest-spec-required"


def test_a_grant_without_guest_invoke_is_missing_capabilities(spec: dict[str, Any]) -> None:
    s = session("s1", EMPTY_CID, grant=["fs/read", "fs/write"])
    d = denial(s, spec)
    assert d is not None
    assert (d["kuro/reason"], d["kuro/missing"], d["kuro/allowed?"]) == (
        "missing-capabilities",
        ["guest/invoke"],
        False,
    )


def test_terminal_host_is_refused_whatever_it_asks_and_whatever_it_holds(spec: dict[str, Any]) -> None:
    s = session("s1", EMPTY_CID, "terminal-host", grant=sorted(CAPABILITIES), signed_opt_in=True)
    for command in (spec, ["sh"], "sh", None):
        d = denial(s, command)
        assert d is not None
        assert d["kuro/reason"] == "unsupported-mode"


def test_the_decision_order_is_host_then_argv_then_spec_then_capabilities(spec: dict[str, Any]) -> None:
    nothing = session("s1", EMPTY_CID, grant=[])
    assert denial(nothing, ["ls"])["kuro/reason"] == "argv-not-a-process"  # type: ignore[index]
    assert denial(nothing, "ls")["kuro/reason"] == "guest-spec-required"  # type: ignore[index]
    assert denial(nothing, spec)["kuro/reason"] == "missing-capabilities"  # type: ignore[index]
    assert list(DENIAL_REASONS) == ["unsupported-mode", "argv-not-a-process", "guest-spec-required",
                                    "missing-capabilities"]  # fmt: skip


def test_an_allowed_guest_spec_has_no_denial(sess: Session, spec: dict[str, Any]) -> None:
    assert denial(sess, spec) is None


@settings(max_examples=100, deadline=None)
@given(grants, st.sampled_from(["terminal-repo", "terminal-build", "terminal-agent"]), st.data())
def test_every_denial_has_one_fixed_shape(grant: frozenset[str], mode: str, data: st.DataObject) -> None:
    s = session("s1", EMPTY_CID, mode, grant=grant)
    command = data.draw(st.one_of(st.just(guest(GUEST_CID, "run")), st.lists(st.text(max_size=3), max_size=2),
                                  st.none(), st.text(max_size=3)))  # fmt: skip
    d = denial(s, command)
    if d is None:
        assert "guest/invoke" in grant and is_guest_spec(command)
        return
    assert tuple(sorted(d)) == DENIAL_KEYS
    assert d["kuro/allowed?"] is False and d["kuro/reason"] in DENIAL_REASONS
    assert d["kuro/missing"] == sorted(d["kuro/missing"])
    assert decode(encode(d)) == d


def test_denial_needs_a_session(spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError):
        denial({"kuro/session-id": "s1"}, spec)  # type: ignore[arg-type]


def test_a_hand_built_session_of_no_known_mode_is_a_model_error_at_the_gate(spec: dict[str, Any]) -> None:
    # Session is a public dataclass; built by hand it skips session()'s checks, and the gate must
    # still answer with a typed error, never a KeyError.
    with pytest.raises(ModelError) as info:
        denial(Session("s1", EMPTY_CID, "terminal-safe", frozenset({"guest/invoke"})), spec)
    assert info.value.reason == "unknown-mode"


class _Str(str):
    """A str subclass: the rule keeps it a str subclass's value but not its type."""


def _rebuilds_exactly(command: Any) -> bool:
    """The rule is_guest_spec implements, written out: the spec equals guest() of its own fields, types and all."""
    from kuro_wasm.model.sessions import _GUEST_KEYS, GUEST_OPTIONAL_KEYS, _same_types

    if not isinstance(command, dict) or not _GUEST_KEYS <= set(command) <= _GUEST_KEYS | set(GUEST_OPTIONAL_KEYS):
        return False
    if command["kuro/type"] != "kuro/guest":
        return False
    try:
        rebuilt = guest(
            command["kuro/guest"], command["kuro/export"], command["kuro/args"],
            fs_read_path=command.get("kuro/fs-read-path"),
        )  # fmt: skip
    except ModelError:
        return False
    return rebuilt == command and _same_types(rebuilt["kuro/args"], command["kuro/args"])


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([GUEST_CID, "bafkreinotacid", "", "Qmfoo", 7]),
    st.sampled_from(["run", "", 5, None]),
    st.one_of(
        st.lists(st.integers(min_value=-(2**64), max_value=2**65), max_size=4),
        st.lists(
            st.one_of(st.integers(-5, 5), st.booleans(), st.floats(allow_nan=True), st.text(max_size=2)), max_size=3
        ),
        st.lists(  # strings (a component's or a WASI command's args): lone surrogates, str subclasses, among ints
            st.one_of(
                st.text(max_size=3),
                st.sampled_from(["\ud800", "a\udfff", "é", _Str("run"), 2**64 - 1, 2**64]),
            ),
            max_size=3,
        ),
        st.tuples(st.integers(0, 3)),
        st.just("not a list"),
    ),
    st.sampled_from(["kuro/guest", "kuro/other"]),
)
def test_the_quick_guest_spec_check_decides_as_the_rule(cid: Any, export: Any, args: Any, kind: str) -> None:
    command = {"kuro/type": kind, "kuro/guest": cid, "kuro/export": export, "kuro/args": args}
    assert is_guest_spec(command) is _rebuilds_exactly(command)
