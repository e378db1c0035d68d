"""Hypothesis strategies for the pure terminal model (sessions, streams, host results, ANSI text).

Named ``model_strategies`` (not ``strategies``) so it cannot shadow another suite's module
on pytest's rootdir-relative ``sys.path``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kuro_fs.cid import raw_cid
from kuro_wasm.model.receipt import KEYS
from kuro_wasm.model.sessions import CAPABILITIES, I64_MAX, I64_MIN

EMPTY_CID = raw_cid(b"")
GUEST_CID = raw_cid(b"\x00asm\x01\x00\x00\x00")

cids = st.binary(max_size=8).map(raw_cid)
capabilities = st.sampled_from(sorted(CAPABILITIES))
grants = st.frozensets(capabilities)

guest_args = st.lists(
    st.one_of(
        st.integers(I64_MIN, I64_MAX),
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18),
    ),
    max_size=4,
)

#: A write event: (stream name, bytes).
writes = st.tuples(st.sampled_from(["stdout", "stderr"]), st.binary(max_size=12))
write_lists = st.lists(writes, max_size=40)
caps = st.integers(0, 120)

plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=6),
    st.binary(max_size=6),
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=6,
)

_declared = sorted(KEYS)
result_keys = st.one_of(
    st.sampled_from(_declared),
    st.sampled_from(_declared).map(lambda k: "kuro/" + k),
    st.sampled_from(_declared).map(lambda k: "other/" + k),
    st.text(max_size=10),
    st.sampled_from(["pid", "secret-token", "kuro.fs/root", "kuro/", "/stdout"]),
)


@st.composite
def host_results(draw: st.DrawFn, *, well_typed: bool = False) -> dict[str, Any]:
    """Whatever a host might pass as a result; always with an int exit-code and outcome consistent with it."""
    result: dict[Any, Any] = draw(st.dictionaries(result_keys, plain_values, max_size=8))
    for key in list(result):
        name = key[5:] if isinstance(key, str) and key.startswith("kuro/") else key
        if name in ("exit-code", "outcome"):
            del result[key]
        elif well_typed and name in KEYS:
            del result[key]
    code = draw(st.integers(-5, 300))
    result["exit-code"] = code
    if well_typed:
        result.update(
            draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "stdout": st.binary(max_size=8),
                        "kuro/stderr": st.binary(max_size=8),
                        "stdout-cid": cids,
                        "stdout-bytes": st.integers(0, 10**9),
                        "truncated?": st.booleans(),
                        "duration-ms": st.integers(0, 10**9),
                        "started-at": st.integers(0, 2**53),
                        "error": st.text(max_size=8),
                        "reads": st.lists(cids, max_size=3),
                        "limits": st.dictionaries(st.text(max_size=5), st.integers(0, 2**40), max_size=3),
                        "isolation": st.sampled_from(["none", "wasmtime"]),
                    },
                )
            )
        )
    return result


_escapes = st.sampled_from(
    [
        "\x1b", "\x1b[", "\x1b[31m", "\x1b[0m", "\x1b[1;4;7m", "\x1b[38;5;214m", "\x1b[48;2;1;2;3m", "\x1b[38;2",
        "\x1b[K", "\x1b[1K", "\x1b[2K", "\x1b[?25l", "\x1b[2;5r", "\x1b[H", "\x1b]8;;http://x\x1b\\", "\x1b]0;t\x07",
        "\x1b]", "\x1b(B", "\x1b7", "\x1bP", "\x1b[38:2::1:2:3m", "\r", "\b", "\t", "\n", "\x07", "\x00", "\x9b",
        "\x1b\\", ";", "m", "[",
        # digit runs past int()'s 4300-digit limit
        "\x1b[" + "7" * 4400 + "m", "\x1b[38;5;" + "1" * 4400 + "m", "\x1b[" + "2" * 4400 + "K",
    ]
)  # fmt: skip
ansi_text = st.lists(st.one_of(_escapes, st.text(max_size=6)), max_size=25).map("".join)
