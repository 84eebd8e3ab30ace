"""The notification sender: a task of the worker process beside formation that sends the saved
deliveries, signed, at least once.

It claims one due delivery at a time with `FOR UPDATE SKIP LOCKED` on a connection of its own and
holds the claim while it sends, so two senders never send one delivery at once and a sender that
dies mid-send lets go with its connection (the delivery is sent again: at least once). What an
attempt ended in decides the next step (`decide`): delivered, tried again after a doubling wait,
or parked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass

import psycopg

from satchel.memory.config import NotifySettings
from satchel.memory.formation.delivery_wire import NETWORK, REFUSED, TIMEOUT, TLS, Answer, Wire
from satchel.memory.service.destinations import (
    DestinationRefused,
    Resolver,
    check_addresses,
    check_url,
    resolve,
)
from satchel.memory.store import notifications as store
from satchel.memory.store.database import Conn
from satchel.memory.store.notifications import DueDelivery

log = logging.getLogger("satchel.memory.notifier")

VERSION = "taisce-notification/v1"
SIGNATURE_VERSION = "v1"
DESTINATION_NOT_PERMITTED = "destination not permitted"
REDIRECT = "redirect not followed"
ENDPOINT_DISABLED = "endpoint disabled"  # parked unsent: its endpoint was disabled first
RETRIED_FAILURES = frozenset({TIMEOUT, REFUSED, TLS, NETWORK})
SIGNATURE_HEADERS = ("Satchel-Signature", "Taisce-Signature")
DELIVERY_HEADERS = ("Satchel-Delivery", "Taisce-Delivery")


@dataclass(frozen=True, slots=True)
class Step:
    """What an attempt leaves on its delivery: the count, delivered or parked (else due again
    in `wait` seconds), the status answered and the failure's category."""

    attempts: int
    delivered: bool
    parked: bool
    wait: float
    last_status: int | None
    last_error: str | None


def decide(attempts: int, answer: Answer, *, backoff: float, most: int) -> Step:
    """The step after attempt number `attempts + 1` ended in `answer`: 2xx delivered; 429, 5xx
    and failed connections tried again after `backoff` seconds doubling per attempt, parked after
    `most` attempts; a redirect, any other 4xx and a destination not permitted parked at once."""
    count = attempts + 1
    status = answer.status
    if status is not None and 200 <= status < 300:
        return Step(count, True, False, 0.0, status, None)
    if status is not None and 300 <= status < 400:
        error, retried = REDIRECT, False
    elif status is not None and (status == 429 or 500 <= status < 600):
        error, retried = f"destination answered {status}", True
    elif status is not None and 400 <= status < 500:
        error, retried = f"destination refused with {status}", False
    elif status is not None:
        error, retried = NETWORK, True  # no HTTP status a receiver should send
    else:
        error = answer.error or NETWORK
        retried = error in RETRIED_FAILURES
    if retried and count < most:
        return Step(count, False, False, backoff * 2 ** (count - 1), status, error)
    return Step(count, False, True, 0.0, status, error)


def body_of(delivery: DueDelivery) -> bytes:
    """The delivery's body: the project, the offsets and the parked count, compact JSON."""
    document = {
        "version": VERSION,
        "scope": delivery.scope,
        "formed_through": delivery.formed_through,
        "stored_through": delivery.stored_through,
        "parked_turns": delivery.parked_turns,
        "occurred_at": delivery.occurred_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`v1 t=<timestamp> s=<hex HMAC-SHA256 of "v1\\n" + timestamp + "\\n" + body>`."""
    material = f"{SIGNATURE_VERSION}\n{timestamp}\n".encode() + body
    digest = hmac.new(secret.encode(), material, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION} t={timestamp} s={digest}"


class Notifier:
    """Sends the due deliveries of every project of one database, one at a time."""

    def __init__(
        self, url: str, settings: NotifySettings, *, poll: float, resolver: Resolver = resolve
    ) -> None:
        """`poll`: seconds to rest when nothing is due; `resolver`: names to addresses."""
        self.url = url
        self.settings = settings
        self.poll = poll
        self.resolver = resolver
        self.wire = Wire(settings, resolver)
        self.conn: Conn | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Send until `stop` is set; after a database error the connection is opened again."""
        try:
            while not stop.is_set():
                try:
                    sent = await self.send_one()
                except psycopg.Error as exc:
                    log.warning("notification sending failed: %s", type(exc).__name__)
                    await self.close()
                    sent = False
                if not sent:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.poll)
        finally:
            await self.close()

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self.conn.close()
            self.conn = None

    async def send_one(self) -> bool:
        """Claim the delivery due first, attempt it and store the step; false when none is due."""
        if self.conn is None or self.conn.closed:
            self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        async with self.conn.transaction():
            due = await store.claim_due(self.conn)
            if due is None:
                return False
            if due.disabled:
                step = Step(due.attempts, False, True, 0.0, None, ENDPOINT_DISABLED)
            else:
                step = decide(
                    due.attempts,
                    await self.attempt(due),
                    backoff=self.settings.backoff,
                    most=self.settings.attempts,
                )
            await store.record_attempt(
                self.conn,
                due.id,
                attempts=step.attempts,
                status=step.last_status,
                error=step.last_error,
                delivered=step.delivered,
                parked=step.parked,
                wait=step.wait,
            )
        outcome = "delivered" if step.delivered else "parked" if step.parked else "to retry"
        log.info(
            "notification delivery %s attempt %d: %s%s",
            due.id,
            step.attempts,
            outcome,
            f" ({step.last_error})" if step.last_error else "",
        )
        return True

    async def attempt(self, due: DueDelivery) -> Answer:
        """Check the destination again (the settings or its DNS answer may have changed since
        it was registered), then send the signed body once."""
        try:
            destination = check_url(due.url, self.settings)
            await check_addresses(destination, self.settings, self.resolver)
        except DestinationRefused:
            return Answer(error=DESTINATION_NOT_PERMITTED)
        body = body_of(due)
        signed = signature(due.secret, int(time.time()), body)
        headers = [("Content-Type", "application/json")]
        headers += [(name, signed) for name in SIGNATURE_HEADERS]
        headers += [(name, str(due.id)) for name in DELIVERY_HEADERS]
        return await self.wire.post(due.url, body, headers)
