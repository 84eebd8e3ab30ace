"""POST /v1/artifacts/{put,get,list,delete}: versions, replays, tombstones and the log."""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import httpx
import psycopg
import pytest
import taisce
from memory_kit import LiveServer

from satchel.memory.config import MemorySettings, SettingError


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def call(client: httpx.Client, op: str, status: int = 200, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/v1/artifacts/{op}", json=body)
    assert answer.status_code == status, answer.text
    result: dict[str, Any] = answer.json()
    return result


def code(client: httpx.Client, op: str, **body: Any) -> tuple[int, str]:
    answer = client.post(f"/v1/artifacts/{op}", json=body)
    return answer.status_code, answer.json()["error"]["code"]


def put(client: httpx.Client, artifact: str, content: bytes, **extra: Any) -> dict[str, Any]:
    body = {"id": artifact, "data_subject_id": "ana", "kind": "state", "content": b64(content)}
    return call(client, "put", **{**body, **extra})


def test_create_writes_a_formed_source_that_takes_a_log_offset(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    alpha.post("/v1/observations", json={"messages": [{"role": "user", "content": "hi"}]})
    artifact = str(uuid.uuid4())
    created = put(alpha, artifact, b"\x00\x01state", name="session")
    assert created["id"] == artifact
    assert created["data_subject_id"] == "ana"
    assert (created["kind"], created["name"], created["bytes"]) == ("state", "session", 7)
    assert created["replayed"] is False
    assert uuid.UUID(created["version"]).version == 4
    assert created["created_at"] == created["updated_at"]
    assert created["expires_at"] > created["created_at"]
    with psycopg.connect(live_server.database_url) as conn:
        source = conn.execute(
            "SELECT kind, log_offset, data_subject_id, formed_at IS NOT NULL FROM observations"
            " WHERE id = %s",
            (created["source_observation_id"],),
        ).fetchone()
        token_id = conn.execute("SELECT id FROM tokens").fetchone()
    assert source == ("artifact", 1, "ana", True)
    assert token_id is not None and created["authored_by"] == str(token_id[0])
    assert alpha.get("/v1/freshness").json() == {
        "scope": "alpha",
        "stored": 1,
        "formed": 1,
        "parked": 0,
    }
    got = call(alpha, "get", id=artifact)
    assert got == {
        **{k: v for k, v in created.items() if k != "replayed"},
        "content": b64(b"\x00\x01state"),
    }


def test_versions_replays_and_conflicts(alpha: httpx.Client) -> None:
    artifact = str(uuid.uuid4())
    first = put(alpha, artifact, b"v1")
    again = put(alpha, artifact, b"v1")
    assert again["replayed"] is True
    assert again["version"] == first["version"]
    assert alpha.get("/v1/freshness").json()["stored"] == 0  # a replay claims no offset

    body = {"id": artifact, "data_subject_id": "ana", "kind": "state"}
    assert code(alpha, "put", **body, content=b64(b"other")) == (409, "artifact_conflict")
    assert code(alpha, "put", **{**body, "kind": "file"}, content=b64(b"v1")) == (
        409,
        "artifact_conflict",
    )
    assert code(alpha, "put", **{**body, "data_subject_id": "ben"}, content=b64(b"v1")) == (
        409,
        "artifact_conflict",
    )

    second = put(alpha, artifact, b"v2", expected_version=first["version"])
    assert second["replayed"] is False
    assert second["version"] != first["version"]
    assert second["source_observation_id"] == first["source_observation_id"]
    retried = put(alpha, artifact, b"v2", expected_version=first["version"])
    assert (retried["replayed"], retried["version"]) == (True, second["version"])
    assert code(alpha, "put", **body, content=b64(b"v3"), expected_version=first["version"]) == (
        409,
        "artifact_conflict",
    )
    assert code(alpha, "put", **body, content=b64(b"v3"), expected_version=str(uuid.uuid4())) == (
        409,
        "artifact_conflict",
    )
    assert call(alpha, "get", id=artifact)["content"] == b64(b"v2")
    # Without a version, a put still replays only the creation.
    assert put(alpha, artifact, b"v1")["version"] == second["version"]
    assert alpha.get("/v1/freshness").json()["stored"] == 0


def test_a_version_for_an_unknown_artifact_is_not_found(alpha: httpx.Client) -> None:
    status = code(
        alpha,
        "put",
        id=str(uuid.uuid4()),
        data_subject_id="ana",
        kind="file",
        content="",
        expected_version=str(uuid.uuid4()),
    )
    assert status == (404, "not_found")


def test_delete_leaves_a_tombstone(live_server: LiveServer, alpha: httpx.Client) -> None:
    artifact = str(uuid.uuid4())
    created = put(alpha, artifact, b"")
    assert created["bytes"] == 0
    assert code(alpha, "delete", id=artifact) == (400, "invalid_artifact")
    assert code(alpha, "delete", id=artifact, expected_version=str(uuid.uuid4())) == (
        409,
        "artifact_conflict",
    )
    assert code(
        alpha, "delete", id=artifact, expected_version=created["version"], data_subject_id="ben"
    ) == (404, "not_found")
    assert call(
        alpha, "delete", id=artifact, expected_version=created["version"], data_subject_id="ana"
    ) == {"deleted": True}
    assert code(alpha, "get", id=artifact) == (404, "not_found")
    assert code(alpha, "delete", id=artifact, expected_version=created["version"]) == (
        404,
        "not_found",
    )
    assert code(alpha, "put", id=artifact, data_subject_id="ana", kind="state", content="") == (
        409,
        "artifact_conflict",
    )
    with psycopg.connect(live_server.database_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM observations WHERE id = %s", (created["source_observation_id"],)
        ).fetchone()
    assert left == (0,)


def test_an_erased_artifact_id_stays_used(live_server: LiveServer, alpha: httpx.Client) -> None:
    artifact = str(uuid.uuid4())
    created = put(alpha, artifact, b"x")
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("DELETE FROM observations WHERE id = %s", (created["source_observation_id"],))
    assert code(alpha, "get", id=artifact) == (404, "not_found")
    assert code(alpha, "put", id=artifact, data_subject_id="ana", kind="state", content="") == (
        409,
        "artifact_conflict",
    )


def test_get_checks_the_subject_and_expiry(live_server: LiveServer, alpha: httpx.Client) -> None:
    artifact = str(uuid.uuid4())
    put(alpha, artifact, b"mine")
    assert call(alpha, "get", id=artifact, data_subject_id="ana")["content"] == b64(b"mine")
    assert code(alpha, "get", id=artifact, data_subject_id="ben") == (404, "not_found")
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("UPDATE artifacts SET expires_at = now() - interval '1 second'")
    assert code(alpha, "get", id=artifact) == (404, "not_found")
    assert call(alpha, "list")["artifacts"] == []
    assert code(alpha, "put", id=artifact, data_subject_id="ana", kind="state", content="") == (
        409,
        "artifact_conflict",
    )


def test_list_filters_and_pages_by_id(alpha: httpx.Client) -> None:
    made = sorted(str(uuid.uuid4()) for _ in range(5))
    for index, artifact in enumerate(made):
        put(
            alpha,
            artifact,
            b"x",
            kind="file" if index % 2 else "state",
            name=f"notes_{index}" if index < 3 else f"note%{index}",
            data_subject_id="ana" if index != 4 else "ben",
        )
    first = call(alpha, "list", limit=2)
    assert [a["id"] for a in first["artifacts"]] == made[:2]
    assert first["next"] == {"id": made[1]}
    assert "content" not in first["artifacts"][0]
    second = call(alpha, "list", limit=2, after=first["next"]["id"])
    assert [a["id"] for a in second["artifacts"]] == made[2:4]
    last = call(alpha, "list", limit=2, after=second["next"]["id"])
    assert [a["id"] for a in last["artifacts"]] == made[4:]
    assert "next" not in last
    assert [a["id"] for a in call(alpha, "list", kind="file")["artifacts"]] == [made[1], made[3]]
    assert [a["id"] for a in call(alpha, "list", data_subject_id="ben")["artifacts"]] == [made[4]]
    assert [a["id"] for a in call(alpha, "list", name_prefix="notes_")["artifacts"]] == made[:3]
    assert [a["id"] for a in call(alpha, "list", name_prefix="note%")["artifacts"]] == made[3:]
    assert call(alpha, "list", name_prefix="note_")["artifacts"] == []  # "_" is literal


def test_another_project_sees_nothing_and_may_use_the_same_id(live_server: LiveServer) -> None:
    tokens = {name: live_server.token(name) for name in ("alpha", "beta")}
    clients = {
        name: httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
        )
        for name, token in tokens.items()
    }
    try:
        artifact = str(uuid.uuid4())
        mine = put(clients["alpha"], artifact, b"alpha's")
        beta = clients["beta"]
        assert code(beta, "get", id=artifact) == (404, "not_found")
        assert code(beta, "delete", id=artifact, expected_version=mine["version"]) == (
            404,
            "not_found",
        )
        assert code(beta, "put", id=artifact, data_subject_id="ana", kind="state", content="",
                    expected_version=mine["version"]) == (404, "not_found")  # fmt: skip
        assert call(beta, "list")["artifacts"] == []
        theirs = put(beta, artifact, b"beta's own")
        assert theirs["replayed"] is False
        assert call(beta, "get", id=artifact)["content"] == b64(b"beta's own")
        assert call(clients["alpha"], "get", id=artifact)["content"] == b64(b"alpha's")
    finally:
        for client in clients.values():
            client.close()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": "not-a-uuid"}, "invalid_artifact"),
        ({"id": str(uuid.uuid4()).replace("-", "")}, "invalid_artifact"),
        ({"data_subject_id": ""}, "invalid_artifact"),
        ({"data_subject_id": "  "}, "invalid_artifact"),
        ({"data_subject_id": "x" * 1025}, "invalid_artifact"),
        ({"kind": "blob"}, "invalid_artifact"),
        ({"kind": None}, "invalid_artifact"),
        ({"name": "n" * 257}, "invalid_artifact"),
        ({"name": " "}, "invalid_artifact"),
        ({"expected_version": "v1"}, "invalid_artifact"),
        ({"content": b64(bytes(512 * 1024 + 1))}, "invalid_artifact"),
        ({"content": "AP=="}, "invalid_body"),  # not canonical
        ({"content": "AAE"}, "invalid_body"),  # no padding
        ({"content": "AA E="}, "invalid_body"),
        ({"content": [0, 255]}, "invalid_body"),
        ({"content": None}, "invalid_body"),
    ],
)
def test_bad_puts_are_refused(alpha: httpx.Client, body: dict[str, Any], expected: str) -> None:
    good = {"id": str(uuid.uuid4()), "data_subject_id": "ana", "kind": "state", "content": "AA=="}
    assert code(alpha, "put", **{**good, **body}) == (400, expected)


def test_absent_content_and_bad_reads_are_invalid_artifact(alpha: httpx.Client) -> None:
    missing = {"id": str(uuid.uuid4()), "data_subject_id": "ana", "kind": "state"}
    assert code(alpha, "put", **missing) == (400, "invalid_artifact")
    assert code(alpha, "get", id="bad") == (400, "invalid_artifact")
    assert code(alpha, "delete", id="bad", expected_version=str(uuid.uuid4())) == (
        400,
        "invalid_artifact",
    )
    for body in ({"limit": 101}, {"limit": -1}, {"kind": "blob"}, {"after": "x"}):
        assert code(alpha, "list", **body) == (400, "invalid_artifact")
    largest = put(alpha, str(uuid.uuid4()), bytes(256 * 1024))
    assert largest["bytes"] == 256 * 1024


def test_an_object_over_the_default_allowance_is_storage_capacity(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    """256 KiB an object by default: more (up to the 512 KiB any allowance admits) is 429."""
    artifact = str(uuid.uuid4())

    async def store(content: bytes) -> dict[str, Any]:
        async with taisce.Client(live_server.base_url, live_server.token("alpha")) as client:
            return await client.put_artifact(
                artifact_id=artifact, data_subject_id="ana", kind="file", content=content
            )

    with pytest.raises(taisce.TaisceError) as full:
        asyncio.run(store(bytes(256 * 1024 + 1)))
    assert (full.value.status, full.value.code) == (429, "storage_capacity")
    answer = alpha.post(
        "/v1/artifacts/put",
        json={"id": artifact, "data_subject_id": "ana", "kind": "file", "content": b64(b"x" * 3)},
    )
    assert answer.status_code == 200 and "retry-after" not in answer.headers
    assert [item["id"] for item in call(alpha, "list")["artifacts"]] == [artifact]
    refused = alpha.post(
        "/v1/artifacts/put",
        json={
            "id": artifact,
            "expected_version": answer.json()["version"],
            "data_subject_id": "ana",
            "kind": "file",
            "content": b64(bytes(256 * 1024 + 1)),
        },
    )
    assert refused.status_code == 429 and "retry-after" not in refused.headers
    assert call(alpha, "get", id=artifact)["content"] == b64(b"xxx")  # left as it was


SMALL = MemorySettings(artifact_object_bytes=8, artifact_bytes=12, artifact_objects=2)


@pytest.mark.parametrize("memory_settings", [SMALL], ids=["8-byte objects, 12 bytes, 2 objects"])
def test_the_projects_totals_bound_what_it_holds(live_server: LiveServer) -> None:
    first, second, third = (str(uuid.uuid4()) for _ in range(3))
    with client(live_server, "alpha") as alpha, client(live_server, "beta") as beta:
        one = put(alpha, first, b"12345678")
        put(alpha, second, b"1234")
        assert code_of(alpha, third, b"1") == (429, "storage_capacity")  # two objects already
        assert put(alpha, first, b"12345678")["replayed"] is True  # a replay writes nothing
        shrunk = put(alpha, first, b"123", expected_version=one["version"])  # 7 of 12 bytes
        again = {"expected_version": shrunk["version"]}
        assert code_of(alpha, first, b"123456789", **again) == (429, "storage_capacity")  # > 8
        assert put(alpha, first, b"12345678", **again)["bytes"] == 8  # 12 of 12 bytes
        version = call(alpha, "get", id=second)["version"]
        call(alpha, "delete", id=second, expected_version=version)
        assert code_of(alpha, third, b"12345") == (429, "storage_capacity")  # 13 of 12 bytes
        assert put(alpha, third, b"1234")["bytes"] == 4
        assert sum(item["bytes"] for item in call(alpha, "list")["artifacts"]) == 12
        assert put(beta, str(uuid.uuid4()), b"12345678")["bytes"] == 8  # its own allowance


def client(live_server: LiveServer, project: str) -> httpx.Client:
    token = live_server.token(project)
    return httpx.Client(base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"})


def code_of(client: httpx.Client, artifact: str, content: bytes, **extra: Any) -> tuple[int, str]:
    body = {"id": artifact, "data_subject_id": "ana", "kind": "state", "content": b64(content)}
    return code(client, "put", **{**body, **extra})


def test_allowances_are_read_from_the_environment() -> None:
    settings = MemorySettings.from_env(
        {
            "SATCHEL_ARTIFACT_OBJECT_BYTES": "1024",
            "SATCHEL_ARTIFACT_BYTES": "4096",
            "SATCHEL_ARTIFACT_OBJECTS": "3",
        }
    )
    assert (settings.artifact_object_bytes, settings.artifact_bytes) == (1024, 4096)
    assert settings.artifact_objects == 3
    default = MemorySettings.from_env({})
    assert (default.artifact_object_bytes, default.artifact_bytes) == (256 * 1024, 16 * 1024**2)
    assert default.artifact_objects == 128
    for name, value in (
        ("SATCHEL_ARTIFACT_OBJECT_BYTES", str(512 * 1024 + 1)),
        ("SATCHEL_ARTIFACT_OBJECTS", "0"),
        ("SATCHEL_ARTIFACT_BYTES", "lots"),
        ("SATCHEL_ARTIFACT_BYTES", "100"),  # less than one object may hold
    ):
        with pytest.raises(SettingError, match=name):
            MemorySettings.from_env({name: value})


def test_read_only_tokens_read_but_do_not_write(live_server: LiveServer) -> None:
    writer = live_server.token("alpha")
    reader = live_server.token("alpha", read_only=True)
    artifact = str(uuid.uuid4())
    with (
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {writer}"}
        ) as write,
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {reader}"}
        ) as read,
    ):
        created = put(write, artifact, b"x")
        assert call(read, "get", id=artifact)["content"] == b64(b"x")
        assert len(call(read, "list")["artifacts"]) == 1
        assert code(read, "put", id=artifact, data_subject_id="ana", kind="state", content="") == (
            403,
            "forbidden",
        )
        assert code(read, "delete", id=artifact, expected_version=created["version"]) == (
            403,
            "forbidden",
        )
