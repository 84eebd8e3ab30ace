"""`satchel conformance` refuses, before the first case, a driver that cannot run and a
deployment that does not answer or refuses the token: exit 2, one message, nothing on stdout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from satchel.conformance.deployment import Deployment
from satchel.conformance.drivers import SHIPPED


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SATCHEL_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "satchel", "conformance", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a usage error."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # no case ran
    [line] = done.stderr.strip().splitlines()
    return line


def nothing_listens() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_driver_that_is_neither_shipped_nor_runnable_is_refused() -> None:
    line = refused(conformance("--driver", "langraph"))  # a misspelt shipped name
    assert "--driver 'langraph' is neither a shipped driver" in line
    assert all(driver.name in line for driver in SHIPPED)
    assert "'langraph' is not found on PATH" in line


def test_a_driver_path_that_cannot_be_run_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text("print('never run')\n")  # not executable
    line = refused(conformance("--driver", f"{script} --flag"))
    assert f"{str(script)!r} is not an executable file" in line
    line = refused(conformance("--driver", str(tmp_path / "missing")))
    assert "is not an executable file" in line


def test_an_api_where_nothing_answers_is_refused() -> None:
    api = nothing_listens()
    line = refused(conformance("--driver", "reference", "--api", api, "--token", "tsk_x"))
    assert f"--api {api}: no deployment answers there" in line


def test_an_api_that_refuses_the_token_is_refused(deployment: Deployment) -> None:
    wrong = "tsk_" + "A" * 43
    line = refused(conformance("--driver", "reference", "--api", deployment.api, "--token", wrong))
    assert f"--api {deployment.api} refuses the token (401 unauthenticated)" in line
    assert wrong not in line
