"""Notifications end to end: an endpoint registered on the real server, a turn formed by the
worker, and the sender delivering to a real HTTPS receiver on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from memory_kit import LiveServer
from notify_kit import (
    ATTEMPTS,
    Receiver,
    deliveries,
    form,
    notify_settings,
    observe,
    register,
    rows,
    send_until,
    settings_for,
    settled,
)
from records_kit import api

from satchel.memory.client import verify_delivery
from satchel.memory.config import MemorySettings

BODY_FIELDS = {
    "version",
    "scope",
    "formed_through",
    "stored_through",
    "parked_turns",
    "occurred_at",
}


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    receiver = Receiver(tmp_path)
    try:
        yield receiver
    finally:
        receiver.close()


@pytest.fixture
def memory_settings(receiver: Receiver) -> MemorySettings:
    return settings_for(receiver)


def deliver(live_server: LiveServer, http: httpx.Client, receiver: Receiver) -> None:
    """Store one turn, form it, and send until every delivery settles."""
    observe(http, "my sister Maeve lives in Galway")
    form(live_server.database_url)
    send_until(live_server.database_url, notify_settings(receiver), settled(http))


def test_a_formed_turn_is_delivered_signed_and_carries_no_memory(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    endpoint = register(http, receiver.url)
    assert len(endpoint["secret"]) == 64 and endpoint["url"] == receiver.url
    deliver(live_server, http, receiver)

    [seen] = receiver.received
    document = json.loads(seen.body)
    assert set(document) == BODY_FIELDS
    assert document["version"] == "taisce-notification/v1"
    assert (document["scope"], document["formed_through"], document["stored_through"]) == (
        "alpha",
        0,
        0,
    )
    assert document["parked_turns"] == 0
    assert b"Maeve" not in seen.body and b"person-1" not in seen.body
    assert seen.body == json.dumps(document, separators=(",", ":")).encode()
    signed = seen.headers["Satchel-Signature"]
    assert seen.headers["Taisce-Signature"] == signed
    assert seen.headers["Content-Type"] == "application/json"
    assert verify_delivery(endpoint["secret"], seen.body, signed)
    assert not verify_delivery(endpoint["secret"], seen.body.replace(b"0", b"1", 1), signed)
    assert not verify_delivery(endpoint["secret"], seen.body, signed, now=time.time() + 301)
    assert not verify_delivery("another secret", seen.body, signed)

    [row] = deliveries(http)
    assert seen.headers["Satchel-Delivery"] == seen.headers["Taisce-Delivery"] == row["id"]
    assert (row["attempts"], row["last_status"], row["endpoint_id"]) == (1, 200, endpoint["id"])
    assert "delivered_at" in row and "parked_at" not in row and "last_error" not in row
    # The secret is stored to sign, and shown only at registration.
    listed = http.post("/v1/notifications/endpoints/list", json={}).json()["endpoints"]
    assert listed == [{k: v for k, v in endpoint.items() if k != "secret"}]


@pytest.mark.parametrize(
    ("statuses", "attempts", "delivered", "error"),
    [
        ([503, 503, 200], 3, True, None),
        ([404], 1, False, "destination refused with 404"),
        ([302], 1, False, "redirect not followed"),
        ([500], ATTEMPTS, False, "destination answered 500"),
        ([429], ATTEMPTS, False, "destination answered 429"),
    ],
)
def test_retries_and_final_answers(
    live_server: LiveServer,
    http: httpx.Client,
    receiver: Receiver,
    statuses: list[int],
    attempts: int,
    delivered: bool,
    error: str | None,
) -> None:
    receiver.statuses = statuses
    register(http, receiver.url)
    deliver(live_server, http, receiver)

    assert len(receiver.received) == attempts
    assert {seen.path for seen in receiver.received} == {"/hook"}  # a redirect is not followed
    [row] = deliveries(http)
    assert row["attempts"] == attempts
    assert ("delivered_at" in row, "parked_at" in row) == (delivered, not delivered)
    assert row.get("last_error") == error
    assert row["last_status"] == statuses[-1]


def test_a_receiver_that_cannot_be_reached_ends_parked_with_a_category(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    register(http, receiver.url)
    receiver.close()  # nothing listens on its port any more
    deliver(live_server, http, receiver)
    [row] = deliveries(http)
    assert (row["attempts"], row["last_error"]) == (ATTEMPTS, "connection refused")
    assert "parked_at" in row and "last_status" not in row
    scraped = httpx.get(live_server.base_url + "/metrics").text
    assert "satchel_memory_notification_deliveries_parked 1.0" in scraped
    assert "satchel_memory_notification_deliveries_pending 0.0" in scraped


def test_a_certificate_the_deployment_does_not_trust_is_a_tls_failure(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    register(http, receiver.url)
    observe(http)
    form(live_server.database_url)
    untrusting = notify_settings(receiver, ca_file=None, attempts=1)
    send_until(live_server.database_url, untrusting, settled(http))
    [row] = deliveries(http)
    assert row["last_error"] == "tls failure"
    assert receiver.received == []


def test_deliveries_coalesce_and_a_disabled_endpoint_gets_none_and_its_waiting_one_is_parked(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    first = register(http, receiver.url)
    second = register(http, receiver.url)
    for n in range(3):
        observe(http, f"turn {n}")
        form(live_server.database_url)
    listed = deliveries(http)
    assert sorted(r["endpoint_id"] for r in listed) == sorted([first["id"], second["id"]])
    assert {(r["formed_through"], r["stored_through"], r["attempts"]) for r in listed} == {
        (2, 2, 0)
    }
    answer = http.post("/v1/notifications/endpoints/disable", json={"id": second["id"]})
    assert answer.json() == {"disabled": True}
    observe(http, "turn 3")
    form(live_server.database_url)
    count = rows(live_server.database_url, "SELECT count(*) FROM notification_deliveries")
    assert count == [(2,)]
    send_until(live_server.database_url, notify_settings(receiver), settled(http))
    [sent] = receiver.received  # the disabled endpoint's delivery is parked, never sent
    assert json.loads(sent.body)["formed_through"] == 3
    [unsent] = [r for r in deliveries(http) if r["endpoint_id"] == second["id"]]
    assert (unsent["attempts"], unsent["last_error"]) == (0, "endpoint disabled")
    assert "parked_at" in unsent and "delivered_at" not in unsent


def test_another_project_never_sees_the_endpoints_or_deliveries(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    endpoint = register(http, receiver.url)
    deliver(live_server, http, receiver)
    with api(live_server, "beta") as beta:
        assert beta.post("/v1/notifications/endpoints/list", json={}).json() == {"endpoints": []}
        assert deliveries(beta) == []
        answer = beta.post("/v1/notifications/endpoints/disable", json={"id": endpoint["id"]})
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    with api(live_server, read_only=True) as reader:
        assert len(deliveries(reader)) == 1
        answer = reader.post("/v1/notifications/endpoints/register", json={"url": receiver.url})
        assert answer.status_code == 403
