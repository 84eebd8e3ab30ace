"""`satchel report` on a real sweep (two configs, two games, the scripted model server): the
tables and the JSON hold the records' figures, the HTML page is self-contained with its three
plots and shows ids as text, broken folders are skipped in one line, an empty directory is
refused."""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from harness.test_sweeps import CONFIGS, GAMES, in_process, profiles, servers
from satchel import cli
from satchel.cli import app

INJECTED = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory of every config playing every game to a win."""
    folder = tmp_path_factory.mktemp("sweep")
    with ExitStack() as stack:
        started = servers(stack)
        profiles(folder, {config: server.base_url for config, server in started.items()})
        ran = in_process(folder, GAMES, CONFIGS)
    assert ran.exit_code == 0, ran.output
    return folder / "runs"


@pytest.fixture
def runs(sweep: Path, tmp_path: Path) -> Path:
    """A copy of the sweep's runs directory this test may change."""
    return Path(shutil.copytree(sweep, tmp_path / "runs"))


def report(*args: str) -> Result:
    return CliRunner().invoke(app, ["report", *args])


def metas(runs: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text("utf-8")) for path in sorted(runs.glob("*/run_meta.json"))]


def expected(runs: Path, config: str, game: str | None = None) -> dict[str, int]:
    """Wins, actions and tokens summed from the records of `config`'s runs (of `game`)."""
    chosen = [
        meta
        for meta in metas(runs)
        if meta["runtime"]["config_id"] == config and game in (None, meta["game"])
    ]
    return {
        "games": len(chosen),
        "wins": sum(meta["exit_reason"] == "WIN" for meta in chosen),
        "actions": sum(meta["actions"] for meta in chosen),
        "input tokens": sum(meta["total_usage"]["input_tokens"] for meta in chosen),
        "output tokens": sum(meta["total_usage"]["output_tokens"] for meta in chosen),
    }


def test_the_tables_show_each_configs_figures_from_the_records(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli.console, "width", 250)  # read when the CLI was imported
    result = report(str(sweep))
    assert result.exit_code == 0, result.output
    per_config, per_game = result.stdout.split("per game")
    header = next(line for line in per_config.splitlines() if "config" in line and "┃" in line)
    columns = [cell.strip() for cell in header.strip("┃ ").split("┃")]
    for config in CONFIGS:
        (row,) = [line for line in per_config.splitlines() if f"│ {config} " in line]
        cells = dict(
            zip(columns, (cell.strip() for cell in row.strip("│ ").split("│")), strict=True)
        )
        for column, value in expected(sweep, config).items():
            assert cells[column] == f"{value:,}", (column, row)
        assert f" {expected(sweep, config)['actions']} │" in row  # figures are right-aligned
        for game in GAMES:
            assert any(
                f"│ {game} " in line and f"│ {config} " in line for line in per_game.splitlines()
            )


def test_json_holds_the_same_figures_per_config_and_per_game(sweep: Path) -> None:
    result = report(str(sweep), "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert list(figures["configs"]) == list(CONFIGS)
    for config in CONFIGS:
        assert expected(sweep, config).items() <= figures["configs"][config].items()
        for game in GAMES:
            assert expected(sweep, config, game).items() <= figures["games"][game][config].items()
    assert figures["skipped"] == []


class Page(HTMLParser):
    """The tags, attributes and text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_page_is_self_contained_has_three_plots_and_shows_ids_as_text(
    runs: Path, tmp_path: Path
) -> None:
    source = next(runs.glob("lamp-0001.model-a.*"))
    injected = shutil.copytree(source, runs / "injected")
    meta = json.loads((injected / "run_meta.json").read_text("utf-8"))
    meta["game"] = meta["game_id"] = INJECTED
    meta["runtime"]["config_id"] = INJECTED
    (injected / "run_meta.json").write_text(json.dumps(meta), encoding="utf-8")
    page_file = tmp_path / "report.html"

    result = report(str(runs), "--html", str(page_file))
    assert result.exit_code == 0, result.output
    html = page_file.read_text("utf-8")
    page = Page()
    page.feed(html)
    page.close()
    tags = [tag for tag, _ in page.tags]
    assert tags.count("svg") == 3
    assert "script" not in tags
    for tag, attrs in page.tags:
        for name in ("src", "href", "xlink:href", "action"):
            value = attrs.get(name)
            assert value is None or value.startswith(("data:", "#")), (tag, attrs)
    (policy,) = [
        attrs["content"]
        for tag, attrs in page.tags
        if tag == "meta" and (attrs.get("http-equiv") or "").lower() == "content-security-policy"
    ]
    assert policy is not None and "default-src 'none'" in policy
    assert "script-src" not in policy and "style-src 'unsafe-inline'" in policy
    assert INJECTED not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert INJECTED in "".join(page.text)  # shown as the text it is
    for config in CONFIGS:
        assert config in "".join(page.text)


def test_a_broken_record_is_skipped_in_one_line_and_the_rest_reported(runs: Path) -> None:
    before = {config: expected(runs, config) for config in CONFIGS}
    broken = shutil.copytree(next(runs.glob("lamp-0001.model-a.*")), runs / "broken-run")
    (broken / "run_meta.json").write_text("{not json", encoding="utf-8")
    (runs / "notes").mkdir()
    step = next(runs.glob("tapx-0001.model-b.*")) / "step_001.json"
    step.write_text("[1, 2", encoding="utf-8")

    result = report(str(runs), "--json")
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3, result.stderr
    assert lines[0].startswith("broken-run: skipped: run_meta.json does not parse")
    assert lines[1].startswith("notes: skipped: no run_meta.json")
    assert lines[2].startswith(f"{step.parent.name}: skipped step_001.json: ")
    assert "Traceback" not in result.output
    figures = json.loads(result.stdout)
    for config in CONFIGS:  # the broken copy is not counted
        assert before[config].items() <= figures["configs"][config].items()
    assert figures["skipped"] == lines


def test_an_empty_or_missing_runs_directory_is_refused(tmp_path: Path) -> None:
    for folder in (tmp_path, tmp_path / "missing"):
        result = report(str(folder))
        assert result.exit_code == 2, result.output
        (line,) = result.output.strip().splitlines()
        assert f"'{folder}'" in line and "--runs-dir" in line
