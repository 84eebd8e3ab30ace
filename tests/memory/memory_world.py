"""A project with two people and every kind of row derived from them, built over HTTP (plus
what a formation worker would write, in SQL)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import httpx
import memory_seed as seed
import psycopg
from memory_kit import LiveServer

ANN = "person-ann-5c1e"
BOB = "person-bob-9d27"


def client(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"})


def observe(http: httpx.Client, subject: str | None, text: str, key: str | None = None) -> str:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if subject is not None:
        body["data_subject_id"] = subject
    if key is not None:
        body["idempotency_key"] = key
    answer = http.post("/v1/observations", json=body)
    assert answer.status_code == 201, answer.text
    observation_id: str = answer.json()["id"]
    return observation_id


def assert_record(
    http: httpx.Client, subject: str, names: tuple[str, str], statement: str, key: str
) -> dict[str, Any]:
    record = {
        "idempotency_key": key,
        "data_subject_id": subject,
        "subject": names[0],
        "predicate": "works_at",
        "object": names[1],
        "statement": statement,
    }
    answer = http.post("/v1/records/assert", json={"records": [record]})
    assert answer.status_code == 200, answer.text
    written: dict[str, Any] = answer.json()["records"][0]
    return written


class World:
    """A project (alpha) with Ann (turns, authored and corrected records, a fact formed from a
    turn and feedback about it, a segment, an artifact, a registry entry) and Bob, who names
    the same company."""

    def __init__(self, server: LiveServer, project: str = "alpha") -> None:
        self.project = project
        self.http = client(server, server.token(project))
        self.key = str(uuid.uuid4())
        self.ann_turns = [
            observe(self.http, ANN, "Ann-marker-1 I work at Ensera.", self.key),
            observe(self.http, ANN, "Ann-marker-2 I live in Cork."),
            observe(self.http, ANN, "Ann-marker-3 I speak Irish."),
        ]
        self.bob_turns = [observe(self.http, BOB, "Bob-marker-1 I work at Ensera too.")]
        self.shared = observe(self.http, None, "Project-marker nobody in particular.")
        self.record_key = str(uuid.uuid4())
        self.record = assert_record(
            self.http, ANN, ("Ann Lynch", "Ensera"), "Ann-record works at Ensera", self.record_key
        )
        corrected = self.http.post(
            "/v1/records/correct",
            json={
                "records": [
                    {
                        "id": self.record["id"],
                        "expected_version": self.record["version"],
                        "object": "Ensera Labs",
                        "statement": "Ann-correction works at Ensera Labs",
                    }
                ]
            },
        )
        assert corrected.status_code == 200, corrected.text
        self.correction = corrected.json()["records"][0]
        self.bob_record = assert_record(
            self.http, BOB, ("Bob", "Ensera"), "Bob-record works at Ensera", str(uuid.uuid4())
        )
        self.artifact = str(uuid.uuid4())
        put = self.http.post(
            "/v1/artifacts/put",
            json={
                "id": self.artifact,
                "data_subject_id": ANN,
                "kind": "state",
                "name": "session",
                "content": base64.b64encode(b"Ann-artifact-bytes").decode(),
            },
        )
        assert put.status_code == 200, put.text
        self.registration_key = str(uuid.uuid4())
        registered = self.http.post(
            "/v1/subjects/register",
            json={
                "idempotency_key": self.registration_key,
                "external_reference": ANN,
                "label": "Ann-label",
            },
        )
        assert registered.status_code == 200, registered.text
        self.registry = registered.json()["id"]
        with psycopg.connect(server.database_url, autocommit=True) as conn:
            project_id = seed.project_id(conn, self.project)
            self.formed_fact = seed.fact(
                conn, project_id, ANN, self.ann_turns[1], ("Ann Lynch", "Cork"), "lives_in"
            )
            self.segment = seed.segment(conn, project_id, ANN, self.ann_turns, "Ann-summary")
        reported = self.http.post(
            "/v1/feedback/record",
            json={"record_id": str(self.formed_fact), "note": "Ann-feedback moved to Galway"},
        )
        assert reported.status_code == 200, reported.text
        self.feedback = reported.json()["id"]

    def erase(self, **body: Any) -> httpx.Response:
        return self.http.post("/v1/erasures", json=body)

    def export(self, **body: Any) -> dict[str, Any]:
        answer = self.http.post("/v1/exports", json=body)
        assert answer.status_code == 200, answer.text
        exported: dict[str, Any] = answer.json()
        return exported
