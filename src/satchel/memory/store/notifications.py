"""Notification rows: a project's endpoints, the deliveries saved when its formed watermark moves
forward, the sender's claim on a due delivery and what an attempt ended in. Each statement runs
inside the caller's transaction, if any."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn

# Saved beside the watermark's move, in the same statement (see `store.log.recompute_formed`):
# per live endpoint of the project, the offsets update its never-attempted delivery when one is
# free to take (not held by a sender: SKIP LOCKED, so formation never waits), else a row is added.
SAVE_DELIVERIES = (
    " forward AS (SELECT formed, stored FROM moved"
    "  WHERE formed IS NOT NULL AND (was IS NULL OR formed > was)),"
    " waiting AS (SELECT d.id FROM notification_deliveries d"
    "  WHERE d.project_id = %(p)s AND d.attempts = 0 AND d.delivered_at IS NULL"
    "  AND d.parked_at IS NULL AND EXISTS (SELECT 1 FROM forward)"
    "  FOR UPDATE SKIP LOCKED),"
    " parked AS (SELECT count(*) AS turns FROM observations"
    "  WHERE project_id = %(p)s AND parked_at IS NOT NULL AND EXISTS (SELECT 1 FROM forward)),"
    " refreshed AS (UPDATE notification_deliveries d SET formed_through = f.formed,"
    "  stored_through = f.stored, parked_turns = parked.turns, occurred_at = now()"
    "  FROM forward f, parked WHERE d.id IN (SELECT id FROM waiting) RETURNING d.endpoint_id)"
    " INSERT INTO notification_deliveries (id, project_id, endpoint_id, formed_through,"
    "  stored_through, parked_turns, occurred_at)"
    " SELECT gen_random_uuid(), %(p)s, e.id, f.formed, f.stored, parked.turns, now()"
    " FROM forward f, parked, notification_endpoints e"
    " WHERE e.project_id = %(p)s AND e.disabled_at IS NULL"
    " AND e.id NOT IN (SELECT endpoint_id FROM refreshed)"
)
ENDPOINT = "id, url, created_at, disabled_at"
DELIVERY = (
    "d.id, d.endpoint_id, e.url, d.formed_through, d.stored_through, d.attempts, d.delivered_at,"
    " d.parked_at, d.last_status, d.last_error, d.created_at"
)


@dataclass(frozen=True, slots=True)
class EndpointRow:
    id: uuid.UUID
    url: str
    created_at: datetime
    disabled_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    id: uuid.UUID
    endpoint_id: uuid.UUID
    url: str
    formed_through: int
    stored_through: int
    attempts: int
    delivered_at: datetime | None
    parked_at: datetime | None
    last_status: int | None
    last_error: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A delivery the sender holds: what it carries and where it goes."""

    id: uuid.UUID
    scope: str
    formed_through: int
    stored_through: int
    parked_turns: int
    occurred_at: datetime
    attempts: int
    url: str
    secret: str
    disabled: bool  # its endpoint was disabled after it was saved: parked, never sent


async def add_endpoint(conn: Conn, project_id: int, url: str, secret: str) -> EndpointRow:
    async with conn.cursor(row_factory=class_row(EndpointRow)) as cursor:
        await cursor.execute(
            "INSERT INTO notification_endpoints (id, project_id, url, secret)"
            f" VALUES (%s, %s, %s, %s) RETURNING {ENDPOINT}",
            (uuid.uuid4(), project_id, url, secret),
        )
        row = await cursor.fetchone()
    assert row is not None
    return row


async def endpoints(conn: Conn, project_id: int) -> list[EndpointRow]:
    """The project's endpoints, oldest first, disabled ones included."""
    async with conn.cursor(row_factory=class_row(EndpointRow)) as cursor:
        await cursor.execute(
            f"SELECT {ENDPOINT} FROM notification_endpoints WHERE project_id = %s"
            " ORDER BY created_at, id",
            (project_id,),
        )
        return await cursor.fetchall()


async def disable_endpoint(conn: Conn, project_id: int, endpoint_id: uuid.UUID) -> bool:
    """Disable the project's endpoint; false when it has none of that id. Disabling twice is
    no change (the first time stays)."""
    cursor = await conn.execute(
        "UPDATE notification_endpoints SET disabled_at = COALESCE(disabled_at, now())"
        " WHERE project_id = %s AND id = %s",
        (project_id, endpoint_id),
    )
    return cursor.rowcount == 1


async def deliveries(conn: Conn, project_id: int, limit: int) -> list[DeliveryRow]:
    """The project's newest `limit` deliveries, newest first."""
    async with conn.cursor(row_factory=class_row(DeliveryRow)) as cursor:
        await cursor.execute(
            f"SELECT {DELIVERY} FROM notification_deliveries d"
            " JOIN notification_endpoints e ON e.id = d.endpoint_id"
            " WHERE d.project_id = %s ORDER BY d.created_at DESC, d.id LIMIT %s",
            (project_id, limit),
        )
        return await cursor.fetchall()


async def claim_due(conn: Conn) -> DueDelivery | None:
    """Lock the delivery due first that no other sender holds (inside the caller's
    transaction: the lock lasts until it ends, or until the connection is lost)."""
    async with conn.cursor(row_factory=class_row(DueDelivery)) as cursor:
        await cursor.execute(
            "SELECT d.id, p.name AS scope, d.formed_through, d.stored_through, d.parked_turns,"
            " d.occurred_at, d.attempts, e.url, e.secret, e.disabled_at IS NOT NULL AS disabled"
            " FROM notification_deliveries d"
            " JOIN notification_endpoints e ON e.id = d.endpoint_id"
            " JOIN projects p ON p.id = d.project_id"
            " WHERE d.delivered_at IS NULL AND d.parked_at IS NULL"
            " AND d.next_attempt_at <= now()"
            " ORDER BY d.next_attempt_at LIMIT 1 FOR UPDATE OF d SKIP LOCKED"
        )
        return await cursor.fetchone()


async def record_attempt(
    conn: Conn,
    delivery_id: uuid.UUID,
    *,
    attempts: int,
    status: int | None,
    error: str | None,
    delivered: bool,
    parked: bool,
    wait: float,
) -> None:
    """Store what an attempt ended in: the count, the answer's status, the error's category,
    delivered, parked, or due again in `wait` seconds."""
    await conn.execute(
        "UPDATE notification_deliveries SET attempts = %s, last_status = %s, last_error = %s,"
        " delivered_at = CASE WHEN %s THEN now() END, parked_at = CASE WHEN %s THEN now() END,"
        " next_attempt_at = now() + make_interval(secs => %s) WHERE id = %s",
        (attempts, status, error, delivered, parked, wait, delivery_id),
    )


async def waiting_counts(conn: Conn) -> tuple[int, int]:
    """How many deliveries wait to be sent, and how many are parked (every project)."""
    cursor = await conn.execute(
        "SELECT count(*) FILTER (WHERE delivered_at IS NULL AND parked_at IS NULL),"
        " count(*) FILTER (WHERE parked_at IS NOT NULL) FROM notification_deliveries"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
