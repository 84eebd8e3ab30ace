"""After the README's set-up, the commands the README and docs show do run.

Every command line of a shell block, and every inline command written to be run (`.venv/bin/...`,
`bash scripts/...`), is one of three kinds:
- run here as shown, from the project root with a temporary HOME and data directory, and must exit
  0 (or the exit in EXPECTED_EXIT) having printed something;
- part of a block that needs a server the docs start: the README's memory block is run as
  written (on a free port, a fresh data directory) and the blocks that use its deployment follow;
  the harness blocks run against the scripted model server they start;
- listed in NOT_RUN with the reason (an API key, the network, a long run, a placeholder).
Assertions are on exit codes and on output being produced, not on help text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doc_pages import ROOT, inline_spans, pages, read_page, shell_invocations

NOT_RUN = {
    "bash scripts/satchel serve": "the set-up itself: it installs into .venv (what it installs is "
    "checked by test_doc_setup.py) and serves until stopped; `satchel serve` runs below",
    "bash scripts/bootstrap integrations": "the set-up itself: it installs into .venv (what it "
    "installs is checked by test_doc_setup.py)",
    "bash scripts/test": "the whole test suite, this test included",
    "bash scripts/first-health": "clones the repository and installs a fresh .venv: minutes",
    "claude mcp add": "needs Claude Code",
    ".venv/bin/satchel ...": "a placeholder for any command",
    ".venv/bin/satchel serve --role api": "a second API server and a worker alone, both run until "
    "stopped; the roles are tested in tests/memory/test_memory_cli.py",
    ".venv/bin/satchel worker": "runs until stopped; tests/memory/test_memory_cli.py",
    ".venv/bin/satchel bootstrap": "needs a PostgreSQL server of the reader's own and its "
    "administrator's URL; tests/memory/test_memory_roles.py runs it",
    ".venv/bin/satchel tokens create --database-url": "names a PostgreSQL server of the reader's "
    "own; tests/memory/test_memory_roles.py runs it",
    "pg_dump": "PostgreSQL's own backup tool, run against the reader's server",
    ".venv/bin/satchel conformance --driver": "starts a deployment and runs every case: minutes; "
    "tests/conformance runs the suite",
    ".venv/bin/satchel bench": "a benchmark: minutes to hours",
    ".venv/bin/python benchmarks/": "a benchmark: minutes to hours",
    ".venv/bin/satchel run --profiles my-profiles.yaml": "names the reader's own profile file",
    ".venv/bin/satchel rebuild": "names the reader's project, stored turns and formation model; "
    "tests/memory/test_memory_rebuild.py runs each subcommand",
}
"""Shown commands this test does not run, by how their line starts, with the reason."""

EXPECTED_EXIT = {".venv/bin/satchel": (0, 2)}
"""Commands whose exit is not 0: the bare command shows its usage (click exits 2 for it)."""

SLOW = 300
"""Seconds a shown command that starts servers may take on a busy machine."""

DEPLOYMENT_PORT = 8080
"""The port the docs' deployment blocks name; the test serves on a free one instead."""

MODEL_SERVER_PORT = 8000
"""The port of the scripted model server and of the example profile's base URL."""


def shown_commands() -> Iterator[tuple[str, str]]:
    """(where, command line) for every shown command: shell blocks' simple commands (`where` is the
    block's first line) and inline spans that run a project path."""
    for call in shell_invocations():
        if not call.program.startswith("/dev/"):  # the target of a `>/dev/null` redirection
            yield call.where, " ".join([call.program, *call.args])
    for page in pages():
        for line, span in inline_spans(page):
            if re.match(r"(\.venv/bin/|bash scripts/)", span):
                yield page.where(line), span


def block(page: str, marker: str) -> tuple[str, str]:
    """(where, text) of the shell block of `page` that contains `marker`."""
    path = ROOT / page
    (found,) = [b for b in read_page(path).blocks if b.lang == "bash" and marker in b.text]
    return f"{page}:{found.line}", found.text


def deployment_blocks() -> list[tuple[str, str]]:
    """The blocks run against the deployment, in order; the first starts it."""
    return [
        block("README.md", "satchel serve --port 8080 &"),
        block("docs/memory/mcp.md", "--read-only"),
        block("docs/memory/mcp.md", "tools/list"),
        block("docs/integrations/agent-framework.md", "docs/examples/memory_agent_framework.py"),
        block("docs/integrations/openai-agents.md", "docs/examples/memory_openai_agents.py"),
        block("docs/integrations/pydantic-ai.md", "docs/examples/memory_pydantic_ai.py"),
    ]


def model_server_blocks() -> list[tuple[str, str]]:
    return [
        block("README.md", "--game maze-0001 --offline"),
        block("docs/harness.md", "satchel model-server --game maze-0001 --game lamp-0001"),
    ]


def view_block() -> tuple[str, str]:
    """The block that serves the offline example's runs: run on the runs that example made."""
    return block("docs/harness.md", ".venv/bin/satchel view runs")


def kind(where: str, command: str) -> str:
    """Why and where a shown command runs, or why not."""
    if where == view_block()[0]:
        return "viewing"
    for start, reason in NOT_RUN.items():
        if command == start or command.startswith(start if start.endswith("/") else start + " "):
            return f"not run: {reason}"
    if where in {w for w, _ in deployment_blocks()}:
        return "deployment"
    if where in {w for w, _ in model_server_blocks()}:
        return "model server"
    return "direct"


def test_every_shown_command_is_run_or_listed_with_its_reason() -> None:
    kinds = {(where, command): kind(where, command) for where, command in shown_commands()}
    assert {"direct", "deployment", "model server", "viewing"} <= set(kinds.values())
    stale = [
        start
        for start in NOT_RUN
        if not any(k == f"not run: {NOT_RUN[start]}" for k in kinds.values())
    ]
    assert not stale, f"NOT_RUN lists commands no page shows: {stale}"


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of a shown command: no API key, a fresh HOME and data directory."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for name in ("SATCHEL_TOKEN", "SATCHEL_MEMORY_URL", "SATCHEL_DATABASE_URL", "ARC_BASE_URL"):
        env.pop(name, None)
    env.update(HOME=str(home), SATCHEL_DATA_DIR=str(home / "data"), PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def argv(command: str) -> list[str]:
    """A shown command line as this interpreter runs it (the CLI with this checkout's sources)."""
    words = command.split()
    if words[0] in (".venv/bin/satchel", "bash") and words[:2] != ["bash", "scripts/test"]:
        rest = words[1:] if words[0] == ".venv/bin/satchel" else words[2:]
        return [sys.executable, "-m", "satchel", *rest]
    if words[0] == ".venv/bin/python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"no way to run {command!r} here")


def test_the_shown_commands_that_need_nothing_run(tmp_path: Path) -> None:
    direct = sorted({c for w, c in shown_commands() if kind(w, c) == "direct"})
    assert ".venv/bin/satchel providers" in direct
    failed: list[str] = []
    for command in direct:
        done = subprocess.run(
            argv(command),
            cwd=ROOT,
            env=isolated_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=SLOW,
            check=False,
        )
        expected = EXPECTED_EXIT.get(command, (0,))
        if done.returncode not in expected or not (done.stdout or done.stderr).strip():
            failed.append(f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}")
    assert not failed, "\n".join(failed)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def on_port(text: str, port: int) -> str:
    """A deployment block with the docs' port replaced by the test's."""
    return re.sub(rf"\b{DEPLOYMENT_PORT}\b", str(port), text)


def run_block(text: str, env: dict[str, str], cwd: Path, out: Path) -> str:
    """Run a shell block with bash in its own process group, output to a file (a server it starts
    in the background keeps running, and would hold a pipe open); its stdout and stderr."""
    with out.open("w") as sink:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + text],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=SLOW,
            check=False,
        )
    printed = out.read_text()
    assert done.returncode == 0, f"exit {done.returncode}:\n{printed[-3000:]}"
    return printed


def stop_group(leader: int) -> None:
    """SIGTERM the process group this test started, then wait for it to be gone."""
    try:
        os.killpg(leader, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(leader, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(leader, signal.SIGKILL)


def test_the_deployment_blocks_run_as_written(tmp_path: Path) -> None:
    port = free_port()
    env = isolated_env(tmp_path)
    blocks = deployment_blocks()
    (first_where, first), rest = blocks[0], blocks[1:]
    token_file = tmp_path / "token"
    script = on_port(first, port)
    script += f'\nprintf %s "$TOKEN" > {token_file}\necho "$$" > {tmp_path / "group"}\n'
    server = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=ROOT,
        env=env,
        stdout=(tmp_path / "readme.out").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert server.wait(timeout=SLOW) == 0, (tmp_path / "readme.out").read_text()[-3000:]
        printed = (tmp_path / "readme.out").read_text()
        assert '"passages"' in printed and '"error"' not in printed, f"{first_where}:\n{printed}"
        env["TOKEN"] = token_file.read_text()
        for number, (where, text) in enumerate(rest):
            script = on_port(text, port)
            printed = run_block(script, env, ROOT, tmp_path / f"block-{number}.out")
            assert '"error"' not in printed, f"{where}:\n{printed}"
        env.update(SATCHEL_MEMORY_URL=f"http://127.0.0.1:{port}", SATCHEL_TOKEN=env["TOKEN"])
        langgraph = ".venv/bin/python docs/examples/memory_langgraph.py"  # named in prose only
        run_block(langgraph, env, ROOT, tmp_path / "langgraph.out")
    finally:
        stop_group(server.pid)


def test_the_harness_blocks_run_against_the_model_server_they_start(tmp_path: Path) -> None:
    if listening(MODEL_SERVER_PORT):
        pytest.skip(f"port {MODEL_SERVER_PORT}, the example profile's, is in use here")
    made: dict[str, Path] = {}
    for number, (where, text) in enumerate(model_server_blocks()):
        serving, playing = text.strip().split("\n", 1)
        model_server = subprocess.Popen(
            argv(serving.split("#")[0].strip()),
            cwd=ROOT,
            env=isolated_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not listening(MODEL_SERVER_PORT):
                assert model_server.poll() is None, f"{where}: the model server stopped"
                assert time.monotonic() < deadline, f"{where}: the model server never listened"
                time.sleep(0.2)
            runs = tmp_path / f"runs-{number}"
            runs.mkdir()
            script = playing.replace(".venv/bin/satchel", f"{sys.executable} -m satchel")
            printed = run_block(
                script, isolated_env(tmp_path), runs, tmp_path / f"run-{number}.out"
            )
            assert printed.strip(), where
            assert list((runs / "runs").glob("*/run_meta.json")), f"{where}: no run folder"
            made[where] = runs
        finally:
            stop_group(model_server.pid)
    harness_example = block("docs/harness.md", "satchel model-server")[0]
    view_where, view_text = view_block()
    viewed = view_runs(view_text.split("#")[0].strip(), made[harness_example], tmp_path)
    assert sorted(run["game"] for run in viewed["runs"]) == ["lamp-0001", "maze-0001"], view_where
    assert not viewed["skipped"], view_where


def view_runs(command: str, cwd: Path, home: Path) -> dict[str, Any]:
    """Run a shown `satchel view` command on a free port in `cwd`: its runs listing, once the
    runs page and the report page answer."""
    viewer = subprocess.Popen(
        [*argv(command), "--port", "0"],
        cwd=cwd,
        env=isolated_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert viewer.stdout is not None
        line = viewer.stdout.readline()
        found = re.fullmatch(r"(http://127\.0\.0\.1:\d+/)\n", line)
        assert found, f"{command}: printed {line!r}"
        for page in ("", "report"):
            with urllib.request.urlopen(found.group(1) + page, timeout=SLOW) as answer:
                assert answer.status == 200, page
        with urllib.request.urlopen(found.group(1) + "api/runs", timeout=SLOW) as answer:
            listing: dict[str, Any] = json.loads(answer.read())
        return listing
    finally:
        stop_group(viewer.pid)
