"""Where satchel once answered differently from taisce about records, now as taisce answers.

Through the published `taisce` client where it has the call (recall, citations), raw HTTP
elsewhere (record changes, notification and report-candidate routes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import LiveServer
from records_kit import api, assert_records, claim, error, stored
from taisce.client import Client


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_authored_records_have_confidence_zero(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (fact,) = assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works."))
    async with Client(live_server.base_url, live_server.token("alpha")) as taisce:
        bundle = await taisce.recall(question="Where does Marta work?", data_subject_id="person-1")
        cited = await taisce.resolve_citation(fact_id=fact["id"])
    assert [(f["fact_id"], f["confidence"]) for f in bundle["facts"]] == [(fact["id"], 0.0)]
    assert cited["confidence"] == 0.0


async def test_a_correction_is_valid_from_server_time_by_default(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (fact,) = assert_records(
            client,
            claim("Marta", "lives_in", "Paris", "In Paris.", valid_from="2020-01-01T00:00:00Z"),
        )
        item = {
            "id": fact["id"],
            "expected_version": fact["version"],
            "object": "Rome",
            "statement": "In Rome.",
        }
        before = datetime.now(UTC)
        answer = client.post("/v1/records/correct", json={"records": [item]})
        after = datetime.now(UTC)
        assert answer.status_code == 200, answer.text
        (done,) = answer.json()["records"]
    async with Client(live_server.base_url, live_server.token("alpha")) as taisce:
        replacement = await taisce.resolve_citation(fact_id=done["id"])
        original = await taisce.resolve_citation(fact_id=fact["id"])
        in_2021 = await taisce.recall(
            question="Marta", data_subject_id="person-1", as_of="2021-01-01T00:00:00Z"
        )
    assert before <= instant(replacement["valid"]["from"]) <= after
    assert replacement["valid"]["from"] == replacement["known"]["from"]
    assert original["valid"]["from"] == "2020-01-01T00:00:00Z"
    assert original["status"] == "retracted"
    assert in_2021["facts"] == []  # the original is withdrawn; the replacement starts now


def assert_body(record: dict[str, Any]) -> dict[str, Any]:
    return {"records": [record]}


def test_out_of_order_single_valued_assertions_conflict(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (paris,) = assert_records(
            client,
            claim("Marta", "lives_in", "Paris", "In Paris.", valid_from="2020-01-01T00:00:00Z"),
        )
        (rome,) = assert_records(
            client,
            claim("Marta", "lives_in", "Rome", "In Rome.", valid_from="2023-01-01T00:00:00Z"),
        )
        listed = client.post("/v1/records/list", json={}).json()
        offsets = stored(client)
        for start in (
            "2023-01-01T00:00:00Z",  # the same start as the current record
            "2022-01-01T00:00:00Z",  # before it, inside Paris's closed range
            "2019-01-01T00:00:00Z",  # before everything
        ):
            late = claim("Marta", "lives_in", "Oslo", "In Oslo.", valid_from=start)
            answer = client.post("/v1/records/assert", json=assert_body(late))
            assert error(answer) == (409, "record_conflict"), start
            assert "records[0]" in answer.json()["error"]["message"]
        # A good item before a late one: the whole batch is refused.
        good = claim("Marta", "lives_in", "Oslo", "In Oslo.", valid_from="2025-01-01T00:00:00Z")
        late = claim("Marta", "lives_in", "Cork", "In Cork.", valid_from="2024-01-01T00:00:00Z")
        answer = client.post("/v1/records/assert", json={"records": [good, late]})
        assert error(answer) == (409, "record_conflict")
        assert "records[1]" in answer.json()["error"]["message"]
        assert client.post("/v1/records/list", json={}).json() == listed
        assert stored(client) == offsets

        # In order it supersedes, and the retry key of a refused item was not spent.
        (oslo,) = assert_records(client, good)
        statuses = {
            r["id"]: r["status"] for r in client.post("/v1/records/list", json={}).json()["records"]
        }
        assert statuses == {
            paris["id"]: "validity_closed",
            rome["id"]: "validity_closed",
            oslo["id"]: "current",
        }


def test_a_correction_out_of_order_conflicts_too(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim("Marta", "lives_in", "Paris", "In Paris.", valid_from="2020-01-01T00:00:00Z"),
        )
        (rome,) = assert_records(
            client,
            claim("Marta", "lives_in", "Rome", "In Rome.", valid_from="2023-01-01T00:00:00Z"),
        )
        item = {
            "id": rome["id"],
            "expected_version": rome["version"],
            "object": "Oslo",
            "statement": "In Oslo.",
            "valid_from": "2021-01-01T00:00:00Z",  # inside Paris's closed range
        }
        answer = client.post("/v1/records/correct", json={"records": [item]})
        assert error(answer) == (409, "record_conflict")
        history = client.post("/v1/records/history", json={"id": rome["id"]}).json()
        assert history["version"] == rome["version"] and "retraction" not in history


@dataclass
class Modelled:
    """What a single-valued record should be: its validity and whether it is still believed."""

    start: int
    until: int | None = None
    known: bool = True

    @property
    def status(self) -> str:
        if not self.known:
            return "retracted"
        return "current" if self.until is None else "validity_closed"


Step = tuple[str, int]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("assert"), st.integers(2000, 2008)),
        st.tuples(st.just("retract"), st.integers(0, 5)),
    ),
    max_size=7,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
def test_single_valued_assertions_follow_the_contract(
    live_server: LiveServer, steps: list[Step]
) -> None:
    """Any sequence of assertions and retractions of one single-valued relation: an assertion
    is accepted exactly when every believed record overlapping it is open and began earlier
    (those close where it begins); each record's status is then as modelled."""
    person = str(uuid.uuid4())
    model: list[Modelled] = []
    ids: list[str] = []
    with api(live_server) as client:
        for action, value in steps:
            if action == "assert":
                item = claim(
                    "Marta",
                    "lives_in",
                    f"City {value}",
                    f"In city {value}.",
                    data_subject_id=person,
                    valid_from=f"{value}-01-01T00:00:00Z",
                )
                answer = client.post("/v1/records/assert", json=assert_body(item))
                overlapping = [m for m in model if m.known and (m.until is None or m.until > value)]
                if any(m.until is not None or m.start >= value for m in overlapping):
                    assert error(answer) == (409, "record_conflict"), (steps, model)
                    continue
                assert answer.status_code == 200, (steps, answer.text)
                for m in overlapping:
                    m.until = value
                model.append(Modelled(value))
                ids.append(answer.json()["records"][0]["id"])
            elif value < len(ids):
                history = client.post("/v1/records/history", json={"id": ids[value]}).json()
                target = {"id": ids[value], "expected_version": history["version"]}
                answer = client.post("/v1/records/retract", json={"records": [target]})
                if model[value].known:
                    assert answer.status_code == 200, (steps, answer.text)
                    model[value].known = False
                else:
                    assert error(answer) == (409, "record_conflict"), steps
        page = client.post(
            "/v1/records/list", json={"data_subject_id": person, "limit": 100}
        ).json()
    statuses = {r["id"]: r["status"] for r in page["records"]}
    assert statuses == {fact_id: m.status for fact_id, m in zip(ids, model, strict=True)}, steps


def test_a_validity_closed_record_can_be_retracted(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (paris,) = assert_records(
            client,
            claim("Marta", "lives_in", "Paris", "In Paris.", valid_from="2020-01-01T00:00:00Z"),
        )
        assert_records(
            client,
            claim("Marta", "lives_in", "Rome", "In Rome.", valid_from="2023-01-01T00:00:00Z"),
        )
        closed = client.post("/v1/records/history", json={"id": paris["id"]}).json()
        assert closed["current"]["valid"]["until"] == "2023-01-01T00:00:00Z"
        item = {"id": paris["id"], "expected_version": closed["version"]}
        answer = client.post("/v1/records/retract", json={"records": [item]})
        assert answer.status_code == 200, answer.text
        history = client.post("/v1/records/history", json={"id": paris["id"]}).json()
        assert history["current"]["valid"] == closed["current"]["valid"]
        assert history["current"]["known"]["until"] == history["retraction"]["retracted_at"]
        (row,) = [
            r
            for r in client.post("/v1/records/list", json={}).json()["records"]
            if r["id"] == paris["id"]
        ]
        assert row["status"] == "retracted"
        # Withdrawn once; the version it answered is no longer current.
        again = {"id": paris["id"], "expected_version": history["version"]}
        answer = client.post("/v1/records/retract", json={"records": [again]})
        assert error(answer) == (409, "record_conflict")


def add_evidence(server: LiveServer, fact: dict[str, Any], pieces: int) -> None:
    with psycopg.connect(server.database_url) as conn:
        conn.execute(
            "INSERT INTO fact_evidence (fact_id, observation_id, source_ordinal, quote,"
            " byte_start, byte_end) SELECT %s, %s, n, 'Marta', 0, 5"
            " FROM generate_series(1, %s) n",
            (fact["id"], fact["source_observation_id"], pieces),
        )


def test_the_mutation_limit_counts_evidence_across_the_batch(live_server: LiveServer) -> None:
    with api(live_server) as client:
        one, two, three = assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Marta", "speaks", "Irish", "Marta speaks Irish."),
            claim("Marta", "uses", "Go", "Marta uses Go."),
        )
        add_evidence(live_server, one, 63)  # 64 pieces
        add_evidence(live_server, two, 64)  # 65 pieces: 129 together
        pair = [
            {"id": one["id"], "expected_version": one["version"]},
            {"id": two["id"], "expected_version": two["version"]},
        ]
        listed = client.post("/v1/records/list", json={}).json()
        answer = client.post("/v1/records/retract", json={"records": pair})
        assert error(answer) == (413, "record_mutation_limit")
        fixes = [{**target, "object": "Acme", "statement": "Marta: Acme."} for target in pair]
        answer = client.post("/v1/records/correct", json={"records": fixes})
        assert error(answer) == (413, "record_mutation_limit")
        # The limit is checked before unknown ids and stale versions.
        unknown = {"id": str(uuid.uuid4()), "expected_version": one["version"]}
        stale = {"id": three["id"], "expected_version": str(uuid.uuid4())}
        answer = client.post("/v1/records/retract", json={"records": [*pair, unknown, stale]})
        assert error(answer) == (413, "record_mutation_limit")
        assert client.post("/v1/records/list", json={}).json() == listed

        # 64 + 1 pieces fit, as does each alone.
        answer = client.post("/v1/records/retract", json={"records": [pair[0], stale]})
        assert error(answer) == (409, "record_conflict")
        with_three = [pair[0], {"id": three["id"], "expected_version": three["version"]}]
        answer = client.post("/v1/records/retract", json={"records": with_three})
        assert answer.status_code == 200, answer.text
        answer = client.post("/v1/records/retract", json={"records": [pair[1]]})
        assert answer.status_code == 200, answer.text


# Each route's access, a good body, and a body of the right JSON types that a deployment with
# notifications would refuse (a blank URL, an id that is no UUID, a limit it clamps).
NOTIFICATIONS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "/v1/notifications/endpoints/register": (
        "write",
        {"url": "https://hooks.example.com/x"},
        {"url": ""},
    ),
    "/v1/notifications/endpoints/list": ("read", {}, {}),
    "/v1/notifications/endpoints/disable": ("write", {"id": str(uuid.uuid4())}, {"id": "x"}),
    "/v1/notifications/deliveries/list": ("read", {"limit": 50}, {"limit": -1}),
}


def refusal(answer: httpx.Response) -> tuple[int, str]:
    document = answer.json()
    assert set(document) == {"error"} and set(document["error"]) == {"code", "message"}
    return answer.status_code, document["error"]["code"]


@pytest.mark.parametrize("path", sorted(NOTIFICATIONS))
def test_notification_routes_answer_as_a_deployment_without_notifications(
    live_server: LiveServer, path: str
) -> None:
    level, body, odd = NOTIFICATIONS[path]
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        assert refusal(anonymous.post(path, json=body)) == (401, "unauthenticated")
    with api(live_server, read_only=True) as reader:
        answer = reader.post(path, json=body)
        if level == "write":
            assert refusal(answer) == (403, "forbidden")
        else:
            assert refusal(answer) == (501, "notifications_unavailable")
    with api(live_server) as writer:
        assert refusal(writer.post(path, json={**body, "extra": 1})) == (400, "invalid_body")
        assert refusal(writer.post(path, content=b"{")) == (400, "invalid_body")
        answer = writer.post(path, json=body)
        assert refusal(answer) == (501, "notifications_unavailable")
        assert "freshness" in answer.json()["error"]["message"]
        # No field is judged before the refusal, as there: only its JSON type.
        assert refusal(writer.post(path, json=odd)) == (501, "notifications_unavailable")
        for name in body:
            assert refusal(writer.post(path, json={name: [1]})) == (400, "invalid_body")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, (400, "invalid_report_candidate_query")),
        ({"question": "  "}, (400, "invalid_report_candidate_query")),
        ({"question": "x" * 8193}, (400, "invalid_report_candidate_query")),
        ({"question": "Growth?", "limit": 0}, (400, "invalid_report_candidate_query")),
        ({"question": "Growth?", "limit": 33}, (400, "invalid_report_candidate_query")),
        ({"question": "Growth?", "candidates": 5}, (400, "invalid_report_candidate_query")),
        ({"question": "Growth?", "candidates": 1001}, (400, "invalid_report_candidate_query")),
        ({"question": "Growth?", "themes": True}, (400, "invalid_body")),
        ({"question": 7}, (400, "invalid_body")),
    ],
)
def test_report_candidates_refuse_bad_bodies(
    live_server: LiveServer, body: dict[str, Any], expected: tuple[int, str]
) -> None:
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        answer = anonymous.post("/v1/reports/candidates", json=body)
        assert refusal(answer) == (401, "unauthenticated")
    with api(live_server, read_only=True) as reader:
        answer = reader.post("/v1/reports/candidates", json=body)
    assert refusal(answer) == expected, answer.text
