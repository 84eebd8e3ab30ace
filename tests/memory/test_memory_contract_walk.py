"""Every operation of the frozen v1 contract answers its success status for a valid request on a
deployment configured for all of them (notification destinations allowed, an embedder for report
candidates): one walk through the 31, each request built from what earlier answers returned.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from memory_kit import LiveServer
from records_kit import api, claim
from test_memory_contract_fields import contract

from satchel.memory.config import MemorySettings, NotifySettings

SUBJECT = "walker"


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(notify=NotifySettings(destinations=("localhost",), permit_private=True))


@dataclass
class Walk:
    """The walk so far: what each operation answered, and what later requests need."""

    client: httpx.Client
    answered: dict[str, int] = field(default_factory=dict)
    found: dict[str, Any] = field(default_factory=dict)

    def post(self, name: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.client.post(path, json=body)
        self.answered[name] = answer.status_code
        assert answer.status_code < 300, f"{name}: {answer.status_code} {answer.text}"
        result: dict[str, Any] = answer.json()
        return result


def _subjects(walk: Walk) -> None:
    registered = walk.post(
        "subject.register",
        "/v1/subjects/register",
        {"idempotency_key": str(uuid.uuid4()), "external_reference": SUBJECT, "label": "W"},
    )
    walk.post("subject.get", "/v1/subjects/get", {"id": registered["id"]})
    walk.post("subject.list", "/v1/subjects/list", {"limit": 10})
    walk.post(
        "subject.update",
        "/v1/subjects/update",
        {"id": registered["id"], "expected_version": registered["version"], "label": "Walker"},
    )


def _turns(walk: Walk) -> None:
    observed = walk.post(
        "observe",
        "/v1/observations",
        {
            "idempotency_key": str(uuid.uuid4()),
            "data_subject_id": SUBJECT,
            "messages": [{"role": "user", "content": "Ines waters the tomatoes every morning."}],
        },
    )
    walk.found["observation"] = observed["id"]
    answer = walk.client.get("/v1/freshness")
    walk.answered["freshness"] = answer.status_code


def _records(walk: Walk) -> None:
    item = claim("Ines", "lives_in", "Cork", "Ines lives in Cork.", data_subject_id=SUBJECT)
    record = walk.post("record.assert", "/v1/records/assert", {"records": [item]})["records"][0]
    walk.post("record.list", "/v1/records/list", {"data_subject_id": SUBJECT, "limit": 5})
    walk.post("record.history", "/v1/records/history", {"id": record["id"], "limit": 5})
    walk.post("citation.resolve", "/v1/citations/resolve", {"id": record["id"]})
    corrected = walk.post(
        "record.correct",
        "/v1/records/correct",
        {
            "records": [
                {
                    "id": record["id"],
                    "expected_version": record["version"],
                    "object": "Galway",
                    "statement": "Ines lives in Galway.",
                }
            ]
        },
    )["records"][0]
    walk.post(
        "record.retract",
        "/v1/records/retract",
        {"records": [{"id": corrected["id"], "expected_version": corrected["version"]}]},
    )


def _reads(walk: Walk) -> None:
    walk.post("recall", "/v1/recalls", {"question": "Where does Ines live?", "themes": True})
    walk.post("context.assemble", "/v1/contexts", {"data_subject_id": SUBJECT})
    passages = walk.post("embedding.search", "/v1/passages/search", {"question": "tomatoes"})
    chunk = passages["passages"][0]["chunk_id"]
    walk.post("message.get", "/v1/messages/get", {"chunk_id": chunk})
    walk.post("report_embedding.search", "/v1/reports/candidates", {"question": "gardening"})


def _entities(walk: Walk) -> None:
    listed = walk.post("entity.list", "/v1/entities/list", {"limit": 100})["entities"]
    ines = next(e for e in listed if e["name_preview"] == "Ines")
    walk.post("entity.get", "/v1/entities/get", {"id": ines["id"]})
    walk.post("entity_embedding.search", "/v1/entities/candidates", {"question": "Inez"})
    walk.post(
        "entity.purge",
        "/v1/entities/purge",
        {"id": ines["id"], "reason": "walked", "confirm": True},
    )


def _artifacts(walk: Walk) -> None:
    content = base64.b64encode(b"notes").decode()
    body = {"id": str(uuid.uuid4()), "data_subject_id": SUBJECT, "kind": "file"}
    put = walk.post("artifact.put", "/v1/artifacts/put", {**body, "content": content})
    walk.post("artifact.get", "/v1/artifacts/get", {"id": body["id"], "data_subject_id": SUBJECT})
    walk.post("artifact.list", "/v1/artifacts/list", {"data_subject_id": SUBJECT})
    walk.post(
        "artifact.delete",
        "/v1/artifacts/delete",
        {"id": body["id"], "data_subject_id": SUBJECT, "expected_version": put["version"]},
    )


def _notifications(walk: Walk) -> None:
    endpoint = walk.post(
        "notification.register",
        "/v1/notifications/endpoints/register",
        {"url": "https://localhost:9/hook"},
    )
    walk.post("notification.list", "/v1/notifications/endpoints/list", {})
    walk.post("notification.deliveries", "/v1/notifications/deliveries/list", {"limit": 10})
    walk.post("notification.disable", "/v1/notifications/endpoints/disable", {"id": endpoint["id"]})


def _governance(walk: Walk) -> None:
    walk.post("export", "/v1/exports", {"data_subject_id": SUBJECT})
    walk.post("erase", "/v1/erasures", {"data_subject_id": SUBJECT, "reason": "walked"})


STEPS: tuple[Callable[[Walk], None], ...] = (
    _subjects,
    _turns,
    _records,
    _reads,
    _entities,
    _artifacts,
    _notifications,
    _governance,
)


def test_every_operation_answers_its_success_status(live_server: LiveServer) -> None:
    with api(live_server) as client:
        walk = Walk(client)
        for step in STEPS:
            step(walk)
    expected = {op["name"]: op["success"] for op in contract()["operations"]}
    assert len(expected) == 31
    assert walk.answered == expected
