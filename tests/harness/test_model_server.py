"""`satchel model-server` as a user runs it, in a real process: it serves, and a signal stops it
promptly with one line saying so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from satchel.harness.scripted import REASONING_FIELD
from satchel.providers.chat.wire import REASONING_FIELDS

STARTED_WITHIN_S = 60  # generous bounds for a loaded machine, not measurements
GONE_WITHIN_S = 2


def test_the_server_writes_the_reasoning_field_the_adapters_read_first() -> None:
    assert REASONING_FIELDS[0] == REASONING_FIELD


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_model_server_promptly_saying_so(
    tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "stdout.txt"
    with out.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "satchel", "model-server", "--game", "lamp-0001", "--port", "0"],
            env={**os.environ, "COLUMNS": "120"},
            stdout=sink,
            stderr=subprocess.PIPE,
        )
    try:
        url = _announced(process, out)
        assert httpx.get(f"{url}/models", timeout=5).status_code == 200
        process.send_signal(signum)
        code = process.wait(timeout=GONE_WITHIN_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    assert code == 0, process.stderr.read()
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == [f"serving on {url}", f"stopped ({signum.name})"]


def _announced(process: subprocess.Popen[bytes], out: Path) -> str:
    """The URL the server announced, waiting for it while the process runs."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline:
        text = out.read_text(encoding="utf-8")
        if text.startswith("serving on ") and text.endswith("\n"):
            return text.split()[2]
        assert process.poll() is None, text
        time.sleep(0.05)
    pytest.fail("the model server announced no URL")
