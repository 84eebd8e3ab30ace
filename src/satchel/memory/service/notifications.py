"""Notification endpoints and deliveries of one project: register (the destination checked, a new
secret made and shown once), list, disable, and list the deliveries."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.config import NotifySettings
from satchel.memory.domain import NotFound
from satchel.memory.service.destinations import Resolver, check_addresses, check_url, resolve
from satchel.memory.store import notifications as store
from satchel.memory.store.notifications import DeliveryRow, EndpointRow

SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class Registered:
    """A new endpoint and its secret (the one time it is shown)."""

    endpoint: EndpointRow
    secret: str


async def register(
    pool: AsyncConnectionPool,
    project_id: int,
    url: str,
    settings: NotifySettings,
    resolver: Resolver = resolve,
) -> Registered:
    """Check `url` against the destination policy (its form, its host, what it resolves to) and
    save it as an endpoint of the project with a new random secret."""
    await check_addresses(check_url(url, settings), settings, resolver)
    secret = secrets.token_hex(SECRET_BYTES)
    async with pool.connection() as conn:
        endpoint = await store.add_endpoint(conn, project_id, url, secret)
    return Registered(endpoint, secret)


async def endpoints(pool: AsyncConnectionPool, project_id: int) -> list[EndpointRow]:
    async with pool.connection() as conn:
        return await store.endpoints(conn, project_id)


async def disable(pool: AsyncConnectionPool, project_id: int, endpoint_id: uuid.UUID) -> None:
    """Disable the project's endpoint (no delivery is sent to it any more); 404 when the project
    has none of that id."""
    async with pool.connection() as conn:
        if not await store.disable_endpoint(conn, project_id, endpoint_id):
            raise NotFound(f"no notification endpoint {endpoint_id} in this project")


async def deliveries(pool: AsyncConnectionPool, project_id: int, limit: int) -> list[DeliveryRow]:
    async with pool.connection() as conn:
        return await store.deliveries(conn, project_id, limit)
