"""The frozen v1 contract: the served `/openapi.json` names every operation of
`taisce-contract-v1-fields.json` (beside this file) with its method, success status and every
request and response field (and the nested field lists); the notification routes also document
the 501 a deployment with no destination answers (as this one). That each operation answers its
success status on a deployment configured for it: `test_memory_contract_walk.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from memory_kit import SCHEMA_WAIT_S, LiveServer

FIELDS_FILE = Path(__file__).with_name("taisce-contract-v1-fields.json")
# Answered with their refusal here: this deployment names no notification destination.
REFUSED = {
    "/v1/notifications/endpoints/register": (501, "notifications_unavailable"),
    "/v1/notifications/endpoints/list": (501, "notifications_unavailable"),
    "/v1/notifications/endpoints/disable": (501, "notifications_unavailable"),
    "/v1/notifications/deliveries/list": (501, "notifications_unavailable"),
}
# Where each nested field list of the file lives: (path, "request" or "response", field path).
NESTED = {
    "recall.facts[]": ("/v1/recalls", "response", ("facts", "[]")),
    "recall.facts[].evidence": ("/v1/recalls", "response", ("facts", "[]", "evidence")),
    "recall.passages[]": ("/v1/recalls", "response", ("passages", "[]")),
    "recall.reports[]": ("/v1/recalls", "response", ("reports", "[]")),
    "recall.controls": ("/v1/recalls", "response", ("controls",)),
    "recall.anchors[]": ("/v1/recalls", "response", ("anchors", "[]")),
    "recall.reach": ("/v1/recalls", "response", ("reach",)),
    "passages.search.passages[]": ("/v1/passages/search", "response", ("passages", "[]")),
    "contexts.watermark": ("/v1/contexts", "response", ("watermark",)),
    "records.assert.records[]": ("/v1/records/assert", "request", ("records", "[]")),
    "records.correct.records[]": ("/v1/records/correct", "request", ("records", "[]")),
    "records.retract.records[]": ("/v1/records/retract", "request", ("records", "[]")),
}


def contract() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(FIELDS_FILE.read_text())
    return document


@pytest.fixture
def spec(live_server: LiveServer) -> dict[str, Any]:
    with httpx.Client(base_url=live_server.base_url, timeout=SCHEMA_WAIT_S) as anonymous:
        answer = anonymous.get("/openapi.json")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema behind `$ref`s and the `X | None` of an optional field."""
    while True:
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in schema and "properties" not in schema:
            branches = [b for b in schema["anyOf"] if b != {"type": "null"}]
            if len(branches) != 1:
                return schema
            schema = branches[0]
        else:
            return schema


def fields(spec: dict[str, Any], schema: dict[str, Any] | None, steps: tuple[str, ...]) -> set[str]:
    """The property names of the object at `steps` ("[]" for an array's items) under `schema`."""
    if schema is None:
        return set()
    schema = resolve(spec, schema)
    for step in steps:
        child = schema.get("items") if step == "[]" else schema.get("properties", {}).get(step)
        if not isinstance(child, dict):
            return set()
        schema = resolve(spec, child)
    return set(schema.get("properties", {}))


def request_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    schema: dict[str, Any] | None = body.get("schema")
    return schema


def response_schema(operation: dict[str, Any], status: int) -> dict[str, Any] | None:
    answer = operation.get("responses", {}).get(str(status), {})
    schema: dict[str, Any] | None = (
        answer.get("content", {}).get("application/json", {}).get("schema")
    )
    return schema


def missing_from(spec: dict[str, Any]) -> list[str]:
    """Everything of the frozen contract the schema does not name, one line each."""
    found: list[str] = []
    frozen = contract()
    by_path: dict[str, dict[str, Any]] = {}
    for op in frozen["operations"]:
        where = f"{op['method']} {op['path']} ({op['name']})"
        operation = spec["paths"].get(op["path"], {}).get(op["method"].lower())
        if operation is None:
            found.append(f"{where}: not served")
            continue
        by_path[op["path"]] = operation
        status = op["success"]
        if str(status) not in operation.get("responses", {}):
            found.append(f"{where}: no {status} answer")
        if op["path"] in REFUSED:
            refused, code = REFUSED[op["path"]]
            if str(refused) not in operation.get("responses", {}):
                found.append(f"{where}: its {refused} {code} answer is not documented")
        for field in sorted(set(op["request"]) - fields(spec, request_schema(operation), ())):
            found.append(f"{where}: request field {field}")
        answered = fields(spec, response_schema(operation, status), ())
        for field in sorted(set(op["response"]) - answered):
            found.append(f"{where}: response field {field}")
    for name, names in frozen["nested"].items():
        path, side, steps = NESTED[name]
        operation = by_path.get(path)
        if operation is None:
            continue
        schema = request_schema(operation) if side == "request" else response_schema(operation, 200)
        for field in sorted(set(names) - fields(spec, schema, steps)):
            found.append(f"{path} {side} {name}: field {field}")
    return found


def test_every_nested_list_of_the_contract_is_placed() -> None:
    assert set(contract()["nested"]) == set(NESTED)


def test_the_schema_names_every_operation_status_and_field(spec: dict[str, Any]) -> None:
    missing = missing_from(spec)
    assert not missing, "the served /openapi.json lacks:\n" + "\n".join(missing)


def test_routes_not_provided_answer_as_a_deployment_without_them(
    live_server: LiveServer,
) -> None:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        for path, expected in REFUSED.items():
            answer = client.post(path, json={})
            assert (answer.status_code, answer.json()["error"]["code"]) == expected, path
