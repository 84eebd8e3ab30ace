"""The client's entity, feedback, report-candidate and notification methods, against the answers
the v1 contract documents for them (the taisce docs: entity inspection, feedback, notifications).

These routes come with other parts of the same change; until the deployment serves them, these
tests fail with 404 `not_found`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from client_kit import client_for, close
from memory_kit import LiveServer

from satchel.memory.client import Conflict, Forbidden, InvalidRequest, NotFound, Unavailable


@pytest.fixture
async def reader(live_server: LiveServer, flavour: str) -> AsyncIterator[Any]:
    client = client_for(live_server, flavour, live_server.token("alpha", read_only=True))
    yield client
    await close(client)


def claim(subject: str, predicate: str, obj: str) -> dict[str, Any]:
    return {
        "data_subject_id": "ana",
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "statement": f"{subject} {predicate.replace('_', ' ')} {obj}.",
    }


async def records(memory: Any, *claims: dict[str, Any]) -> list[dict[str, Any]]:
    asserted = (await memory.assert_records(list(claims)))["records"]
    listed = (await memory.list_records(data_subject_id="ana"))["records"]
    by_id = {r["id"]: r for r in listed}
    return [by_id[r["id"]] for r in asserted]


def entries(page: dict[str, Any]) -> list[dict[str, Any]]:
    """A page's one list of items, whatever the route calls it."""
    (items,) = [value for value in page.values() if isinstance(value, list)]
    return items


# ---- entities ----------------------------------------------------------------------------------

# `speaker_subject_id` is only given for a speaker's entity.
ENTITY = {"id", "identity_kind", "canonical_name", "aliases", "first_seen_at"}


async def test_entities_are_listed_in_pages_and_got_by_id(memory: Any, reader: Any) -> None:
    (works,) = await records(memory, claim("John Byrne", "works_at", "Ensera"))
    page = await reader.list_entities()
    assert len(page["entities"]) == 2
    pages = await reader.every("list_entities", limit=1)
    assert [len(p["entities"]) for p in pages] == [1, 1]
    assert "next" not in pages[-1] or not pages[-1]["next"]

    entity = await reader.get_entity(id=works["subject_entity_id"])
    assert set(entity) >= ENTITY
    assert (entity["id"], entity["canonical_name"]) == (works["subject_entity_id"], "John Byrne")
    with pytest.raises(NotFound) as missing:
        await reader.get_entity(id=str(uuid.uuid4()))
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(InvalidRequest) as bad:
        await reader.list_entities(limit=1000)
    assert (bad.value.status, bad.value.code) == (400, "invalid_entity_page")


async def test_entity_candidates_find_a_near_name(memory: Any, reader: Any) -> None:
    (works,) = await records(memory, claim("John", "works_at", "Ensera"))
    found = await reader.entity_candidates(question="Where does Jon work?", limit=5)
    assert {"generation_id", "target_count", "build_state", "approximate", "candidates"} <= set(
        found
    )
    assert works["subject_entity_id"] in {
        c.get("entity_id", c.get("id")) for c in found["candidates"]
    }


async def test_an_entity_is_purged_after_a_preview(memory: Any, reader: Any) -> None:
    (works,) = await records(memory, claim("Wrong Person", "works_at", "Ensera"))
    entity_id = works["subject_entity_id"]
    preview = await memory.purge_entity(id=entity_id, reason="extracted by mistake")
    assert (preview["entity_id"], preview["previewed"]) == (entity_id, True)
    assert (await reader.get_entity(id=entity_id))["id"] == entity_id  # a preview removes nothing

    with pytest.raises(Forbidden):
        await reader.purge_entity(id=entity_id, confirm=True)
    receipt = await memory.purge_entity(id=entity_id, reason="extracted by mistake", confirm=True)
    assert receipt["previewed"] is False
    assert {"removed", "residual", "completed_at", "canonical_name"} <= set(receipt)
    with pytest.raises(NotFound):
        await reader.get_entity(id=entity_id)


# ---- feedback ----------------------------------------------------------------------------------


async def test_feedback_is_recorded_listed_and_promoted_once(memory: Any, reader: Any) -> None:
    lives, speaks = await records(
        memory, claim("Ana", "lives_in", "Cork"), claim("Ana", "speaks", "Irish")
    )
    correction = await memory.record_feedback(
        record_id=lives["id"], note="She moved to Oslo.", proposed_object="Oslo"
    )
    assert {"id", "record_id", "recorded_by", "recorded_at"} <= set(correction)
    assert correction["record_id"] == lives["id"]
    retraction = await memory.record_feedback(record_id=speaks["id"], note="She does not.")
    unchanged = await memory.resolve_citation(id=lives["id"])
    assert (unchanged["status"], unchanged["version"]) == ("current", lives["version"])

    listed = await reader.list_feedback(record_id=lives["id"])
    assert [f["id"] for f in entries(listed)] == [correction["id"]]
    pages = await reader.every("list_feedback", limit=1)
    assert sorted(entries(p)[0]["id"] for p in pages) == sorted(
        [correction["id"], retraction["id"]]
    )
    with pytest.raises(Forbidden) as forbidden:
        await reader.record_feedback(record_id=lives["id"], note="no")
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")

    with pytest.raises(Conflict) as stale:
        await memory.promote_feedback(id=correction["id"], expected_version=str(uuid.uuid4()))
    assert (stale.value.status, stale.value.code) == (409, "record_conflict")
    promoted = await memory.promote_feedback(id=correction["id"], expected_version=lives["version"])
    assert promoted["operation"] == "record.correct"
    assert {"replacement_record_id", "version", "promoted_at"} <= set(promoted)
    replacement = await memory.resolve_citation(id=promoted["replacement_record_id"])
    assert replacement["statement"] == "She moved to Oslo."
    with pytest.raises(Conflict) as again:
        await memory.promote_feedback(id=correction["id"], expected_version=promoted["version"])
    assert again.value.code == "feedback_already_promoted"

    retracted = await memory.promote_feedback(
        id=retraction["id"], expected_version=speaks["version"]
    )
    assert retracted["operation"] == "record.retract"
    assert "replacement_record_id" not in retracted
    still_open = await reader.list_feedback(open_only=True)
    assert entries(still_open) == []

    with pytest.raises(NotFound):
        await memory.record_feedback(record_id=str(uuid.uuid4()), note="who?")


# ---- report candidates; a deployment without notifications --------------------------------------


async def test_report_candidates_answer_a_page_for_a_read_only_token(reader: Any) -> None:
    page = await reader.report_candidates(question="What did Ana decide?", limit=5)
    assert (page["target_count"], page["build_state"], page["candidates"]) == (0, "ready", [])
    assert page["approximate"] is False and page["generation_id"]


async def test_every_notification_route_answers_unavailable(memory: Any) -> None:
    calls = [
        memory.register_notification_endpoint(url="https://hooks.example.com/satchel"),
        memory.list_notification_endpoints(),
        memory.disable_notification_endpoint(id=str(uuid.uuid4())),
        memory.list_notification_deliveries(limit=10),
    ]
    for call in calls:
        with pytest.raises(Unavailable) as refused:
            await call
        assert (refused.value.status, refused.value.code) == (501, "notifications_unavailable")
