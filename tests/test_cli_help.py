"""The `--help` of every `satchel` command: conventional metavars, `-h`, whole sentences."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from satchel.cli import app

runner = CliRunner()

NOISE = re.compile(r"<(?:bool|str|int|float|path|list\[[^\]]*\])>|\{[a-z_]+\}|…")
"""Python type names and `{name}` placeholders typer prints unless told otherwise, and the
ellipsis of a word cut short."""

BORDER = re.compile(r"[│╭╮╰╯─]")


def commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group of the app with its path, the root first."""

    def walk(path: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
        yield path, command
        if isinstance(command, TyperGroup):
            for name, sub in sorted(command.commands.items()):
                yield from walk((*path, name), sub)

    yield from walk((), typer.main.get_command(app))


COMMANDS = [
    pytest.param(path, command, id=" ".join(path) or "satchel") for path, command in commands()
]


def rendered(args: list[str], columns: int) -> str:
    result = runner.invoke(
        app, args, prog_name="satchel", env={"COLUMNS": str(columns), "NO_COLOR": "1"}
    )
    assert result.exit_code == 0, result.output
    return result.output


def paragraphs(command: Any) -> list[str]:
    """The paragraphs of a command's help as a reader should see them: whitespace made single."""
    text = inspect.cleandoc(command.help or "").replace("`", "")
    return [" ".join(part.split()) for part in text.split("\n\n") if part.strip()]


def hard_breaks(paragraph: str, output: str, columns: int) -> list[str]:
    """Lines where `paragraph`, found in `output`, breaks although the next word had room."""
    lines = [BORDER.sub(" ", line).rstrip() for line in output.splitlines()]
    words = [(word, number) for number, line in enumerate(lines) for word in line.split()]
    wanted = paragraph.split()
    for start in range(len(words) - len(wanted) + 1):
        if [word for word, _ in words[start : start + len(wanted)]] == wanted:
            found = words[start : start + len(wanted)]
            return [
                lines[line]
                for (_, line), (word, after) in pairwise(found)
                if after != line and len(lines[line]) + 1 + len(word) <= columns - 4
            ]
    raise AssertionError(f"{paragraph!r} is not in the help:\n{output}")


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("path", "command"), COMMANDS)
def test_help_is_conventional_at_any_width(
    path: tuple[str, ...], command: Any, columns: int
) -> None:
    shown = rendered([*path, "--help"], columns)
    assert not NOISE.search(shown), NOISE.search(shown)
    assert rendered([*path, "-h"], columns) == shown
    for paragraph in paragraphs(command):
        assert hard_breaks(paragraph, shown, columns) == [], paragraph


@pytest.mark.parametrize("columns", [80, 120])
def test_each_command_summary_reads_whole_in_its_group(columns: int) -> None:
    for path, command in commands():
        if isinstance(command, TyperGroup):
            shown = rendered([*path, "--help"], columns)
            for sub in command.commands.values():
                summary = paragraphs(sub)[0]
                assert hard_breaks(summary, shown, columns) == [], summary


def test_flags_show_no_type_and_values_show_a_metavar() -> None:
    shown = rendered(["run", "--help"], 120)
    assert re.search(r"--config\s+PROFILE\b", shown)
    assert re.search(r"--game\s+GAME\b", shown)
    assert re.search(r"--list-games\s+List", shown)
    serve = rendered(["serve", "--help"], 120)
    assert re.search(r"--role\s+all\|api\|worker\b", serve)
    revoke = rendered(["tokens", "revoke", "--help"], 120)
    assert "satchel tokens revoke [OPTIONS] TOKEN" in revoke


def test_run_help_marks_config_and_game_as_required() -> None:
    shown = rendered(["run", "--help"], 120)
    assert "Usage: satchel run --config PROFILE --game GAME [OPTIONS]" in shown
    said = " ".join(BORDER.sub(" ", shown).split())
    assert said.count("(required unless --list-games or --list-configs)") == 2
