"""A worker remembers the limits, session and engine key of its last runs: always the value the model would build."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import ModelError
from kuro_wasm.host import engine
from kuro_wasm.host.worker.serve import _engine, _limits, _session
from kuro_wasm.model.limits import LIMIT_NAMES, Limits
from kuro_wasm.model.sessions import session

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**64), st.sampled_from([0.5, "1", [1]]))


def _built(options: dict[str, Any], timeout_ms: int) -> Limits | str:
    try:
        return Limits.from_options({**options, "timeout_ms": timeout_ms})
    except (ModelError, TypeError) as exc:
        return type(exc).__name__


def _remembered(options: dict[str, Any], timeout_ms: int) -> Limits | str:
    try:
        return _limits(options, timeout_ms)
    except (ModelError, TypeError) as exc:
        return type(exc).__name__


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(LIMIT_NAMES), _VALUES), st.integers(1, 10)), max_size=8))
def test_remembered_limits_are_what_the_model_builds_or_refuses(runs: list[tuple[dict[str, Any], int]]) -> None:
    for options, timeout_ms in runs:
        built = _built(options, timeout_ms)
        remembered = _remembered(options, timeout_ms)
        assert remembered == built
        if isinstance(built, Limits):
            assert [type(getattr(remembered, n)) for n in LIMIT_NAMES] == [type(getattr(built, n)) for n in LIMIT_NAMES]


def test_a_bool_limit_never_finds_the_int_one_remembered() -> None:
    base = Limits().as_options()
    assert _limits({**base, "fuel": 1}, 5).fuel == 1
    with pytest.raises(ModelError):
        _limits({**base, "fuel": True}, 5)


def test_the_remembered_session_is_the_one_its_data_names() -> None:
    store = MemoryBlockStore()
    first = session("s-one", Fs.empty(store).root)
    second = session("s-two", Fs.empty(store).root, "terminal-build")
    for made in (first, second, first, first, second):
        assert _session(made.to_data()) == made
    assert _session(dict(first.to_data())) == first  # equal data, another dict
    with pytest.raises(ModelError):
        _session({**first.to_data(), "kuro/type": "kuro/other"})
    assert _session(first.to_data()) == first


@pytest.mark.parametrize("fuel", [False, True])
def test_the_remembered_engine_key_is_the_engines(fuel: bool) -> None:
    config, key = _engine(fuel)
    assert (config, key) == (engine.EngineConfig(fuel=fuel), engine.engine_key(engine.EngineConfig(fuel=fuel)))
