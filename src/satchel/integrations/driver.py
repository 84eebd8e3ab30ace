"""The driver side of the conformance protocol: one instruction per stdin line, one report per
stdout line, until stdin closes.

A driver runs a real framework with a stubbed model that records what it was handed. Anything a
driver prints for people goes to stderr; stdout carries reports only.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import TextIO

from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Message(_Wire):
    role: str
    content: str
    untrusted: bool = False


class ToolCall(_Wire):
    call: str
    result: str


class Turn(_Wire):
    history: list[Message] = Field(default_factory=list)
    user: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    synthetic: list[Message] = Field(default_factory=list)
    assistant: str = ""
    model_failure: bool = False
    compact: bool = False
    repeat: int = 0
    repeat_after_ms: int = 0


class Instruction(_Wire):
    case: str
    api: str
    token: str
    data_subject_id: str
    turn: Turn


class Report(_Wire):
    model_messages: list[Message] = Field(default_factory=list)
    fatal: bool = False
    observed: bool = False
    store_error: str = ""

    def line(self) -> str:
        return self.model_dump_json(exclude_defaults=False) + "\n"


class ModelFailure(RuntimeError):
    """What a stubbed model raises when the turn says the model call fails."""

    def __init__(self) -> None:
        super().__init__("the model call failed (stubbed failure)")


RunTurn = Callable[[Instruction], Awaitable[Report]]


async def serve(
    run_turn: RunTurn, source: TextIO | None = None, sink: TextIO | None = None
) -> None:
    """Answer each instruction line with one report line; a driver crash is a fatal report."""
    source = source or sys.stdin
    sink = sink or sys.stdout
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, source.readline)
        if not line:
            return
        if not line.strip():
            continue
        try:
            report = await run_turn(Instruction.model_validate_json(line))
        except Exception:
            traceback.print_exc(file=sys.stderr)
            report = Report(fatal=True)
        sink.write(report.line())
        sink.flush()


def main(run_turn: RunTurn) -> None:
    """Entry point for a driver module: `python -m <driver>` speaks the protocol on stdio."""
    asyncio.run(serve(run_turn))
