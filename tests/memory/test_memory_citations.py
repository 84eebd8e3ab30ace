"""Citations over real HTTP: a fact's record and its evidence, paged, within one project."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from memory_kit import LiveServer
from records_kit import api, assert_records, claim, error
from taisce.client import Client, TaisceError


async def test_a_citation_resolves_an_authored_fact(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(client, claim("Olga", "speaks", "Irish", "Olga speaks Irish."))
        (fact,) = assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works."))
        token = live_server.token("alpha")
    async with Client(live_server.base_url, token) as taisce:
        cited = await taisce.resolve_citation(fact_id=fact["id"])
    assert cited["id"] == fact["id"] and cited["version"] == fact["version"]
    assert (cited["scope"], cited["predicate"], cited["statement"]) == (
        "alpha",
        "works_at",
        "Marta works.",
    )
    assert cited["status"] == "current" and cited["source_role"] == "user"
    assert cited["confidence"] == 0.0  # no model estimate
    assert cited["known"]["until"] is None and cited["valid"]["from_inclusive"] is True
    assert uuid.UUID(cited["subject_entity_id"]) and uuid.UUID(cited["object_entity_id"])
    for absent in (
        "retraction",
        "superseded_by",
        "supersession_source_observation_id",
        "next",
        "generation",
        "reinterpreted_by",
    ):
        assert absent not in cited
    (evidence,) = cited["evidence"]
    assert uuid.UUID(evidence.pop("authored_by"))
    assert evidence.pop("occurred_at") == cited["recorded_at"]
    assert evidence == {
        "source_observation_id": fact["source_observation_id"],
        "source_ordinal": 0,
        "log_offset": 1,
        "role": "user",
        "quote": "Marta works.",
        "byte_start": 0,
        "byte_end": 12,
        "extractor_version": "curated/v1",
        "context": "Marta works.",
        "context_byte_start": 0,
        "context_byte_end": 12,
        "context_complete": True,
    }


def test_citations_show_supersession_and_retraction(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (paris,) = assert_records(
            client,
            claim("Marta", "lives_in", "Paris", "In Paris.", valid_from="2020-01-01T00:00:00Z"),
        )
        (rome,) = assert_records(
            client,
            claim("Marta", "lives_in", "Rome", "In Rome.", valid_from="2024-01-01T00:00:00Z"),
        )
        closed = client.post("/v1/citations/resolve", json={"id": paris["id"]}).json()
        assert closed["status"] == "validity_closed"
        assert closed["superseded_by"] == rome["id"]
        assert closed["supersession_source_observation_id"] == rome["source_observation_id"]
        assert closed["valid"]["until"] == "2024-01-01T00:00:00Z"

        item = {"id": rome["id"], "expected_version": rome["version"]}
        (done,) = client.post("/v1/records/retract", json={"records": [item]}).json()["records"]
        retracted = client.post("/v1/citations/resolve", json={"id": rome["id"]}).json()
        assert retracted["status"] == "retracted" and retracted["retraction"] == done
        assert retracted["known"]["until"] == done["retracted_at"]
        assert len(retracted["evidence"]) == 1


def test_evidence_pages_and_windows(live_server: LiveServer) -> None:
    long_text = "é" * 400 + " Marta works at Ensera. " + "ü" * 400
    quote_start = long_text.encode().index(b"Marta")
    with api(live_server) as client:
        (fact,) = assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works."))
        observation = client.post(
            "/v1/observations", json={"messages": [{"role": "assistant", "content": long_text}]}
        ).json()
        with psycopg.connect(live_server.database_url) as conn:
            conn.execute(
                "INSERT INTO fact_evidence (fact_id, observation_id, source_ordinal, quote,"
                " byte_start, byte_end, extractor_version) VALUES (%s, %s, 0, %s, %s, %s, 'x/1')",
                (
                    fact["id"],
                    observation["id"],
                    "Marta works at Ensera.",
                    quote_start,
                    quote_start + len("Marta works at Ensera."),
                ),
            )
        pages = []
        body: dict[str, object] = {"id": fact["id"], "limit": 1}
        while True:
            page = client.post("/v1/citations/resolve", json=body).json()
            pages.append(page["evidence"])
            if "next" not in page:
                break
            body["after"] = page["next"]
        assert [len(p) for p in pages] == [1, 1]
        both = {e["source_observation_id"]: e for p in pages for e in p}
        assert set(both) == {fact["source_observation_id"], observation["id"]}
        formed = both[observation["id"]]
        assert formed["role"] == "assistant" and formed["extractor_version"] == "x/1"
        assert "authored_by" not in formed
        assert formed["context_complete"] is False
        window = long_text.encode()[formed["context_byte_start"] : formed["context_byte_end"]]
        assert window.decode() == formed["context"]
        assert formed["context_byte_start"] < quote_start
        assert formed["context_byte_end"] > quote_start + len(formed["quote"])
        assert len(formed["context"].encode()) <= 2 * 256 + len(formed["quote"]) + 2


def test_citation_refusals(live_server: LiveServer) -> None:
    with api(live_server, "alpha") as alpha, api(live_server, "beta") as beta:
        (fact,) = assert_records(alpha, claim("Marta", "works_at", "Ensera", "Marta works."))
        for body in (
            {},
            {"id": "nope"},
            {"id": fact["id"], "limit": 33},
            {"id": fact["id"], "limit": -1},
            {"id": fact["id"], "after": {"source_observation_id": "x", "source_ordinal": 0}},
            {"id": fact["id"], "after": {"source_observation_id": fact["id"], "byte_start": 0}},
        ):
            answer = alpha.post("/v1/citations/resolve", json=body)
            assert error(answer) == (400, "invalid_citation"), body
        answer = alpha.post("/v1/citations/resolve", json={"id": str(uuid.uuid4())})
        assert error(answer) == (404, "not_found")
        foreign = beta.post("/v1/citations/resolve", json={"id": fact["id"]})
        assert error(foreign) == error(answer)
        assert foreign.json() == answer.json()

        with psycopg.connect(live_server.database_url) as conn:
            conn.execute(
                "UPDATE facts SET statement = repeat('x', 70000) WHERE id = %s", (fact["id"],)
            )
        answer = alpha.post("/v1/citations/resolve", json={"id": fact["id"]})
        assert error(answer) == (422, "citation_limit")
    with api(live_server, "alpha", read_only=True) as reader:
        answer = reader.post("/v1/citations/resolve", json={"id": fact["id"]})
        assert error(answer) == (422, "citation_limit")


async def test_the_published_client_sees_refusals_by_code(live_server: LiveServer) -> None:
    token = live_server.token("alpha")
    async with Client(live_server.base_url, token) as taisce:
        with pytest.raises(TaisceError) as refused:
            await taisce.resolve_citation(fact_id=str(uuid.uuid4()))
    assert (refused.value.status, refused.value.code) == (404, "not_found")
