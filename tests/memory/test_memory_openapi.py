"""`/openapi.json` matches what is served: every route and method, closed request schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memory_kit import LiveServer
from memory_routes import memory_app, served

METHODS = ("get", "post", "put", "delete", "patch", "head", "options")


@pytest.fixture
def spec(live_server: LiveServer) -> dict[str, Any]:
    with httpx.Client(base_url=live_server.base_url) as anonymous:
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
