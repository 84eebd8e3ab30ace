"""What the integration and conformance tests share: a stated context, the seeded fact, the error
hook, and readings of the deployment and the fault proxy."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from satchel.conformance.cases import ContextAnswer, load_cases
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import OBSERVATIONS, FaultProxy
from satchel.memory.client import AsyncMemoryClient

STATED_CONTEXT: dict[str, Any] = {
    "watermark": {"stored": 12, "formed": 12, "parked": 0},
    "segments": [
        {
            "segment_id": "5c2d0f6e-2c4e-5d6a-9f1e-0c3b2a1d4e5f",
            "level": 1,
            "from_offset": 1,
            "to_offset": 8,
            "covered": 8,
            "summary": "The office moved to Cork in March.",
        }
    ],
    "turns": [
        {
            "log_offset": 9,
            "occurred_at": "2026-09-01T09:00:00Z",
            "messages": [{"role": "user", "content": "Book the all-hands for Friday."}],
        }
    ],
    "characters": 140,
    "truncated": False,
}
"""A context the fault proxy serves in place of the deployment's: one segment and one turn."""

STATED_ANSWER = ContextAnswer.model_validate(STATED_CONTEXT)

MARTA = "Marta works at Ensera."


def marta(subject: str) -> dict[str, Any]:
    """The fact record `MARTA` about `subject`, for `records/assert`."""
    return {
        "idempotency_key": str(uuid.uuid4()),
        "data_subject_id": subject,
        "subject": "Marta",
        "predicate": "works_at",
        "object": "Ensera",
        "statement": MARTA,
    }


async def seed_marta(client: AsyncMemoryClient, subject: str) -> None:
    await client.assert_records([marta(subject)])


async def stored(client: AsyncMemoryClient) -> int:
    """The project's highest stored offset; -1 before its first turn (offsets start at 0)."""
    offset = (await client.freshness()).stored
    return -1 if offset is None else offset


@dataclass
class Hook:
    """An error hook keeping every failure it was told about."""

    calls: list[tuple[str, Exception]] = field(default_factory=list)

    def __call__(self, operation: str, error: Exception) -> None:
        self.calls.append((operation, error))

    @property
    def operations(self) -> list[str]:
        return [operation for operation, _ in self.calls]


def observed_bodies(proxy: FaultProxy) -> list[Any]:
    """The body of each observe request the proxy received."""
    return [exchange.body for exchange in proxy.requests("POST", OBSERVATIONS)]


def failed_cases(driver: str, deployment: Deployment) -> dict[str, list[str]]:
    """Run every shipped case through `satchel conformance --driver NAME` against the deployment;
    the failures of each case that failed (the command's exit code agrees with them)."""
    command = [sys.executable, "-m", "satchel", "conformance", "--driver", driver]
    done = subprocess.run(
        [*command, "--api", deployment.api, "--token", deployment.token],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["case"] for r in results] == [c.name for c in load_cases()], done.stderr[-2000:]
    failed = {r["case"]: r["failures"] for r in results if not r["passed"]}
    assert done.returncode == (1 if failed else 0), done.stderr[-2000:]
    return failed
