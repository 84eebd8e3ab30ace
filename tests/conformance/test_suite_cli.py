"""`satchel conformance` end to end: shipped cases, a standalone driver, a wrong one, bad usage."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from satchel.conformance.cases import SHIPPED_FILES, load_cases, load_suite
from satchel.conformance.deployment import Deployment
from satchel.conformance.drivers import SHIPPED

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "conformance_driver.py"
PUBLISHED_SHA256 = "fa2195c075ad6e2401be50ed4915089dde8256c3945ac653eef464b0b0dc91ea"

# Answers every turn the same way without touching memory: nothing recalled, nothing stored.
FORGETFUL = """
import json, sys
for line in sys.stdin:
    turn = json.loads(line)["turn"]
    message = {"role": "user", "content": turn["user"], "untrusted": False}
    print(json.dumps({"model_messages": [message], "fatal": False, "observed": True}), flush=True)
"""

# Answers the first turn, then exits.
QUITTER = """
import json, sys
sys.stdin.readline()
print(json.dumps({"model_messages": [], "fatal": False, "observed": False}), flush=True)
print("giving up", file=sys.stderr)
"""

# Writes chatter on stdout where only reports belong.
CHATTY = """
import sys
sys.stdin.readline()
print("loading the framework...", flush=True)
print("the framework is noisy", file=sys.stderr, flush=True)
sys.stdin.read()
"""


def satchel(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satchel", "conformance", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
        check=False,
    )


def results(stdout: str) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for line in lines:
        assert set(line) == {"case", "rule", "passed", "failures"}
    return {line["case"]: line for line in lines}


def one_off(tmp_path: Path, source: str) -> str:
    script = tmp_path / "driver.py"
    script.write_text(source)
    return f"{sys.executable} {script}"


def against(deployment: Deployment) -> list[str]:
    return ["--api", deployment.api, "--token", deployment.token]


def test_the_published_cases_ship_unchanged_and_first() -> None:
    published = SHIPPED_FILES[0]
    assert hashlib.sha256(published.read_bytes()).hexdigest() == PUBLISHED_SHA256
    names = [case.name for case in load_suite(published).cases]
    assert [case.name for case in load_cases()][: len(names)] == names
    ours = load_suite(SHIPPED_FILES[1])
    assert ours.suite == "satchel-conformance/v1"
    assert 3 <= len(ours.cases) <= 6


def test_list_drivers_names_each_shipped_driver_first() -> None:
    done = satchel("--list-drivers")
    assert done.returncode == 0
    rows = done.stdout.splitlines()
    assert [row.split()[0] for row in rows] == [driver.name for driver in SHIPPED]
    assert all(driver.about in row for driver, row in zip(SHIPPED, rows, strict=True))


def test_a_standalone_driver_passes_every_case_on_its_own_deployment() -> None:
    done = satchel("--driver", f"{sys.executable} {EXAMPLE}")
    verdicts = results(done.stdout)
    assert list(verdicts) == [case.name for case in load_cases()]
    failed = {name: v["failures"] for name, v in verdicts.items() if not v["passed"]}
    assert failed == {}, done.stderr
    assert done.returncode == 0
    assert "passed" in done.stderr


def test_a_wrong_driver_fails_and_names_the_cases(tmp_path: Path, deployment: Deployment) -> None:
    done = satchel("--driver", one_off(tmp_path, FORGETFUL), *against(deployment))
    assert done.returncode == 1
    verdicts = results(done.stdout)
    assert len(verdicts) == len(load_cases())
    silent = verdicts["write_failure_is_never_silent"]
    assert not silent["passed"]
    assert any(f.startswith("store_error: expected True") for f in silent["failures"])
    memory = verdicts["memory_is_one_untrusted_user_message"]
    assert any(f.startswith("memory_messages: expected 1, saw 0") for f in memory["failures"])
    assert "write_failure_is_never_silent" in done.stderr


def test_a_driver_that_dies_fails_the_remaining_cases(
    tmp_path: Path, deployment: Deployment
) -> None:
    done = satchel("--driver", one_off(tmp_path, QUITTER), *against(deployment))
    assert done.returncode == 1
    verdicts = list(results(done.stdout).values())
    assert len(verdicts) == len(load_cases())
    died = verdicts[1]["failures"][0]
    assert "exited before reporting" in died
    assert "giving up" in died
    assert all("the driver is gone" in v["failures"][0] for v in verdicts[2:])


def test_a_driver_that_writes_chatter_on_stdout_is_named(
    tmp_path: Path, deployment: Deployment
) -> None:
    done = satchel("--driver", one_off(tmp_path, CHATTY), *against(deployment))
    assert done.returncode == 1
    first = next(iter(results(done.stdout).values()))
    assert "not a report: 'loading the framework...'" in first["failures"][0]
    assert "the framework is noisy" in first["failures"][0]


def test_api_without_a_token_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SATCHEL_TOKEN"}
    done = satchel("--driver", "reference", "--api", "http://127.0.0.1:9", env=env)
    assert done.returncode == 2
    assert "--api needs a token" in done.stderr
    assert done.stdout == ""


def test_a_bad_cases_file_is_a_usage_error_naming_file_and_field(tmp_path: Path) -> None:
    missing = satchel("--driver", "reference", "--cases", str(tmp_path / "none.json"))
    assert missing.returncode == 2
    assert "none.json" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "suite": "x",
                "cases": [
                    {"name": "a", "rule": "r", "turn": {"user": "u"}, "expect": {"stored": "one"}}
                ],
            }
        )
    )
    done = satchel("--driver", "reference", "--cases", str(bad))
    assert done.returncode == 2
    assert "bad.json" in done.stderr
    assert "cases[0].expect.stored" in done.stderr
