"""kuro_fs.home: the one place that decides where durable state lives.

Order: an explicit argument, then ``$KURO_HOME``, then ``~/.kuro``; every default
location is derived from it. The environment is passed in as a mapping where the
function allows it, so most tests touch no real environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kuro_fs.home import blocks_dir, ensure_home, ledger_path, module_cache_dir, refs_dir, resolve_home


def test_an_explicit_home_wins_over_the_environment(tmp_path: Path) -> None:
    assert resolve_home(tmp_path / "explicit", env={"KURO_HOME": str(tmp_path / "env")}) == tmp_path / "explicit"


def test_kuro_home_is_used_when_no_home_is_given(tmp_path: Path) -> None:
    assert resolve_home(env={"KURO_HOME": str(tmp_path / "env")}) == tmp_path / "env"


@pytest.mark.parametrize("env", [{}, {"KURO_HOME": ""}], ids=["unset", "empty"])
def test_without_kuro_home_the_home_is_dot_kuro_in_the_users_home(env: dict[str, str]) -> None:
    assert resolve_home(env=env) == Path.home() / ".kuro"


def test_a_tilde_in_the_home_is_expanded() -> None:
    assert resolve_home("~/elsewhere") == Path.home() / "elsewhere"
    assert resolve_home(env={"KURO_HOME": "~/from-env"}) == Path.home() / "from-env"


def test_the_process_environment_is_read_when_no_mapping_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KURO_HOME", str(tmp_path / "env-home"))
    assert resolve_home() == tmp_path / "env-home"
    assert blocks_dir() == tmp_path / "env-home" / "blocks"
    monkeypatch.delenv("KURO_HOME")
    assert resolve_home() == Path.home() / ".kuro"


def test_every_default_location_is_under_the_home(tmp_path: Path) -> None:
    assert blocks_dir(tmp_path) == tmp_path / "blocks"
    assert ledger_path(tmp_path) == tmp_path / "ledger.sqlite"
    assert module_cache_dir(tmp_path) == tmp_path / "cache" / "modules"
    assert refs_dir(tmp_path) == tmp_path / "refs"


def test_resolving_the_home_creates_nothing_and_ensure_home_creates_it(tmp_path: Path) -> None:
    home = tmp_path / "a" / "b"
    resolve_home(home)
    blocks_dir(home)
    assert not (tmp_path / "a").exists()
    assert ensure_home(home) == home
    assert home.is_dir()
    assert ensure_home(home) == home  # idempotent
