"""The delivery state machine against a model (hypothesis), the signature's agreement with the
client's check, and the database keeping `last_error` to its categories."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from satchel.memory.client import verify_delivery
from satchel.memory.formation.delivery_wire import Answer
from satchel.memory.formation.notifier import Step, decide, signature

FAILURES = ["timeout", "connection refused", "tls failure", "network error"]
REFUSALS = ["destination not permitted", "address not permitted"]
CATEGORY = re.compile(
    r"destination not permitted|address not permitted|redirect not followed|timeout"
    r"|connection refused|tls failure|network error|destination (answered|refused with) \d{3}"
)

answers = st.one_of(
    st.integers(200, 599).map(lambda status: Answer(status=status)),
    st.sampled_from(FAILURES + REFUSALS).map(lambda error: Answer(error=error)),
)


def model(answer: Answer) -> tuple[str, str | None]:
    """What one answer means: delivered, retry or final, and the category recorded."""
    status = answer.status
    if status is None:
        return ("retry" if answer.error in FAILURES else "final"), answer.error
    if status < 300:
        return "delivered", None
    if status < 400:
        return "final", "redirect not followed"
    if status == 429 or status >= 500:
        return "retry", f"destination answered {status}"
    return "final", f"destination refused with {status}"


@given(
    st.lists(answers, min_size=1, max_size=12),
    st.integers(1, 8),
    st.floats(0.01, 60),
)
def test_a_delivery_follows_the_model(sequence: list[Answer], most: int, backoff: float) -> None:
    attempts = 0
    for answer in sequence:
        step = decide(attempts, answer, backoff=backoff, most=most)
        kind, category = model(answer)
        assert step.attempts == attempts + 1
        assert step.last_error == category
        assert step.last_status == answer.status
        assert step.last_error is None or CATEGORY.fullmatch(step.last_error)
        if kind == "delivered":
            assert step == Step(attempts + 1, True, False, 0.0, answer.status, None)
            return
        if kind == "final" or step.attempts == most:
            assert step.parked and not step.delivered and step.wait == 0.0
            return
        assert not step.parked and not step.delivered
        assert step.wait == pytest.approx(backoff * 2**attempts)
        attempts = step.attempts
    assert attempts < most


@given(st.binary(max_size=200), st.text(min_size=1, max_size=80), st.integers(0, 2**33))
def test_what_the_sender_signs_the_client_verifies(body: bytes, secret: str, at: int) -> None:
    signed = signature(secret, at, body)
    assert verify_delivery(secret, body, signed, now=at)
    assert verify_delivery(secret, body, signed, now=at + 300)
    assert not verify_delivery(secret, body, signed, now=at + 301)
    assert not verify_delivery(secret, body + b" ", signed, now=at)
    assert not verify_delivery(secret + "x", body, signed, now=at)
    assert not verify_delivery(secret, body, signed.replace("v1 ", "v2 "), now=at)


def test_the_database_keeps_last_error_to_the_categories(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        project = conn.execute(
            "INSERT INTO projects (name) VALUES ('alpha') RETURNING id"
        ).fetchone()
        assert project is not None
        endpoint = uuid.uuid4()
        conn.execute(
            "INSERT INTO notification_endpoints (id, project_id, url, secret)"
            " VALUES (%s, %s, 'https://hooks.example.com/', 's')",
            (endpoint, project[0]),
        )
        insert = (
            "INSERT INTO notification_deliveries (id, project_id, endpoint_id, formed_through,"
            " stored_through, parked_turns, occurred_at, last_error)"
            " VALUES (%s, %s, %s, 0, 0, 0, now(), %s)"
        )
        for allowed in ["timeout", "destination answered 503", "destination refused with 404"]:
            conn.execute(insert, (uuid.uuid4(), project[0], endpoint, allowed))
        for raw in ["connect to 10.0.0.7:443 refused", "destination answered 5033", "oops"]:
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(insert, (uuid.uuid4(), project[0], endpoint, raw))
