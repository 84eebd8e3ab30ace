"""The destination policy: refusals at registration, before each delivery, and on the address
actually connected to (the sender's network backend, with a resolver that changes its answer)."""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from memory_kit import LiveServer
from notify_kit import Receiver, deliveries, form, notify_settings, observe, send_until
from notify_kit import settled as all_settled
from psycopg_pool import AsyncConnectionPool

from satchel.memory.config import MemorySettings, NotifySettings, SettingError
from satchel.memory.formation.delivery_wire import Wire
from satchel.memory.formation.notifier import Notifier
from satchel.memory.service import notifications
from satchel.memory.service.destinations import Address
from satchel.memory.store.notifications import DueDelivery

SECRET_PART = "hunter2"


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    receiver = Receiver(tmp_path)
    try:
        yield receiver
    finally:
        receiver.close()


@pytest.fixture
def memory_settings(receiver: Receiver) -> MemorySettings:
    """Destinations localhost and the public-looking hooks.example.com, private not permitted."""
    notify = notify_settings(
        receiver, destinations=("localhost", ".example.com"), permit_private=False
    )
    return MemorySettings(form_on_store=False, notify=notify)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://localhost/hook", "resolves to an address only this deployment can reach"),
        ("https://127.0.0.1/hook", "'127.0.0.1' is not an allowed destination"),
        ("https://hooks.elsewhere.org/hook", "'hooks.elsewhere.org' is not an allowed"),
        ("https://example.com/hook", "'example.com' is not an allowed destination"),
        ("http://hooks.example.com/hook", "must use https"),
        (f"https://me:{SECRET_PART}@hooks.example.com/hook", "carries credentials"),
        ("https:///hook", "has no host"),
        ("", "must use https"),
    ],
)
def test_registration_refuses_a_destination_the_policy_does_not_allow(
    http: httpx.Client, url: str, says: str
) -> None:
    answer = http.post("/v1/notifications/endpoints/register", json={"url": url})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_destination"
    assert says in error["message"] and SECRET_PART not in error["message"]
    assert http.post("/v1/notifications/endpoints/list", json={}).json() == {"endpoints": []}


def test_a_destination_no_longer_allowed_is_final_before_sending(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver, tmp_path: Path
) -> None:
    permitted = notify_settings(receiver)
    # Registered while private destinations were permitted (directly: this server refuses).
    asyncio.run(_register_directly(live_server, receiver.url, permitted))
    observe(http)
    form(live_server.database_url)
    send_until(
        live_server.database_url, notify_settings(receiver, permit_private=False), all_settled(http)
    )
    [row] = deliveries(http)
    assert (row["attempts"], row["last_error"]) == (1, "destination not permitted")
    assert "parked_at" in row and receiver.received == []


async def _register_directly(live_server: LiveServer, url: str, settings: NotifySettings) -> None:
    async with AsyncConnectionPool(live_server.database_url, open=False) as pool:
        project = await _project_id(pool)
        await notifications.register(pool, project, url, settings)


async def _project_id(pool: AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        cursor = await conn.execute("SELECT id FROM projects WHERE name = 'alpha'")
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


class Rebinding:
    """A resolver that answers a public address first, then a loopback one."""

    def __init__(self) -> None:
        self.answers = [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("127.0.0.1")]
        self.asked = 0

    async def __call__(self, host: str, port: int) -> list[Address]:
        self.asked += 1
        return [self.answers[min(self.asked, len(self.answers)) - 1]]


def test_the_backend_connects_only_to_an_address_it_checked(receiver: Receiver) -> None:
    async def loopback(host: str, port: int) -> list[Address]:
        return [ipaddress.ip_address("127.0.0.1")]

    settings = notify_settings(receiver, permit_private=False)
    answer = asyncio.run(Wire(settings, loopback).post(receiver.url, b"{}", []))
    assert answer.error == "address not permitted"
    assert receiver.received == []
    permitted = asyncio.run(Wire(notify_settings(receiver), loopback).post(receiver.url, b"{}", []))
    assert permitted.status == 200 and len(receiver.received) == 1


def test_a_destination_resolving_private_before_delivery_is_not_permitted(
    receiver: Receiver,
) -> None:
    async def private(host: str, port: int) -> list[Address]:
        return [ipaddress.ip_address("10.1.2.3")]

    settings = notify_settings(receiver, permit_private=False)
    notifier = Notifier("postgresql://unused", settings, poll=0.01, resolver=private)
    due = _due(receiver.url)
    assert asyncio.run(notifier.attempt(due)).error == "destination not permitted"
    rebinding = Notifier("postgresql://unused", settings, poll=0.01, resolver=Rebinding())
    assert asyncio.run(rebinding.attempt(due)).error == "address not permitted"
    assert receiver.received == []


def _due(url: str) -> DueDelivery:
    return DueDelivery(
        uuid.uuid4(), "alpha", 1, 1, 0, datetime.now(UTC), 0, url, "s" * 64, disabled=False
    )


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("SATCHEL_NOTIFY_DESTINATIONS", "https://hooks.example.com", "SATCHEL_NOTIFY_DESTINATIONS"),
        ("SATCHEL_NOTIFY_PERMIT_PRIVATE", "maybe", "SATCHEL_NOTIFY_PERMIT_PRIVATE"),
        ("SATCHEL_NOTIFY_BACKOFF", "-1", "SATCHEL_NOTIFY_BACKOFF"),
        ("SATCHEL_NOTIFY_ATTEMPTS", "0", "SATCHEL_NOTIFY_ATTEMPTS"),
        ("SATCHEL_NOTIFY_TIMEOUT", "soon", "SATCHEL_NOTIFY_TIMEOUT"),
        ("SATCHEL_NOTIFY_CA_FILE", "/no/such/ca.pem", "SATCHEL_NOTIFY_CA_FILE"),
    ],
)
def test_an_invalid_notification_setting_is_refused_by_name(
    name: str, value: str, says: str
) -> None:
    env = {"SATCHEL_NOTIFY_DESTINATIONS": "hooks.example.com", name: value}
    with pytest.raises(SettingError, match=says):
        MemorySettings.from_env(env)


def test_notifications_are_off_without_destinations_and_read_from_the_environment() -> None:
    assert MemorySettings.from_env({"SATCHEL_NOTIFY_PERMIT_PRIVATE": "true"}).notify is None
    env = {
        "SATCHEL_NOTIFY_DESTINATIONS": " Hooks.Example.com, .partner.example ",
        "SATCHEL_NOTIFY_PERMIT_PRIVATE": "true",
        "SATCHEL_NOTIFY_BACKOFF": "1.5",
        "SATCHEL_NOTIFY_ATTEMPTS": "4",
    }
    notify = MemorySettings.from_env(env).notify
    assert notify is not None
    assert notify.destinations == ("hooks.example.com", ".partner.example")
    assert (notify.permit_private, notify.backoff, notify.attempts) == (True, 1.5, 4)
