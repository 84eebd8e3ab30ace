"""Helpers of the record, recall and citation tests: clients, assertions, error codes."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from memory_kit import LiveServer


def api(server: LiveServer, project: str = "alpha", *, read_only: bool = False) -> httpx.Client:
    """An HTTP client of the live service carrying a fresh token of `project`."""
    token = server.token(project, read_only=read_only)
    return httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"})


def claim(
    subject: str,
    predicate: str,
    obj: str,
    statement: str,
    *,
    data_subject_id: str | None = "person-1",
    valid_from: str | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """One item of a records/assert batch."""
    item: dict[str, Any] = {
        "idempotency_key": key or str(uuid.uuid4()),
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "statement": statement,
    }
    if data_subject_id is not None:
        item["data_subject_id"] = data_subject_id
    if valid_from is not None:
        item["valid_from"] = valid_from
    return item


def assert_records(client: httpx.Client, *items: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert `items` in one batch; the receipts, in order."""
    answer = client.post("/v1/records/assert", json={"records": list(items)})
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()["records"]
    return records


def error(answer: httpx.Response) -> tuple[int, str]:
    """The status and contract code of a refusal."""
    return answer.status_code, answer.json()["error"]["code"]


def stored(client: httpx.Client) -> int | None:
    value: int | None = client.get("/v1/freshness").json()["stored"]
    return value


def at_once(*calls: tuple[httpx.Client, str, dict[str, Any]]) -> list[httpx.Response]:
    """POST each `(client, path, body)` from its own thread, released together; the answers."""
    start = threading.Barrier(len(calls))

    def post(call: tuple[httpx.Client, str, dict[str, Any]]) -> httpx.Response:
        client, path, body = call
        start.wait()
        return client.post(path, json=body)

    with ThreadPoolExecutor(len(calls)) as threads:
        return list(threads.map(post, calls))
