"""Every command has help text, and ``--help`` works for each (sqlite-utils' test_docs habit)."""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Iterator

import pytest
from cli_helpers import ROOT, Kuro

from kuro_wasm.cli.kuro import COMMANDS as TOP_COMMANDS
from kuro_wasm.cli.kuro import build_parser, main


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*prefix, name), helps.get(name) or ""
                yield from _commands(sub, (*prefix, name))


COMMANDS = sorted(_commands(build_parser()))


def test_the_issue_commands_all_exist() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    expected = {
        "demo", "guest add", "run", "cid", "receipt show", "ledger list", "car export", "car import",
        *(f"fs {op}" for op in ("put", "get", "ls", "cat", "rm", "mkdir", "mv", "log", "checkout")),
    }  # fmt: skip
    assert sorted(expected - names) == []


@pytest.mark.parametrize(("path", "help_text"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_help_text(path: tuple[str, ...], help_text: str) -> None:
    assert len(help_text.strip()) > 10, path


def test_the_top_level_command_list_is_the_tree() -> None:
    assert list(TOP_COMMANDS) == [path[0] for path, _ in _commands(build_parser()) if len(path) == 1]


@pytest.mark.parametrize("command", TOP_COMMANDS)
def test_a_one_command_tree_is_that_command_as_in_the_whole_tree(command: str) -> None:
    """``kuro COMMAND …`` builds only its own command; its help, usage and options are the whole tree's."""

    def shown(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
        return [(leaf.prog, leaf.format_help()) for leaf in _leaf_parsers(parser) if leaf.prog.split()[1] == command]

    alone = build_parser(command)
    assert [path for path, _ in _commands(alone) if len(path) == 1] == [(command,)]
    assert shown(alone) == shown(build_parser())


def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for sub in action.choices.values():
            yield from _leaf_parsers(sub)


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{leaf.prog} {action.dest}"
        for leaf in _leaf_parsers(build_parser())
        for action in leaf._actions
        if not action.help
    ]
    assert missing == []


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_prints_usage_and_exits_0(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--help"], out=io.StringIO(), err=io.StringIO()) == 0
    assert f"usage: kuro {' '.join(path)}" in capsys.readouterr().out


def test_top_level_help_names_the_first_command_and_the_home(kuro: Kuro) -> None:
    result = kuro("--help")
    assert result.returncode == 0
    assert "kuro demo" in result.stdout and "KURO_HOME" in result.stdout


def test_no_command_at_all_is_a_usage_error(kuro: Kuro) -> None:
    result = kuro()
    assert result.returncode == 2
    assert "required: COMMAND" in result.stderr


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_is_documented_in_docs_cli(path: tuple[str, ...]) -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    spelled = f"kuro {' '.join(path)}"
    grouped = len(path) == 2 and re.search(rf"kuro {path[0]} [a-z|]*\b{path[1]}\b", text) is not None
    assert spelled in text or grouped, spelled


def test_top_level_help_lists_every_command(kuro: Kuro) -> None:
    text = kuro("--help").stdout
    leaves = [" ".join(path) for path, _ in COMMANDS if _is_leaf(path)]
    assert "fs put" in leaves and "demo" in leaves
    assert [command for command in leaves if f"  kuro {command}" not in text] == []


def _is_leaf(path: tuple[str, ...]) -> bool:
    return not any(other[: len(path)] == path and len(other) > len(path) for other, _ in COMMANDS)


def test_every_long_option_is_documented_in_docs_cli() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    options = {
        option
        for leaf in _leaf_parsers(build_parser())
        for action in leaf._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert sorted(o for o in options if o not in text) == []
