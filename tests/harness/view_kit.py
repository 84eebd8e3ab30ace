"""What the `satchel view` tests share: a runs directory made by a real sweep against scripted
model servers (one config plain, one with a harness summary, a retry and an answer holding
markup), and `satchel view` started as a process on a free port."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.test_sweeps import environment, in_process, profiles
from satchel.harness.script import Reply, winning_script
from satchel.harness.scripted import ScriptedModelServer

GAMES = ("lamp-0001", "tapx-0001")
PLAIN, TRICKY = "plain", "tricky"
MARKUP = "<script>console.log(1)</script> <img src=x onerror=alert(1)>"
"""What the tricky config's first answer of lamp-0001 starts with: it must show as typed."""
COMPACTION = {"strategy": "harness_summary", "trigger_tokens": 12000}
WAIT_S = 30


def tricky_script() -> dict[str, tuple[Reply, ...]]:
    """The winning replies, lamp-0001's first answer preceded by a transient failure and led by
    `MARKUP` (its action in a fenced JSON block, which the parser reads)."""
    script = dict(winning_script(GAMES))
    first, *rest = script["lamp-0001"]
    marked = Reply(f"{MARKUP}\n```json\n{first.text}\n```", reasoning=f"{MARKUP} thinking")
    failing = Reply("", status=503, error_message="busy")
    script["lamp-0001"] = (failing, marked, *rest)
    return script


def make_runs(folder: Path) -> Path:
    """Both configs play both games to a win; the runs directory."""
    with ExitStack() as stack:
        plain = stack.enter_context(ScriptedModelServer(winning_script(GAMES)))
        tricky = stack.enter_context(ScriptedModelServer(tricky_script()))
        path = profiles(folder, {PLAIN: plain.base_url, TRICKY: tricky.base_url})
        entries = yaml.safe_load(path.read_text("utf-8"))
        for entry in entries:
            if entry["id"] == TRICKY:
                entry["runtime"]["compaction"] = COMPACTION
        path.write_text(yaml.safe_dump(entries), encoding="utf-8")
        ran = in_process(folder, GAMES, (PLAIN, TRICKY))
    assert ran.exit_code == 0, ran.output
    return folder / "runs"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def fetch(url: str) -> Answer:
    """A GET of `url`, whatever its status."""
    try:
        with urllib.request.urlopen(url, timeout=WAIT_S) as answer:
            return Answer(answer.status, dict(answer.headers), answer.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, dict(error.headers), error.read())


def command(runs_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "satchel", "view", str(runs_dir), *extra]


@contextmanager
def viewing(runs_dir: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`satchel view RUNS_DIR --port 0` running; the URL it printed, and the process (stopped
    with SIGTERM, or killed, when the block ends)."""
    env = environment() | {"PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    process = subprocess.Popen(
        command(runs_dir, "--port", "0", *extra),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.fullmatch(r"(http://127\.0\.0\.1:\d+/)\n", line)
        assert found, (line, process.stderr.read() if process.poll() is not None else "")
        yield found.group(1), process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
        process.communicate(timeout=WAIT_S)


def run_folders(runs_dir: Path) -> dict[tuple[str, str], str]:
    """Each run folder's name by (config, game)."""
    return {
        (config, game): path.name
        for path in runs_dir.iterdir()
        for config in (PLAIN, TRICKY)
        for game in GAMES
        if path.name.startswith(f"{game}.{config}.")
    }
