"""`satchel run --list-configs` and `--list-games` at any width: values whole, never folded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from satchel.harness.environments import Arena
from satchel.providers import REGISTRY, example_profiles

WIDTHS = [60, 80, 120]


def listed(flag: str, columns: int) -> list[str]:
    """The listing's lines as printed at `columns`, box drawing removed."""
    done = subprocess.run(
        [sys.executable, "-m", "satchel", "run", flag],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns)},
        timeout=120,
        check=True,
    )
    lines = [
        re.sub(r"[│┃┏┓┗┛┡┩━─┳┻╇╈┯┷┼┿╋┠┨┣┫╭╮╰╯└┘┌┐├┤┬┴]", " ", line)
        for line in done.stdout.splitlines()
    ]
    assert all(len(line.rstrip()) <= columns for line in lines), done.stdout
    return [line for line in lines if line.strip()]


def cells(line: str) -> list[str]:
    return [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]


def config_rows() -> list[tuple[str, str, str, str]]:
    return [
        (pid, p.runtime.adapter, p.runtime.strategy, str(p.request.get("model", "")))
        for pid, p in sorted(example_profiles().items())
    ]


def compaction_names() -> set[str]:
    return {name for descriptor in REGISTRY for name in descriptor.compaction}


@pytest.mark.parametrize("columns", WIDTHS)
def test_list_configs_never_folds_a_value(columns: int) -> None:
    lines = listed("--list-configs", columns)
    rows = config_rows()
    known = {value for row in rows for value in row} | compaction_names()
    headers = {"profile", "adapter", "strategy", "compaction", "model", "profiles"}
    for line in lines:
        for cell in cells(line):
            assert cell in known | headers, (cell, line)
    for profile_id, *_ in rows:
        assert sum(cell == profile_id for line in lines for cell in cells(line)) == 1


def test_list_configs_at_120_columns_shows_each_row_on_one_line() -> None:
    lines = listed("--list-configs", 120)
    for row in config_rows():
        (line,) = [line for line in lines if cells(line)[:1] == [row[0]]]
        assert set(row) <= set(cells(line)), line


def test_every_compaction_list_configs_shows_is_its_adapters() -> None:
    lines = listed("--list-configs", 250)
    header = cells(lines[1])
    assert header == ["profile", "adapter", "model", "strategy", "compaction"]
    shown = [dict(zip(header, cells(line), strict=True)) for line in lines[2:]]
    assert len(shown) == len(example_profiles())
    for row in shown:
        assert row["compaction"] in REGISTRY.get(row["adapter"]).descriptor.compaction, row
    by_profile = {row["profile"]: row["compaction"] for row in shown}
    assert by_profile["gpt-5.6-sol-responses-continuous"] == "inline"


@pytest.mark.parametrize("columns", WIDTHS)
def test_list_games_never_folds_a_value(columns: int) -> None:
    games = Arena(online=False).games()
    known = {"local games", "game", "title", "levels", "baseline actions", "tags"}
    for info in games:
        known |= {info.game_id, info.title, str(len(info.baseline_actions))}
        known |= {", ".join(map(str, info.baseline_actions)), ", ".join(info.tags)}
    lines = listed("--list-games", columns)
    for line in lines:
        for cell in cells(line):
            assert cell in known, (cell, line)
    for info in games:
        assert sum(cells(line)[:1] == [info.game_id] for line in lines) == 1


def test_the_readme_names_the_responses_compaction_as_its_descriptor_does() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `openai.responses.v1`")]
    named = set(re.findall(r"compaction ([^)]*)\)", row)[0].replace(" or ", " ").split())
    descriptor = REGISTRY.get("openai.responses.v1").descriptor
    assert {name.strip("`,") for name in named} == set(descriptor.compaction) - {"none"}
