"""The driver side of the conformance protocol: one instruction per stdin line, one report per
stdout line, until stdin closes.

A driver runs a real framework with a stubbed model that records what it was handed. Anything a
driver prints for people goes to stderr; stdout carries reports only.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from satchel.integrations.core import MemoryStoreFailed
from satchel.memory.client import AsyncMemoryClient


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DriverMessage(_Wire):
    """One message as the driver protocol carries it (a turn's history, a report's model
    messages): its role, its text, and whether the framework marked it untrusted."""

    role: str
    content: str
    untrusted: bool = False


class ToolCall(_Wire):
    call: str
    result: str


class Turn(_Wire):
    history: list[DriverMessage] = Field(default_factory=list)
    user: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    synthetic: list[DriverMessage] = Field(default_factory=list)
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
    model_messages: list[DriverMessage] = Field(default_factory=list)
    fatal: bool = False
    observed: bool = False
    store_error: str = ""

    def line(self) -> str:
        return self.model_dump_json(exclude_defaults=False) + "\n"


class ModelFailure(RuntimeError):
    """What a stubbed model raises when the turn says the model call fails."""

    def __init__(self) -> None:
        super().__init__("the model call failed (stubbed failure)")


class RecordingClient(AsyncMemoryClient):
    """The async client, keeping the arguments of every observation the integration attempted."""

    def __init__(self, base_url: str, token: str) -> None:
        super().__init__(base_url, token)
        self.observations: list[dict[str, Any]] = []

    @property
    def observed(self) -> bool:
        """Whether the integration attempted to store the turn."""
        return bool(self.observations)

    async def observe(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        idempotency_key: str | None = None,
        data_subject_id: str | None = None,
        occurred_at: str | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "idempotency_key": idempotency_key,
            "messages": messages,
            "data_subject_id": data_subject_id,
            "occurred_at": occurred_at,
        }
        self.observations.append(request)
        return await super().observe(**request)


@contextmanager
def turn_outcome(report: Report, driver: str) -> Iterator[None]:
    """Note in `report` how the turn ended: a store failure with its message; any failure fatal."""
    try:
        yield
    except MemoryStoreFailed as failure:
        report.fatal, report.store_error = True, str(failure)
    except Exception as error:
        print(f"{driver}: the turn failed: {error!r}", file=sys.stderr, flush=True)
        report.fatal = True


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
