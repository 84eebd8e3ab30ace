"""The shipped drivers: a name, the module that speaks the protocol, and what it integrates."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class ShippedDriver:
    name: str
    module: str
    about: str
    extra: str | None = None  # the install extra its framework comes with

    def command(self) -> list[str]:
        return [sys.executable, "-m", self.module]


SHIPPED = (
    ShippedDriver(
        "reference", "satchel.conformance.reference", "framework-free reference integration"
    ),
    ShippedDriver(
        "langgraph",
        "satchel.integrations.langgraph.driver",
        "LangGraph / LangChain agent middleware",
        "integrations",
    ),
    ShippedDriver(
        "agent-framework",
        "satchel.integrations.agent_framework.driver",
        "Microsoft Agent Framework context provider with compaction",
        "integrations",
    ),
    ShippedDriver(
        "openai-agents",
        "satchel.integrations.openai_agents.driver",
        "OpenAI Agents SDK session",
        "integrations",
    ),
    ShippedDriver(
        "pydantic-ai",
        "satchel.integrations.pydantic_ai.driver",
        "PydanticAI history processor and observer",
        "integrations",
    ),
)


def shipped(name: str) -> ShippedDriver | None:
    """The shipped driver of this name, if there is one."""
    return next((driver for driver in SHIPPED if driver.name == name), None)


def driver_command(name_or_command: str) -> list[str]:
    """A shipped driver's command by its name, or any other command line as given."""
    if (driver := shipped(name_or_command)) is not None:
        return driver.command()
    command = shlex.split(name_or_command)
    if not command:
        raise ValueError("--driver is empty: give a shipped driver's name or a command line")
    return command
