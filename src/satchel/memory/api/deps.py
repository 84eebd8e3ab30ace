"""What a handler is given by the application: the typed parts it serves with, as one dependency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from psycopg_pool import AsyncConnectionPool

from satchel.memory.api.gate import Gate
from satchel.memory.config import MemorySettings
from satchel.memory.store.appends import Appender


@dataclass(frozen=True)
class Deployment:
    """The parts an application owns for its lifetime, shared by every request."""

    pool: AsyncConnectionPool
    appender: Appender
    settings: MemorySettings
    gate: Gate


async def deployment(request: Request) -> Deployment:
    """The application's parts (set once by `create_app`); a coroutine, so FastAPI calls it on
    the event loop rather than in its thread pool."""
    parts = request.app.state.deployment
    assert isinstance(parts, Deployment)
    return parts


Parts = Annotated[Deployment, Depends(deployment)]
