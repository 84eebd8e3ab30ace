"""Where the `satchel` command writes: results on stdout, refusals in red on stderr as text."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

console = Console()


def say(message: str) -> None:
    """Print `message` on stdout as it is: brackets in it are text, never markup."""
    console.print(Text(message), soft_wrap=True)


def say_error(message: str) -> None:
    """Print `message` in red on stderr as it is: brackets in it are text, never markup."""
    Console(stderr=True).print(Text(message, style="red"), soft_wrap=True)


def fail(message: str, code: int) -> NoReturn:
    """Print `message` as an error and leave the command with exit code `code`."""
    say_error(message)
    raise typer.Exit(code)


def plain(value: Any) -> Any:
    """A report's value as JSON takes it: times in ISO 8601, ids as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value
