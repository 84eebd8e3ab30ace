"""POST /v1/subjects/{register,get,list,update}: the optional subject registry."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import psycopg
import pytest
from memory_kit import LiveServer


def call(client: httpx.Client, op: str, status: int = 200, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/v1/subjects/{op}", json=body)
    assert answer.status_code == status, answer.text
    result: dict[str, Any] = answer.json()
    return result


def code(client: httpx.Client, op: str, **body: Any) -> tuple[int, str]:
    answer = client.post(f"/v1/subjects/{op}", json=body)
    return answer.status_code, answer.json()["error"]["code"]


def register(client: httpx.Client, key: str | None = None, **fields: Any) -> dict[str, Any]:
    return call(client, "register", idempotency_key=key or str(uuid.uuid4()), **fields)


def test_register_replay_and_conflicts(live_server: LiveServer, alpha: httpx.Client) -> None:
    key = str(uuid.uuid4())
    made = register(alpha, key, external_reference="crm:42", label="Ana")
    assert set(made) == {
        "id",
        "version",
        "external_reference",
        "label",
        "updated_by",
        "created_at",
        "updated_at",
        "inactive_after",
        "replayed",
    }
    assert (made["external_reference"], made["label"], made["replayed"]) == ("crm:42", "Ana", False)
    assert made["inactive_after"] is None
    with psycopg.connect(live_server.database_url) as conn:
        token_id = conn.execute("SELECT id FROM tokens").fetchone()
    assert token_id is not None and made["updated_by"] == str(token_id[0])

    again = register(alpha, key.upper(), external_reference="crm:42", label="Ana")
    assert again == {**made, "replayed": True}
    assert code(alpha, "register", idempotency_key=key, external_reference="crm:42") == (
        409,
        "subject_conflict",
    )
    assert code(
        alpha, "register", idempotency_key=str(uuid.uuid4()), external_reference="crm:42"
    ) == (409, "subject_conflict")

    bare = register(alpha)
    assert "external_reference" not in bare
    assert bare["label"] == ""


def test_an_erased_registration_cannot_come_back(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    key = str(uuid.uuid4())
    made = register(alpha, key, label="Ana")
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("DELETE FROM subjects WHERE id = %s", (made["id"],))
    assert code(alpha, "register", idempotency_key=key, label="Ana") == (409, "subject_conflict")


def test_get_by_id_or_reference(live_server: LiveServer, alpha: httpx.Client) -> None:
    made = register(alpha, external_reference="crm:7", label="Ben")
    expected = {k: v for k, v in made.items() if k != "replayed"}
    assert call(alpha, "get", id=made["id"]) == expected
    assert call(alpha, "get", external_reference="crm:7") == expected
    assert code(alpha, "get", id=str(uuid.uuid4())) == (404, "not_found")
    assert code(alpha, "get", external_reference="crm:8") == (404, "not_found")
    for body in (
        {},
        {"id": made["id"], "external_reference": "crm:7"},
        {"id": "nope"},
        {"id": made["id"].replace("-", "")},
        {"external_reference": " "},
        {"external_reference": "r" * 1025},
    ):
        assert code(alpha, "get", **body) == (400, "invalid_subject")
    beta = live_server.token("beta", read_only=True)
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {beta}"}
    ) as other:
        assert code(other, "get", id=made["id"]) == (404, "not_found")
        assert code(other, "get", external_reference="crm:7") == (404, "not_found")
        assert call(other, "list") == {"subjects": []}
        assert code(other, "update", id=made["id"], expected_version=made["version"]) == (
            403,
            "forbidden",
        )


def test_list_pages_by_id(alpha: httpx.Client) -> None:
    ids = sorted(register(alpha, label=f"s{i}")["id"] for i in range(5))
    first = call(alpha, "list", limit=3)
    assert [s["id"] for s in first["subjects"]] == ids[:3]
    assert first["next"] == {"id": ids[2]}
    assert "replayed" not in first["subjects"][0]
    rest = call(alpha, "list", after=first["next"]["id"])
    assert [s["id"] for s in rest["subjects"]] == ids[3:]
    assert "next" not in rest
    for body in ({"limit": 101}, {"limit": -1}, {"after": "x"}):
        assert code(alpha, "list", **body) == (400, "invalid_subject")


def test_update_with_versions(live_server: LiveServer, alpha: httpx.Client) -> None:
    made = register(alpha, external_reference="crm:1", label="Ana")
    other = register(alpha, external_reference="crm:2")
    moved = call(
        alpha,
        "update",
        id=made["id"],
        expected_version=made["version"],
        external_reference="crm:9",
        label="Ana B.",
    )
    assert moved["replayed"] is False
    assert moved["version"] != made["version"]
    assert (moved["external_reference"], moved["label"]) == ("crm:9", "Ana B.")
    assert moved["created_at"] == made["created_at"]
    retried = call(
        alpha,
        "update",
        id=made["id"],
        expected_version=made["version"],
        external_reference="crm:9",
        label="Ana B.",
    )
    assert retried == {**moved, "replayed": True}
    stale = {"id": made["id"], "expected_version": made["version"], "label": "Other"}
    assert code(alpha, "update", **stale) == (409, "subject_conflict")
    taken = {"id": made["id"], "expected_version": moved["version"], "external_reference": "crm:2"}
    assert code(alpha, "update", **taken) == (409, "subject_conflict")
    cleared = call(alpha, "update", id=made["id"], expected_version=moved["version"])
    assert "external_reference" not in cleared
    assert cleared["label"] == ""
    assert code(alpha, "get", external_reference="crm:9") == (404, "not_found")
    assert call(alpha, "get", id=other["id"])["external_reference"] == "crm:2"
    assert code(alpha, "update", id=str(uuid.uuid4()), expected_version=str(uuid.uuid4())) == (
        404,
        "not_found",
    )
    assert code(alpha, "update", id=made["id"]) == (400, "invalid_subject")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"idempotency_key": "not-a-uuid"},
        {"idempotency_key": "UUID", "label": "   "},
        {"idempotency_key": "UUID", "label": "l" * 257},
        {"idempotency_key": "UUID", "external_reference": "r" * 1025},
        {"idempotency_key": "UUID", "external_reference": "a\x00b"},
    ],
)
def test_bad_registrations_are_invalid_subject(alpha: httpx.Client, body: dict[str, Any]) -> None:
    if body.get("idempotency_key") == "UUID":
        body = {**body, "idempotency_key": str(uuid.uuid4())}
    assert code(alpha, "register", **body) == (400, "invalid_subject")


def test_read_only_tokens_only_read(live_server: LiveServer, alpha: httpx.Client) -> None:
    made = register(alpha, label="Ana")
    reader = live_server.token("alpha", read_only=True)
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {reader}"}
    ) as read:
        assert call(read, "get", id=made["id"])["label"] == "Ana"
        assert len(call(read, "list")["subjects"]) == 1
        assert code(read, "register", idempotency_key=str(uuid.uuid4())) == (403, "forbidden")
        assert code(read, "update", id=made["id"], expected_version=made["version"]) == (
            403,
            "forbidden",
        )
