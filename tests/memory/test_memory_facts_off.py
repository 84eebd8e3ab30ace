"""Without a formation model no facts form, and the deployment says so: recall lists
`facts_not_formed` in `degraded`, `serve` and `worker` say `facts: off` when they start, and the
client page's first example waits for the passage it shows and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from formation_kit import claim, observe, passes, with_model
from memory_kit import LiveServer
from memory_process import SATCHEL, Served, environment, stop_embedded
from model_server import ModelServer
from records_kit import api

from satchel.memory.config import MemorySettings

CLIENT_PAGE = Path(__file__).parents[2] / "docs" / "memory" / "client.md"
FACTS_OFF = "facts: off (no SATCHEL_FORMATION_MODEL and SATCHEL_FORMATION_BASE_URL)"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-facts-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def recall(client: httpx.Client, question: str, **controls: Any) -> dict[str, Any]:
    answer = client.post("/v1/recalls", json={"question": question, **controls})
    assert answer.status_code == 200, answer.text
    bundle: dict[str, Any] = answer.json()
    return bundle


def test_recall_says_facts_were_not_formed_where_no_model_formed_the_turns(
    http: httpx.Client,
) -> None:
    assert recall(http, "Where does Ann live?")["degraded"] == []  # nothing stored yet
    observe(http, "ann", ("user", "I moved to Lisbon."))  # formed at once, with no model
    assert recall(http, "Where does Ann live?")["degraded"] == ["facts_not_formed"]
    mine = recall(http, "Where does Ann live?", data_subject_id="ann")
    assert mine["degraded"] == ["facts_not_formed"] and mine["facts"] == []
    assert recall(http, "Where does Ben live?", data_subject_id="ben")["degraded"] == []
    assert recall(http, "Lisbon", surfaces=["passages"])["degraded"] == []  # no facts asked


def test_turns_formed_by_a_model_leave_degraded_empty(db_url: str) -> None:
    settings = MemorySettings(form_on_store=False)  # stored turns wait for the worker
    server = LiveServer(db_url, settings)
    server.start()
    try:
        with api(server) as client, ModelServer() as model:
            said = claim("I", "lives_in", "Lisbon", "I live in Lisbon")
            model.respond = lambda _: {"claims": [said]}
            observe(client, "ann", ("user", "I live in Lisbon."))
            [tally] = passes(db_url, with_model(settings, model), model)
            assert tally.formed == 1
            bundle = recall(client, "Where do I live?", data_subject_id="ann")
    finally:
        server.stop()
    assert bundle["degraded"] == []


def without_model(database_url: str) -> dict[str, str]:
    env = environment(database_url)
    for name in ("SATCHEL_FORMATION_MODEL", "SATCHEL_FORMATION_BASE_URL"):
        env.pop(name, None)
    return env


def first_example(page: str) -> tuple[str, str]:
    """The page's first Python block and the line the text block after it says it prints."""
    code = re.search(r"```python\n(.*?)```", page, re.S)
    printed = re.search(r"it prints\n\n```text\n(.*?)\n```", page, re.S)
    assert code is not None and printed is not None
    return code.group(1), printed.group(1)


def test_serve_says_facts_are_off_and_the_client_example_prints_what_its_page_says(
    live_server: LiveServer, data_dir: Path
) -> None:
    server = Served(data_dir, without_model(live_server.database_url))
    try:
        server.wait_ready()
        code, expected = first_example(CLIENT_PAGE.read_text())
        code = code.replace("http://127.0.0.1:8080", server.base_url)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {"token": live_server.token("alpha")})
    finally:
        assert server.interrupt() == 0
    assert printed.getvalue().strip() == expected
    assert FACTS_OFF in server.output()


def worker_says(env: dict[str, str], line: str, log: Path) -> None:
    """Start `satchel worker` with `env`, wait for `line` in its output, stop it with Ctrl-C."""
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(SATCHEL), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while line not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, log.read_text()


def test_worker_says_facts_are_off(live_server: LiveServer, data_dir: Path) -> None:
    worker_says(without_model(live_server.database_url), FACTS_OFF, data_dir.parent / "w.log")


def test_worker_names_its_model_as_written(live_server: LiveServer, data_dir: Path) -> None:
    """A model name with brackets is printed as text, not read as markup."""
    env = {
        **without_model(live_server.database_url),
        "SATCHEL_FORMATION_MODEL": "smollm2[q8]",
        "SATCHEL_FORMATION_BASE_URL": "http://127.0.0.1:9/v1",
    }
    line = "facts: formed by the model 'smollm2[q8]'"
    worker_says(env, line, data_dir.parent / "w.log")
