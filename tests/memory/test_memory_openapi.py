"""`/openapi.json` matches what is served: every route and method, closed request schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memory_kit import SCHEMA_WAIT_S, LiveServer
from memory_routes import memory_app, served

METHODS = ("get", "post", "put", "delete", "patch", "head", "options")


@pytest.fixture
def spec(live_server: LiveServer) -> dict[str, Any]:
    with httpx.Client(base_url=live_server.base_url, timeout=SCHEMA_WAIT_S) as anonymous:
        answer = anonymous.get("/openapi.json")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method.upper(), operation


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        schema = spec["components"]["schemas"][name]
    return schema


def objects(
    spec: dict[str, Any], schema: dict[str, Any], seen: set[int]
) -> Iterator[dict[str, Any]]:
    """Every object schema reachable from `schema`."""
    schema = resolve(spec, schema)
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if schema.get("type") == "object":
        yield schema
    children: list[dict[str, Any]] = [*schema.get("properties", {}).values()]
    for key in ("anyOf", "oneOf", "allOf"):
        children.extend(schema.get(key, []))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    for child in children:
        yield from objects(spec, child, seen)


def test_the_schema_lists_exactly_the_served_routes(spec: dict[str, Any]) -> None:
    listed = {(path, method) for path, method, _ in operations(spec)}
    routes = {(path, method) for path, methods, _ in served(memory_app()) for method in methods}
    assert listed == routes
    assert ("/v1/erasures", "POST") in listed
    assert ("/v1/freshness", "GET") in listed


def test_every_listed_route_answers_its_method(
    live_server: LiveServer, spec: dict[str, Any]
) -> None:
    token = live_server.token("alpha", read_only=True)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers) as client:
        for path, method, _ in operations(spec):
            answer = client.request(method, path, content=b"{}" if method == "POST" else None)
            assert answer.status_code not in (404, 405), (method, path, answer.text)


def test_access_and_success_status_are_declared(spec: dict[str, Any]) -> None:
    access = {path: level for path, _, level in served(memory_app())}
    for path, _, operation in operations(spec):
        assert operation.get("x-access") == access[path], path
        success = "201" if path == "/v1/observations" else "200"
        assert success in operation["responses"], path
        if path.startswith("/v1/"):
            refusal = operation["responses"]["4XX"]["content"]["application/json"]["schema"]
            error = resolve(spec, resolve(spec, refusal)["properties"]["error"])
            assert set(error["properties"]) == {"code", "message"}
    assert "HTTPValidationError" not in str(spec)  # FastAPI's 422 answer is never served


def test_request_schemas_forbid_additional_properties(spec: dict[str, Any]) -> None:
    bodies = 0
    for path, method, operation in operations(spec):
        if method != "POST":
            assert "requestBody" not in operation, path
            continue
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        bodies += 1
        for found in objects(spec, schema, set()):
            assert found.get("additionalProperties") is False, (path, found.get("title"))
    assert bodies == sum(1 for _, methods, _ in served(memory_app()) if "POST" in methods)


def request_schema(spec: dict[str, Any], path: str) -> dict[str, Any]:
    body = spec["paths"][path]["post"]["requestBody"]
    assert body["required"] is True, path
    return resolve(spec, body["content"]["application/json"]["schema"])


def leaves(
    spec: dict[str, Any], schema: dict[str, Any], seen: set[int]
) -> Iterator[dict[str, Any]]:
    """Every scalar or array schema a request schema holds (the null of `X | None` aside)."""
    schema = resolve(spec, schema)
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if "properties" in schema:
        for child in schema["properties"].values():
            yield from leaves(spec, child, seen)
        return
    if "anyOf" in schema and "type" not in schema:
        for branch in schema["anyOf"]:
            if branch != {"type": "null"}:
                yield from leaves(spec, branch, seen)
        return
    yield schema
    if isinstance(schema.get("items"), dict):
        yield from leaves(spec, schema["items"], seen)


def test_request_fields_are_typed_and_bounded(spec: dict[str, Any]) -> None:
    """No request field is left open: strings are enums, UUIDs, timestamps, base64 or patterns
    that exclude NUL; integers and arrays have both bounds."""
    for path, method, _ in operations(spec):
        if method != "POST":
            continue
        for leaf in leaves(spec, request_schema(spec, path), set()):
            kind = leaf.get("type")
            assert kind in ("string", "integer", "boolean", "array"), (path, leaf)
            if kind == "string":
                assert (
                    "enum" in leaf
                    or leaf.get("format") in ("uuid", "date-time")
                    or leaf.get("contentEncoding") == "base64"
                    or "\\u0000" in leaf.get("pattern", "")
                    or leaf.get("pattern") == "^[0-9a-f]{64}$"
                ), (path, leaf)
            if kind == "integer":
                assert "minimum" in leaf and "maximum" in leaf, (path, leaf)
            if kind == "array":
                assert "maxItems" in leaf, (path, leaf)


REQUIRED = {
    "/v1/observations": {"messages"},
    "/v1/recalls": {"question"},
    "/v1/contexts": {"data_subject_id"},
    "/v1/passages/search": {"question"},
    "/v1/reports/candidates": {"question"},
    "/v1/messages/get": {"chunk_id"},
    "/v1/records/assert": {"records"},
    "/v1/records/correct": {"records"},
    "/v1/records/retract": {"records"},
    "/v1/records/history": {"id"},
    "/v1/citations/resolve": {"id"},
    "/v1/artifacts/put": {"id", "data_subject_id", "kind", "content"},
    "/v1/artifacts/get": {"id"},
    "/v1/artifacts/delete": {"id", "expected_version"},
    "/v1/subjects/register": {"idempotency_key"},
    "/v1/subjects/update": {"id", "expected_version"},
    "/v1/feedback/record": {"record_id", "note"},
    "/v1/feedback/promote": {"id", "expected_version"},
    "/v1/entities/get": {"id"},
    "/v1/entities/candidates": {"question"},
    "/v1/entities/purge": {"id"},
    "/v1/inspect/turns": {"data_subject_id"},
    "/v1/inspect/segments": {"data_subject_id"},
}
EXACTLY_ONE = {
    "/v1/erasures": ["data_subject_id", "source_observation_ids"],
    "/v1/exports": ["data_subject_id", "source_observation_ids"],
    "/v1/subjects/get": ["id", "external_reference"],
}


def test_required_and_exclusive_fields_are_declared(spec: dict[str, Any]) -> None:
    for path, method, _ in operations(spec):
        if method != "POST":
            continue
        schema = request_schema(spec, path)
        assert set(schema.get("required", [])) == REQUIRED.get(path, set()), path
        branches = [branch["required"] for branch in schema.get("oneOf", [])]
        assert branches == [[name] for name in EXACTLY_ONE.get(path, [])], path


def test_the_turn_schema_states_the_turn_limits(spec: dict[str, Any]) -> None:
    turn = request_schema(spec, "/v1/observations")
    messages = turn["properties"]["messages"]
    assert (messages["minItems"], messages["maxItems"]) == (1, 64)
    message = resolve(spec, messages["items"])
    assert set(message["required"]) == {"role", "content"}
    assert message["properties"]["role"]["enum"] == ["user", "assistant", "system", "tool"]
    assert message["properties"]["content"]["maxLength"] == 65_536
    assert message["properties"]["content"]["x-max-utf8-bytes"] == 65_536
    assert turn["properties"]["idempotency_key"]["anyOf"][0]["format"] == "uuid"
    assert turn["properties"]["occurred_at"]["anyOf"][0]["format"] == "date-time"
    assert len(turn["anyOf"]) == 2  # group ordinals on every message, or none and no tool
