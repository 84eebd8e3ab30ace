"""The `satchel` command: help, version, the adapter listing, benchmark lookup, error text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from satchel import __version__
from satchel.cli import app, bench
from satchel.cli.output import fail

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "providers" in result.output
    assert "bench" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"satchel {__version__}"


def test_providers_lists_every_adapter_with_its_descriptor() -> None:
    result = runner.invoke(app, ["providers"], env={"COLUMNS": "60"})
    assert result.exit_code == 0
    for adapter_id in ("openai.chat_completions.v1", "open_source.chat_completions.v1"):
        assert adapter_id in result.output
    for label in ("provider", "API surface", "implementation", "strategies", "review status"):
        assert label in result.output


def test_providers_json_has_the_descriptor_fields() -> None:
    result = runner.invoke(app, ["providers", "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {row["adapter_id"] for row in rows} == {
        "anthropic.messages.v1",
        "deepseek.chat_completions.v1",
        "google.interactions.v1",
        "openai.chat_completions.v1",
        "open_source.chat_completions.v1",
        "openai.responses.v1",
        "xai.responses.v1",
    }
    for row in rows:
        assert set(row) >= {
            "provider",
            "api_surface",
            "implementation_path",
            "version",
            "strategies",
            "review_status",
            "example_profiles",
        }
    listed = {row["adapter_id"]: row["example_profiles"] for row in rows}
    assert listed["anthropic.messages.v1"] == ["claude-opus-5-messages-native"]
    assert listed["deepseek.chat_completions.v1"] == ["deepseek-thinking-continuous"]
    assert listed["google.interactions.v1"] == ["gemini-3.5-pro-interactions-continuous"]
    assert listed["xai.responses.v1"] == ["grok-4.6-xai-responses-native"]


def test_unknown_benchmark_is_refused_with_the_known_names() -> None:
    result = runner.invoke(app, ["bench", "no-such-benchmark"])
    assert result.exit_code == 2
    assert "unknown benchmark" in result.output


def test_benchmarks_outside_a_clone_are_refused_saying_where_they_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "SOURCE_TREE", tmp_path / "site-packages")
    for args in (["bench", "memory"], ["bench", "--list"], ["bench"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        (line,) = result.output.splitlines()
        assert "the benchmarks run from a clone of the satchel repository" in line
        assert "bash scripts/bootstrap" in line


def test_error_text_keeps_its_brackets() -> None:
    result = runner.invoke(app, ["run", "--config", "nope[harness]", "--game", "lamp-0001"])
    assert result.exit_code == 2
    assert result.output.startswith("no profile 'nope[harness]' (known: ")


def test_a_refusal_is_one_line_of_text_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as refused:
        fail("install it: pip install 'satchel[harness]'", 2)
    assert refused.value.exit_code == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == ["install it: pip install 'satchel[harness]'"]


def test_module_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "satchel", "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in done.stdout


def satchel(
    *args: str, cwd: Path | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command in a child process; `code` runs first in it (to hide a module)."""
    start = f"{code}\n" if code else ""
    program = f"{start}import sys\nfrom satchel.cli import main\nsys.argv[0] = 'satchel'\nmain()"
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "80"},
        timeout=120,
        check=False,
    )


def test_an_unknown_role_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    done = satchel("serve", "--role", "everything", "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2
    assert done.stdout == ""
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", done.stderr).split())
    assert "Invalid value for '--role'" in said
    assert "'everything' is not one of 'all', 'api', 'worker'" in said
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        ((), "--config PROFILE and --game GAME"),
        (("--game", "lamp-0001"), "--config PROFILE"),
        (("--config", "qwen3-open-weight-continuous"), "--game GAME"),
    ],
)
def test_a_run_without_its_required_options_names_them(
    tmp_path: Path, args: tuple[str, ...], missing: str
) -> None:
    done = satchel("run", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"satchel run needs {missing}" in line
    assert "--list-configs" in line or "--list-games" in line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_extra_is_named_with_its_brackets() -> None:
    done = satchel("run", "--list-games", code="import sys\nsys.modules['arc_agi'] = None")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "satchel run needs the harness extra: pip install 'satchel[harness]'"
    ]


def test_a_framework_driver_without_its_extra_is_named_before_anything_starts() -> None:
    done = satchel(
        "conformance", "--driver", "langgraph", code="import sys\nsys.modules['langgraph'] = None"
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "satchel conformance --driver langgraph needs the integrations extra: "
        "pip install 'satchel[integrations]'"
    ]
