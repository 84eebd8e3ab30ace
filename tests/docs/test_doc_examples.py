"""The examples run: each one that needs no deployment runs to completion, `turns_offline.py`
prints exactly what the README shows, and the README's turn-state snippet runs against the
offline example's scripted model server."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys

import pytest
from doc_pages import EXAMPLES, README, ROOT, SHELL, read_page

import satchel.providers

NEEDS_DEPLOYMENT = {
    "conformance_driver": "a conformance driver: run by `satchel conformance` (tests/conformance)",
    "memory_agent_framework": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_langgraph": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_openai_agents": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_pydantic_ai": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
}


def example_names() -> list[str]:
    return sorted(path.stem for path in EXAMPLES.glob("*.py"))


def readme_offline_output() -> str:
    """The output the README shows under its `turns_offline.py` command."""
    blocks = read_page(README).blocks
    for index, block in enumerate(blocks):
        if block.lang in SHELL and "docs/examples/turns_offline.py" in block.text:
            shown = blocks[index + 1]
            assert shown.lang == "text", "the README shows the output in a `text` block next"
            return shown.text.strip("\n") + "\n"
    raise AssertionError("the README does not run docs/examples/turns_offline.py")


def test_the_examples_left_out_here_exist() -> None:
    """Only the examples that need a deployment are left out, and each of them exists."""
    assert set(NEEDS_DEPLOYMENT) <= set(example_names())
    assert "turns_offline" in example_names()


def test_the_examples_that_need_no_server_run_to_completion() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    runs = {
        name: subprocess.Popen(
            [sys.executable, str(EXAMPLES / f"{name}.py")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in example_names()
        if name not in NEEDS_DEPLOYMENT
    }
    printed: dict[str, str] = {}
    for name, run in runs.items():
        try:
            out, err = run.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            pytest.fail(f"docs/examples/{name}.py did not finish")
        assert run.returncode == 0, f"docs/examples/{name}.py failed:\n{err}"
        assert out.strip(), f"docs/examples/{name}.py printed nothing"
        printed[name] = out
    assert printed["turns_offline"] == readme_offline_output()


def test_the_readme_turn_snippet_runs_against_the_offline_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snippet = next(
        block.text
        for block in read_page(README).blocks
        if block.lang == "python" and "Session(" in block.text
    )
    offline = runpy.run_path(str(EXAMPLES / "turns_offline.py"), run_name="turns_offline")
    monkeypatch.setattr(
        satchel.providers, "build_adapter", lambda profile, **_: offline["offline_adapter"](profile)
    )
    exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert printed.startswith("ACTION1 2 Usage(input_tokens=100, output_tokens=20,"), printed
