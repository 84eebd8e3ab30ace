"""The published `taisce` client, unchanged, drives the live service end to end."""

from __future__ import annotations

import uuid

import pytest
import taisce
from memory_kit import LiveServer


async def test_the_published_client_works_unchanged(live_server: LiveServer) -> None:
    token = live_server.token("alpha")
    messages = [
        {"role": "user", "content": "I moved to Lisbon last spring."},
        {"role": "assistant", "content": "Lisbon, noted."},
    ]
    async with taisce.Client(live_server.base_url, token) as client:
        assert await client.freshness() == taisce.Freshness("alpha", None, None, 0)

        key = taisce.turn_key("ana", "run-1", messages)
        first = await client.observe(idempotency_key=key, messages=messages, data_subject_id="ana")
        again = await client.observe(idempotency_key=key, messages=messages, data_subject_id="ana")
        assert again == first == {"id": first["id"], "scope": "alpha", "log_offset": 0}
        other = taisce.turn_key("ana", "run-2", messages)
        assert other != key
        assert (await client.observe(idempotency_key=other, messages=messages))["log_offset"] == 1
        with pytest.raises(taisce.TaisceError) as conflict:
            await client.observe(idempotency_key=key, messages=messages[:1])
        assert (conflict.value.status, conflict.value.code) == (409, "idempotency_conflict")
        assert await client.freshness() == taisce.Freshness("alpha", 1, 1, 0)

        bundle = await client.recall(question="Where does Ana live?", data_subject_id="ana")
        assert taisce.bundle_is_empty(bundle)  # it reads the new degraded entry as a string
        for array in ("anchors", "facts", "reports", "passages"):
            assert bundle[array] == []
        assert bundle["degraded"] == ["facts_not_formed"]  # stored with no formation model

        context = await client.context(data_subject_id="ana")
        assert [turn["log_offset"] for turn in context["turns"]] == [0]
        assert context["turns"][0]["messages"] == messages
        assert context["segments"] == []
        assert context["watermark"] == {"scope": "alpha", "stored": 1, "formed": 1, "parked": 0}
        rendered = taisce.render_context_message(context)
        assert taisce.is_memory_text(rendered)
        assert "Lisbon last spring" in rendered

        artifact = str(uuid.uuid4())
        stored = await client.put_artifact(
            artifact_id=artifact, data_subject_id="ana", kind="state", content=b"{}", name="session"
        )
        assert (stored["id"], stored["replayed"], stored["bytes"]) == (artifact, False, 2)
        updated = await client.put_artifact(
            artifact_id=artifact,
            data_subject_id="ana",
            kind="state",
            content=b'{"step": 2}',
            name="session",
            expected_version=stored["version"],
        )
        loaded = await client.get_artifact(artifact_id=artifact, data_subject_id="ana")
        assert (loaded["version"], loaded["content"]) == (updated["version"], "eyJzdGVwIjogMn0=")
        with pytest.raises(taisce.TaisceError) as elsewhere:
            await client.get_artifact(artifact_id=artifact, data_subject_id="ben")
        assert (elsewhere.value.status, elsewhere.value.code) == (404, "not_found")
        deleted = await client.delete_artifact(
            artifact_id=artifact, data_subject_id="ana", expected_version=updated["version"]
        )
        assert deleted == {"deleted": True}
        with pytest.raises(taisce.TaisceError) as gone:
            await client.get_artifact(artifact_id=artifact)
        assert gone.value.code == "not_found"
        assert (await client.freshness()).stored == 2  # creating the artifact took an offset

        page = await client.search_passages(question="Lisbon", limit=5, source_role="user")
        assert page["passages"][0]["preview"] == "I moved to Lisbon last spring."
        # an exact search, over no vectors until the passage index is built
        assert (page["approximate"], page["build_state"]) == (False, "building")
        with pytest.raises(taisce.TaisceError) as blank:
            await client.search_passages(question="   ")
        assert (blank.value.status, blank.value.code) == (400, "invalid_passage_query")

        with pytest.raises(taisce.TaisceError) as unknown:
            await client.resolve_citation(fact_id=str(uuid.uuid4()))
        assert (unknown.value.status, unknown.value.code) == (404, "not_found")
