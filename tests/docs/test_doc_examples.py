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

MEMORY_EXAMPLES = (
    "memory_agent_framework",
    "memory_langgraph",
    "memory_openai_agents",
    "memory_pydantic_ai",
)
"""Examples that talk to a memory deployment named by SATCHEL_MEMORY_URL and SATCHEL_TOKEN."""

NEEDS_DEPLOYMENT = {
    "conformance_driver": "a conformance driver: run by `satchel conformance` (tests/conformance)",
    **{name: "needs a deployment: run by test_doc_commands_run.py" for name in MEMORY_EXAMPLES},
}


def example_names() -> list[str]:
    """The examples; a module starting with `_` is a helper the examples share."""
    return sorted(path.stem for path in EXAMPLES.glob("*.py") if not path.stem.startswith("_"))


def without_deployment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for name in ("SATCHEL_MEMORY_URL", "SATCHEL_TOKEN"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("name", MEMORY_EXAMPLES)
def test_a_memory_example_without_a_token_says_how_to_get_one(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        cwd=ROOT,
        env=without_deployment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("SATCHEL_TOKEN is not set:")
    assert ".venv/bin/satchel serve" in line and "tokens create" in line
    assert done.stdout == ""


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
