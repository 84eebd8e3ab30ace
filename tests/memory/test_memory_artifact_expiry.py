"""Expired artifacts free their project's allowance: the put that needs the room deletes them."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from memory_kit import LiveServer

from satchel.memory.config import MemorySettings

SMALL = MemorySettings(artifact_object_bytes=8, artifact_bytes=12, artifact_objects=2)


def put(client: httpx.Client, artifact: str, content: bytes, **extra: Any) -> httpx.Response:
    body = {
        "id": artifact,
        "data_subject_id": "ana",
        "kind": "state",
        "content": base64.b64encode(content).decode(),
    }
    return client.post("/v1/artifacts/put", json={**body, **extra})


def expire(live_server: LiveServer, *artifacts: str) -> None:
    """Move the artifacts' deadline into the past, as time passing would."""
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute(
            "UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = ANY(%s)",
            ([uuid.UUID(artifact) for artifact in artifacts],),
        )


def rows(live_server: LiveServer, *sources: str) -> tuple[int, int]:
    """How many artifact rows and source observations of `sources` are stored."""
    with psycopg.connect(live_server.database_url) as conn:
        found = conn.execute(
            "SELECT (SELECT count(*) FROM artifacts WHERE source_observation_id = ANY(%(s)s)),"
            " (SELECT count(*) FROM observations WHERE id = ANY(%(s)s))",
            {"s": [uuid.UUID(source) for source in sources]},
        ).fetchone()
    assert found is not None
    return found[0], found[1]


@pytest.mark.parametrize("memory_settings", [SMALL], ids=["8-byte objects, 12 bytes, 2 objects"])
def test_a_project_full_of_expired_artifacts_accepts_a_new_put(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    sources = [put(alpha, first, b"12345678"), put(alpha, second, b"1234")]
    assert [answer.status_code for answer in sources] == [200, 200]
    assert put(alpha, str(uuid.uuid4()), b"1").json()["error"]["code"] == "storage_capacity"
    expire(live_server, first, second)
    stored = [answer.json()["source_observation_id"] for answer in sources]
    assert rows(live_server, *stored) == (2, 2)  # expired, but nothing has needed the room yet

    third = put(alpha, str(uuid.uuid4()), b"12345678")  # 2 objects and 12 bytes were held
    assert third.status_code == 200, third.text
    assert rows(live_server, *stored) == (0, 0)  # deleted with their sources by that put
    for used in (first, second):  # an expired id stays used once its row is gone
        assert put(alpha, used, b"1").json()["error"]["code"] == "artifact_conflict"
    assert put(alpha, str(uuid.uuid4()), b"1234").status_code == 200  # 12 of 12 bytes, 2 objects
    assert put(alpha, str(uuid.uuid4()), b"1").json()["error"]["code"] == "storage_capacity"


@pytest.mark.parametrize("memory_settings", [SMALL], ids=["8-byte objects, 12 bytes, 2 objects"])
def test_an_overwrite_may_grow_into_the_room_expired_artifacts_held(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    kept, old = str(uuid.uuid4()), str(uuid.uuid4())
    version = put(alpha, kept, b"1234").json()["version"]
    assert put(alpha, old, b"12345678").status_code == 200
    grown = {"expected_version": version}
    assert put(alpha, kept, b"12345", **grown).json()["error"]["code"] == "storage_capacity"
    expire(live_server, old)
    assert put(alpha, kept, b"12345678", **grown).json()["bytes"] == 8
