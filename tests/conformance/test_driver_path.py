"""A driver command naming `python` runs with the interpreter that has satchel installed."""

from __future__ import annotations

import os
import sys

import pytest

from satchel.conformance.cases import load_cases
from satchel.conformance.deployment import Deployment
from satchel.conformance.runner import driver_environment, run_suite


def test_the_running_pythons_folder_comes_first_on_the_drivers_path() -> None:
    folders = driver_environment()["PATH"].split(os.pathsep)
    assert folders[0] == os.path.dirname(sys.executable)


def test_a_bare_python_driver_command_finds_satchel(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    case = next(c for c in load_cases() if c.name == "store_only_on_success")
    command = ["python", "-m", "satchel.conformance.reference"]
    [result] = run_suite(command, [case], api=deployment.api, token=deployment.token)
    assert result.passed, result.failures
