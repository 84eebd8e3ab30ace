"""Erasures and exports: one transaction, receipts (deleted, residual, clean), nothing left."""

from __future__ import annotations

import contextlib
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import memory_seed as seed
import psycopg
import pytest
from memory_kit import LiveServer
from memory_world import ANN, BOB, World, client, observe

RECEIPT_KEYS = {
    "request_id",
    "scope",
    "data_subject_id",
    "completed_at",
    "deleted",
    "residual",
    "clean",
}


def test_subject_erasure_receipt_counts_every_kind(live_server: LiveServer) -> None:
    world = World(live_server)
    before = world.export(data_subject_id=ANN)["rows"]
    answer = world.erase(data_subject_id=ANN, reason="the person asked")
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert set(receipt) == RECEIPT_KEYS
    assert receipt["scope"] == "alpha"
    assert receipt["data_subject_id"] == ANN
    uuid.UUID(receipt["request_id"])
    assert receipt["completed_at"].endswith("Z")
    deleted = receipt["deleted"]
    assert deleted == before
    # Three turns, two authored sources (the record and its correction), the artifact's source.
    assert (deleted["observation"], deleted["message"]) == (6, 5)
    assert (deleted["fact"], deleted["fact_evidence"], deleted["record_retraction"]) == (3, 3, 1)
    assert deleted["fact_history"] >= 2  # the corrected record's, the formed fact's
    assert deleted["entity"] == 4  # Ann Lynch, Ensera, Ensera Labs, Cork as Ann named them
    assert (deleted["segment"], deleted["agent_artifact"], deleted["data_subject"]) == (1, 1, 1)
    assert deleted["feedback"] == 1
    assert set(receipt["residual"]) == set(deleted) - {"observation"}
    assert not any(receipt["residual"].values())
    assert receipt["clean"] is True


def test_subject_erasure_leaves_no_trace_and_spares_others(live_server: LiveServer) -> None:
    world = World(live_server)
    exported = world.export(data_subject_id=ANN)["sections"]
    ids = [row["id"] for rows in exported.values() for row in rows if "id" in row]
    ids.remove(world.artifact)  # the artifact's id stays as a tombstone: it cannot be reused
    others = ["Bob-marker-1", BOB, "Bob-record", "Project-marker"]
    with psycopg.connect(live_server.database_url) as conn:
        before = seed.traces(conn, others)
    assert world.erase(data_subject_id=ANN).json()["clean"] is True
    needles = [
        ANN,
        "Ann-marker",
        "Ann Lynch",
        "Ann-record",
        "Ann-correction",
        "Ensera Labs",
        "Ann-summary",
        "Ann-label",
        b"Ann-artifact-bytes".hex(),
        *ids,
    ]
    assert len(ids) > 20
    with psycopg.connect(live_server.database_url) as conn:
        assert seed.traces(conn, needles) == {}
        assert seed.traces(conn, others) == before
        bob = conn.execute(
            "SELECT f.object, e.name FROM facts f JOIN entities e ON e.id = f.subject_entity_id"
            " WHERE f.id = %s",
            (world.bob_record["id"],),
        ).fetchone()
        assert bob == ("Ensera", "Bob")
    bob_export = world.export(data_subject_id=BOB)["rows"]
    assert (bob_export["observation"], bob_export["fact"], bob_export["entity"]) == (2, 1, 2)


def test_retries_after_erasure_conflict_and_stored_does_not_go_down(
    live_server: LiveServer,
) -> None:
    world = World(live_server)
    stored = world.http.get("/v1/freshness").json()["stored"]
    assert world.erase(data_subject_id=ANN).status_code == 200
    retry = world.http.post(
        "/v1/observations",
        json={
            "idempotency_key": world.key,
            "data_subject_id": ANN,
            "messages": [{"role": "user", "content": "Ann-marker-1 I work at Ensera."}],
        },
    )
    assert retry.status_code == 409
    assert retry.json()["error"]["code"] == "idempotency_conflict"
    record = world.http.post(
        "/v1/records/assert",
        json={
            "records": [
                {
                    "idempotency_key": world.record_key,
                    "data_subject_id": ANN,
                    "subject": "Ann Lynch",
                    "predicate": "works_at",
                    "object": "Ensera",
                    "statement": "Ann-record works at Ensera",
                }
            ]
        },
    )
    assert (record.status_code, record.json()["error"]["code"]) == (409, "idempotency_conflict")
    artifact = world.http.post(
        "/v1/artifacts/put",
        json={"id": world.artifact, "data_subject_id": ANN, "kind": "state", "content": ""},
    )
    assert (artifact.status_code, artifact.json()["error"]["code"]) == (409, "artifact_conflict")
    registration = world.http.post(
        "/v1/subjects/register",
        json={
            "idempotency_key": world.registration_key,
            "external_reference": ANN,
            "label": "Ann-label",
        },
    )
    assert registration.status_code == 409
    assert registration.json()["error"]["code"] == "subject_conflict"
    freshness = world.http.get("/v1/freshness").json()
    assert freshness["stored"] == stored
    assert freshness["formed"] == stored


def test_erasing_twice_is_harmless(live_server: LiveServer) -> None:
    world = World(live_server)
    assert world.erase(data_subject_id=ANN).json()["clean"] is True
    again = world.erase(data_subject_id=ANN).json()
    assert again["clean"] is True
    assert not any(again["deleted"].values())


def test_erasure_by_source_takes_only_those_turns(live_server: LiveServer) -> None:
    world = World(live_server)
    chosen = world.ann_turns[1]
    answer = world.erase(source_observation_ids=[chosen.upper()])
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert receipt["data_subject_id"] == ""
    assert receipt["source_observation_ids"] == [chosen.upper()]
    assert receipt["clean"] is True
    deleted = receipt["deleted"]
    assert "data_subject" not in deleted
    # The turn, its message, the fact formed from it with its evidence, history and feedback,
    # the segment built on it, and "Cork", which nothing else names; "Ann Lynch" is still named
    # elsewhere.
    assert (deleted["observation"], deleted["message"], deleted["fact"]) == (1, 1, 1)
    assert (deleted["fact_evidence"], deleted["fact_history"], deleted["feedback"]) == (1, 1, 1)
    assert (deleted["segment"], deleted["agent_artifact"], deleted["entity"]) == (1, 0, 1)
    rows = world.export(data_subject_id=ANN)["rows"]
    assert (rows["observation"], rows["fact"], rows["entity"]) == (5, 2, 3)
    with psycopg.connect(live_server.database_url) as conn:
        assert seed.traces(conn, [chosen, "Ann-marker-2", str(world.formed_fact)]) == {}


def test_erasing_an_authored_source_takes_its_record(live_server: LiveServer) -> None:
    world = World(live_server)
    source = world.correction["source_observation_id"]
    receipt = world.erase(source_observation_ids=[source]).json()
    assert (receipt["deleted"]["fact"], receipt["deleted"]["observation"]) == (1, 1)
    assert receipt["clean"] is True
    gone = world.http.post("/v1/citations/resolve", json={"id": world.correction["id"]})
    assert gone.status_code == 404
    history = world.http.post("/v1/records/history", json={"id": world.record["id"]})
    assert history.status_code == 200, history.text
    assert source not in history.text


def test_erasure_by_foreign_source_ids_matches_nothing(live_server: LiveServer) -> None:
    world = World(live_server)
    beta = client(live_server, live_server.token("beta"))
    answer = beta.post("/v1/erasures", json={"source_observation_ids": world.ann_turns})
    assert answer.status_code == 200
    assert not any(answer.json()["deleted"].values())
    assert world.export(data_subject_id=ANN)["rows"]["observation"] == 6


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "no_subject"),
        ({"data_subject_id": "   "}, "no_subject"),
        ({"data_subject_id": "", "source_observation_ids": []}, "no_subject"),
        ({"data_subject_id": None, "source_observation_ids": None}, "no_subject"),
        (
            {"data_subject_id": ANN, "source_observation_ids": [str(uuid.uuid4())]},
            "invalid_erasure",
        ),
        ({"source_observation_ids": ["not-a-uuid"]}, "invalid_erasure"),
        ({"source_observation_ids": [uuid.uuid4().hex]}, "invalid_erasure"),
        ({"source_observation_ids": [str(uuid.uuid4())] * 10_001}, "invalid_erasure"),
        ({"data_subject_id": "a\x00b"}, "invalid_erasure"),
        ({"data_subject_id": ANN, "reason": "a\x00b"}, "invalid_erasure"),
        ({"data_subject_id": ANN, "extra": 1}, "invalid_body"),
        ({"data_subject_id": 7}, "invalid_body"),
    ],
)
def test_erasure_refusals(live_server: LiveServer, body: dict[str, Any], code: str) -> None:
    with client(live_server, live_server.token("alpha")) as http:
        answer = http.post("/v1/erasures", json=body)
    assert answer.status_code == 400
    assert answer.json() == {"error": {"code": code, "message": answer.json()["error"]["message"]}}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "no_subject"),
        ({"data_subject_id": ANN, "source_observation_ids": [str(uuid.uuid4())]}, "invalid_export"),
        ({"source_observation_ids": [str(uuid.uuid4())] * 10_001}, "invalid_export"),
        ({"source_observation_ids": ["nope"]}, "invalid_export"),
        ({"data_subject_id": "a\x00b"}, "invalid_export"),
        ({"data_subject_id": ANN, "reason": "exports take no reason"}, "invalid_body"),
    ],
)
def test_export_refusals(live_server: LiveServer, body: dict[str, Any], code: str) -> None:
    with client(live_server, live_server.token("alpha")) as http:
        answer = http.post("/v1/exports", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code


def test_read_only_may_export_but_not_erase(live_server: LiveServer) -> None:
    world = World(live_server)
    reader = client(live_server, live_server.token("alpha", read_only=True))
    refused = reader.post("/v1/erasures", json={"data_subject_id": ANN})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    malformed = reader.post("/v1/erasures", content=b"{not json")
    assert malformed.status_code == 403
    exported = reader.post("/v1/exports", json={"data_subject_id": ANN})
    assert exported.status_code == 200
    assert world.erase(data_subject_id=ANN).json()["deleted"]["observation"] == 6


def test_export_sections_hold_the_raw_rows(live_server: LiveServer) -> None:
    world = World(live_server)
    answer = world.http.post("/v1/exports", json={"data_subject_id": ANN})
    assert answer.status_code == 200, answer.text
    exported = answer.json()
    assert set(exported) == {"scope", "data_subject_id", "sections", "rows"}
    assert exported["scope"] == "alpha"
    assert exported["data_subject_id"] == ANN
    sections = exported["sections"]
    assert exported["rows"] == {name: len(rows) for name, rows in sections.items()}
    assert [m["content"] for m in sections["message"]] == [
        "Ann-marker-1 I work at Ensera.",
        "Ann-marker-2 I live in Cork.",
        "Ann-marker-3 I speak Irish.",
        "Ann-record works at Ensera",
        "Ann-correction works at Ensera Labs",
    ]
    assert [o["id"] for o in sections["observation"]][:3] == world.ann_turns
    fact_ids = {f["id"] for f in sections["fact"]}
    assert fact_ids == {world.record["id"], world.correction["id"], str(world.formed_fact)}
    assert sections["record_retraction"][0]["fact_id"] == world.record["id"]
    assert {e["name"] for e in sections["entity"]} == {"Ann Lynch", "Ensera", "Ensera Labs", "Cork"}
    assert sections["segment"][0]["summary"] == "Ann-summary"
    assert [(f["id"], f["fact_id"]) for f in sections["feedback"]] == [
        (world.feedback, str(world.formed_fact))
    ]
    assert sections["agent_artifact"][0]["content"] == "\\x" + b"Ann-artifact-bytes".hex()
    assert sections["data_subject"][0]["id"] == world.registry
    assert all("project_id" not in row for rows in sections.values() for row in rows)
    assert "Bob" not in answer.text
    receipt = world.erase(data_subject_id=ANN).json()
    assert receipt["deleted"] == exported["rows"]


def test_export_by_source_echoes_ids(live_server: LiveServer) -> None:
    world = World(live_server)
    exported = world.export(source_observation_ids=world.bob_turns)
    assert exported["data_subject_id"] == ""
    assert exported["source_observation_ids"] == world.bob_turns
    assert [m["content"] for m in exported["sections"]["message"]] == [
        "Bob-marker-1 I work at Ensera too."
    ]
    assert "data_subject" not in exported["sections"]


def test_export_too_large(live_server: LiveServer) -> None:
    http = client(live_server, live_server.token("alpha"))
    turn = observe(http, ANN, "the first of very many")
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute(
            "INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal, role,"
            " content, group_ordinal, occurred_at)"
            " SELECT gen_random_uuid(), o.id, o.project_id, o.data_subject_id, n, 'user', 'x', n,"
            " o.occurred_at FROM observations o, generate_series(1, 50000) n WHERE o.id = %s",
            (turn,),
        )
    answer = http.post("/v1/exports", json={"data_subject_id": ANN})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "export_too_large"


def test_a_failed_erasure_changes_nothing(live_server: LiveServer) -> None:
    world = World(live_server)
    before = world.export(data_subject_id=ANN)["rows"]
    with psycopg.connect(live_server.database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE artifact_tombstones RENAME TO artifact_tombstones_away")
        try:
            failed = world.erase(data_subject_id=ANN)  # fails after facts and entities went
        finally:
            conn.execute("ALTER TABLE artifact_tombstones_away RENAME TO artifact_tombstones")
    assert failed.status_code == 500
    assert failed.json() == {
        "error": {"code": "internal", "message": "the request could not be served"}
    }
    assert world.export(data_subject_id=ANN)["rows"] == before  # on the same connection
    assert world.erase(data_subject_id=ANN).json()["deleted"] == before


def test_an_erasure_caught_in_a_deadlock_starts_over(live_server: LiveServer) -> None:
    world = World(live_server)
    before = world.export(data_subject_id=ANN)["rows"]
    with psycopg.connect(live_server.database_url) as holder:
        # A change holding one of Ann's facts, about to claim a log offset (as a correction does)
        holder.execute("SELECT 1 FROM facts WHERE id = %s FOR UPDATE", (world.record["id"],))
        with ThreadPoolExecutor(1) as pool:
            erasing = pool.submit(world.erase, data_subject_id=ANN)
            deadline = time.monotonic() + 30
            while not waiting_on_a_lock(live_server.database_url):
                assert time.monotonic() < deadline, "the erasure never waited for the fact"
                time.sleep(0.02)
            with contextlib.suppress(psycopg.errors.DeadlockDetected):
                holder.execute("UPDATE projects SET stored = stored WHERE name = 'alpha'")
            holder.rollback()
            answer = erasing.result(timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"] == before
    assert answer.json()["clean"] is True


def waiting_on_a_lock(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM facts%'"
        ).fetchone()
    return row is not None and row[0] > 0
