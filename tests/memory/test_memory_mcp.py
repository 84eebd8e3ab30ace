"""`/mcp` through the official `mcp` client over streamable HTTP, against `satchel serve`: the six
tools with their routes' input schemas, each answering what its v1 route answers, refusals as
readable tool errors, read-only tokens, an `observe` retried with its key stored once, and the
token checked (401) before any MCP; `GET` is 405 and answers are plain JSON."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psycopg
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from memory_kit import SCHEMA_WAIT_S, LiveServer, with_database
from memory_process import Served, environment, stop_embedded
from records_kit import claim

from satchel.memory.config import MemorySettings
from satchel.memory.service.tokens import create_token

ROUTES = {
    "recall": ("POST", "/v1/recalls"),
    "observe": ("POST", "/v1/observations"),
    "freshness": ("GET", "/v1/freshness"),
    "context": ("POST", "/v1/contexts"),
    "resolve_citation": ("POST", "/v1/citations/resolve"),
    "report_feedback": ("POST", "/v1/feedback/record"),
}
REQUIRED = {
    "recall": {"question"},
    "observe": {"idempotency_key", "messages"},
    "freshness": set(),
    "context": {"data_subject_id"},
    "resolve_citation": {"id"},
    "report_feedback": {"record_id", "note"},
}
READS = {"recall", "freshness", "context", "resolve_citation"}
SUBJECT = "person-1"
TURN = [
    {"role": "user", "content": "Marta started at Ensera in March."},
    {"role": "assistant", "content": "Noted: Marta works at Ensera."},
]
ACCEPT = {"Accept": "application/json, text/event-stream"}


@contextmanager
def folder() -> Iterator[Path]:
    """A data directory, and an end to whatever a test left running on it."""
    root = Path(tempfile.mkdtemp(prefix="satchel-mcp-"))
    try:
        yield root / "data"
    finally:
        stop_embedded(root / "data")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def serve(database_url: str, *args: str) -> Iterator[Served]:
    """`satchel serve ARGS` on `database_url`, until the block ends."""
    with folder() as data_dir:
        server = Served(data_dir, environment(database_url), None, *args)
        try:
            server.wait_ready()
            yield server
        finally:
            assert server.terminate() == 0
        assert "Traceback" not in server.output()


@dataclass(frozen=True)
class Deployment:
    """A served deployment and the project a test works in."""

    base_url: str
    database_url: str
    output: Callable[[], str]  # what the server wrote so far
    project: str

    def token(self, *, read_only: bool = False) -> str:
        return create_token(self.database_url, self.project, read_only=read_only)


@pytest.fixture(scope="module")
def shared(pg_admin_url: str) -> Iterator[tuple[str, str, Callable[[], str]]]:
    """One `satchel serve` with no worker for the module, on a database it migrates itself:
    its address and the database's URL. Each test works in a project of its own."""
    name = f"satchel_test_mcp_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = with_database(pg_admin_url, name)
    try:
        with serve(url, "--role", "api") as server:
            yield server.base_url, url, server.output
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def served(shared: tuple[str, str, Callable[[], str]]) -> Deployment:
    return Deployment(*shared, f"mcp-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def served_with_worker(db_url: str) -> Iterator[Deployment]:
    """`satchel serve` as it runs by default, its worker forming what is stored."""
    with serve(db_url) as server:
        yield Deployment(server.base_url, db_url, server.output, "alpha")


@asynccontextmanager
async def mcp(base_url: str, token: str) -> AsyncIterator[ClientSession]:
    """A session of the official client over streamable HTTP, after the handshake hosts make."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(base_url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http(base_url: str, token: str) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
        yield client


async def route(client: httpx.AsyncClient, tool: str, body: dict[str, Any]) -> httpx.Response:
    """The v1 call `tool` stands for, made over HTTP."""
    method, path = ROUTES[tool]
    if method == "GET":
        return await client.get(path)
    return await client.post(path, json=body)


def text(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


async def same_as_http(
    session: ClientSession, client: httpx.AsyncClient, tool: str, body: dict[str, Any]
) -> dict[str, Any]:
    """Call `tool`, then its route with the same body: the route's JSON is the tool's result, as
    structured content and as text. The JSON."""
    result = await session.call_tool(tool, body)
    answer = await route(client, tool, body)
    assert answer.is_success, answer.text
    assert not result.is_error, text(result)
    assert result.structured_content == answer.json()
    assert json.loads(text(result)) == answer.json()
    found: dict[str, Any] = answer.json()
    return found


async def refused_as_http(
    session: ClientSession, client: httpx.AsyncClient, tool: str, body: dict[str, Any]
) -> str:
    """Call `tool`, then its route: a refusal is a tool error reading `<status> <code>:
    <message>` of the route's answer. The text."""
    result = await session.call_tool(tool, body)
    answer = await route(client, tool, body)
    assert not answer.is_success
    error = answer.json()["error"]
    assert result.is_error
    assert result.structured_content is None
    assert text(result) == f"{answer.status_code} {error['code']}: {error['message']}"
    return text(result)


async def fact(client: httpx.AsyncClient) -> dict[str, Any]:
    """A record about Marta, asserted over HTTP: its receipt."""
    item = claim("Marta", "works_at", "Ensera", "Marta works at Ensera.", data_subject_id=SUBJECT)
    answer = await client.post("/v1/records/assert", json={"records": [item]})
    assert answer.status_code == 200, answer.text
    receipt: dict[str, Any] = answer.json()["records"][0]
    return receipt


def openapi_fields(spec: dict[str, Any], path: str) -> set[str]:
    """The request body's field names of `POST path` in the served OpenAPI."""
    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    name = body["$ref"].removeprefix("#/components/schemas/")
    return set(spec["components"]["schemas"][name]["properties"])


async def test_the_six_tools_carry_their_routes_input_schemas(served: Deployment) -> None:
    token = served.token()
    async with mcp(served.base_url, token) as session:
        listed = (await session.list_tools()).tools
    spec = httpx.get(served.base_url + "/openapi.json", timeout=SCHEMA_WAIT_S).json()
    assert "/mcp" not in spec["paths"]  # JSON-RPC, not a v1 route
    assert [tool.name for tool in listed] == list(ROUTES)
    for tool in listed:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema.get("required", [])) == REQUIRED[tool.name], tool.name
        assert not {"anyOf", "oneOf", "allOf"} & set(schema), tool.name  # model APIs refuse them
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name in READS)
        assert tool.annotations.destructive_hint is False
        method, path = ROUTES[tool.name]
        if method == "GET":
            assert schema["properties"] == {}
        elif tool.name != "report_feedback":  # its route is checked in its own test
            assert set(schema["properties"]) == openapi_fields(spec, path), tool.name
    observe = next(tool for tool in listed if tool.name == "observe").input_schema
    message = observe["$defs"]["ObservedMessage"]
    assert set(message["required"]) == {"role", "content"}
    assert "group_ordinal" in message["properties"]


async def test_a_read_only_token_is_offered_the_four_read_tools(served: Deployment) -> None:
    reader = served.token(read_only=True)
    async with mcp(served.base_url, reader) as session:
        listed = (await session.list_tools()).tools
        assert [tool.name for tool in listed] == [name for name in ROUTES if name in READS]
        assert all(tool.annotations and tool.annotations.read_only_hint for tool in listed)
        turn = {"idempotency_key": str(uuid.uuid4()), "messages": TURN}
        called = await session.call_tool("observe", turn)  # not offered, and still refused
        assert called.is_error and text(called).startswith("403 forbidden: ")


async def settled(client: httpx.AsyncClient, *asks: tuple[str, dict[str, Any]]) -> None:
    """Wait until the worker has formed all that is stored and the answers to `asks` (path,
    body) stay the same across one of its passes, so two calls in a row see the same state."""
    previous: list[Any] = []
    for _ in range(60):
        fresh = (await client.get("/v1/freshness")).json()
        answers = [fresh, *[(await client.post(path, json=body)).json() for path, body in asks]]
        if fresh["formed"] == fresh["stored"] and answers == previous:
            return
        previous = answers
        await asyncio.sleep(1.5)  # longer than the worker's poll
    raise AssertionError("the worker did not settle in 90 s")


async def test_each_tool_answers_what_its_route_answers(
    served_with_worker: Deployment,
) -> None:
    served = served_with_worker
    token = served.token()
    async with mcp(served.base_url, token) as session, http(served.base_url, token) as client:
        empty = await same_as_http(session, client, "freshness", {})
        assert empty == {"scope": "alpha", "stored": None, "formed": None, "parked": 0}

        turn = {"idempotency_key": str(uuid.uuid4()), "data_subject_id": SUBJECT, "messages": TURN}
        receipt = await same_as_http(session, client, "observe", turn)  # the HTTP call retries
        assert receipt["scope"] == "alpha" and receipt["log_offset"] == 0

        record = await fact(client)
        ask = {"question": "Where does Marta work?", "data_subject_id": SUBJECT}
        history = {"data_subject_id": SUBJECT, "max_characters": 2000}
        await settled(client, ("/v1/recalls", ask), ("/v1/contexts", history))

        bundle = await same_as_http(session, client, "recall", ask)
        [found] = bundle["facts"]
        assert found["fact_id"] == record["id"] and found["object"] == "Ensera"
        assert any(p["quote"] == TURN[0]["content"] for p in bundle["passages"])

        context = await same_as_http(session, client, "context", history)
        [said] = [turn for turn in context["turns"] if turn["log_offset"] == 0]
        assert [m["content"] for m in said["messages"]] == [m["content"] for m in TURN]

        cited = await same_as_http(session, client, "resolve_citation", {"id": record["id"]})
        assert cited["id"] == record["id"] and cited["statement"] == "Marta works at Ensera."

        after = await same_as_http(session, client, "freshness", {})
        assert after["formed"] == after["stored"] and after["stored"] > receipt["log_offset"]
        assert context["watermark"] == after


async def test_the_2026_protocol_revision_is_served_too(served: Deployment) -> None:
    """The client's default negotiation: one self-contained request each, no handshake."""
    token = served.token()
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as transport,
        Client(streamable_http_client(served.base_url + "/mcp", http_client=transport)) as client,
        http(served.base_url, token) as direct,
    ):
        assert client.protocol_version == "2026-07-28"
        assert [tool.name for tool in (await client.list_tools()).tools] == list(ROUTES)
        turn = {"idempotency_key": str(uuid.uuid4()), "messages": TURN}
        result = await client.call_tool("observe", turn)
        assert not result.is_error, text(result)
        assert (
            result.structured_content == (await direct.post("/v1/observations", json=turn)).json()
        )
        refused = await client.call_tool("recall", {"question": " "})
        assert refused.is_error and text(refused).startswith("400 invalid_question: question: ")


async def test_refusals_are_tool_errors_the_model_can_read(served: Deployment) -> None:
    writer = served.token()
    reader = served.token(read_only=True)
    async with http(served.base_url, writer) as client:
        record = await fact(client)
    async with mcp(served.base_url, reader) as session, http(served.base_url, reader) as client:
        # a read-only token asks with the four read tools ...
        before = await same_as_http(session, client, "freshness", {})
        await same_as_http(session, client, "recall", {"question": "Where does Marta work?"})
        await same_as_http(session, client, "context", {"data_subject_id": SUBJECT})
        await same_as_http(session, client, "resolve_citation", {"id": record["id"]})
        # ... and is refused what writes, as the route refuses it
        turn = {"idempotency_key": str(uuid.uuid4()), "messages": TURN}
        forbidden = await refused_as_http(session, client, "observe", turn)
        assert forbidden.startswith("403 forbidden: ")

        empty = await refused_as_http(session, client, "recall", {"question": ""})
        assert empty == "400 invalid_question: question: must not be empty or blank"
        unknown = await refused_as_http(session, client, "recall", {"question": "x", "colour": 1})
        assert unknown.startswith("400 invalid_body: colour: ")
        missing = await refused_as_http(session, client, "resolve_citation", {"limit": 1})
        assert missing.startswith("400 invalid_citation: id: ")
        gone = await refused_as_http(session, client, "resolve_citation", {"id": str(uuid.uuid4())})
        assert gone == "404 not_found: record not found"

        extra = await session.call_tool("freshness", {"scope": "beta"})
        assert extra.is_error and text(extra) == "400 invalid_body: freshness takes no arguments"
        unnamed = await session.call_tool("observe", {"messages": TURN})  # the tool wants a key
        assert unnamed.is_error
        assert text(unnamed) == "400 invalid_turn: idempotency_key: is required by the observe tool"
        assert (await client.get("/v1/freshness")).json() == before  # nothing was stored


async def test_an_observe_retried_with_its_key_is_stored_once(served: Deployment) -> None:
    token = served.token()
    turn = {"idempotency_key": str(uuid.uuid4()), "data_subject_id": SUBJECT, "messages": TURN}
    async with mcp(served.base_url, token) as session:
        first = await session.call_tool("observe", turn)
        assert not first.is_error, text(first)
        before = (await session.call_tool("freshness", {})).structured_content
    async with mcp(served.base_url, token) as session:  # the retry of an answer that was lost
        again = await session.call_tool("observe", turn)
        after = (await session.call_tool("freshness", {})).structured_content
        changed = {**turn, "messages": [{"role": "user", "content": "Something else."}]}
        conflict = await session.call_tool("observe", changed)
    assert not again.is_error and again.structured_content == first.structured_content
    assert text(again) == text(first)
    assert before == after and after is not None and after["stored"] == 0
    assert conflict.is_error and text(conflict).startswith("409 idempotency_conflict: ")
    async with http(served.base_url, token) as client:  # the route agrees: one turn, stored
        assert (await client.post("/v1/observations", json=turn)).json() == again.structured_content
        assert (await client.get("/v1/freshness")).json() == after


async def test_the_token_is_checked_before_any_mcp(served: Deployment) -> None:
    token = served.token()
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx.AsyncClient(base_url=served.base_url, timeout=60) as client:
        for headers, opening in (
            ({}, "no credential was sent"),
            ({"Authorization": token}, "the Authorization header is not `Bearer <token>`"),
            ({"Authorization": f"Basic {token}"}, "the Authorization header is not `Bearer"),
            ({"Authorization": f"Bearer tsk_{uuid.uuid4().hex}"}, "the bearer token is not"),
        ):
            for body in (json.dumps(listing), "not json-rpc at all"):
                answer = await client.post("/mcp", content=body, headers={**headers, **ACCEPT})
                assert answer.status_code == 401, answer.text
                error = answer.json()["error"]
                assert error["code"] == "unauthenticated"
                assert error["message"].startswith(opening), error
        signed = {"Authorization": f"Bearer {token}"}
        unreadable = await client.post(
            "/mcp",
            content="not json-rpc at all",
            headers={**signed, **ACCEPT, "Content-Type": "application/json"},
        )
        assert unreadable.status_code == 400  # with the token, MCP reads the body: a parse error
        assert unreadable.json()["error"]["code"] == -32700

        for method in ("GET", "DELETE", "PUT"):
            for headers in (signed, {}):
                answer = await client.request(method, "/mcp", headers={**headers, **ACCEPT})
                assert answer.status_code == 405, (method, answer.text)
                assert answer.headers["allow"] == "POST"
                assert answer.json()["error"]["code"] == "method_not_allowed"

        # stateless: a call stands alone, with no handshake and no session; always plain JSON
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "freshness", "arguments": {}},
        }
        answer = await client.post("/mcp", json=call, headers={**signed, **ACCEPT})
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        assert "mcp-session-id" not in answer.headers
        result = answer.json()["result"]
        assert result["isError"] is False
        rid = answer.headers["x-request-id"]  # the forwarded call's access line shares it
        line = re.compile(rf"route=(\S+) status=200 \S+ request_id={rid}$", re.M)
        for _ in range(100):  # a line is written once its answer has gone
            if len(lines := line.findall(served.output())) == 2:
                break
            await asyncio.sleep(0.05)
        assert lines == ["/v1/freshness", "/mcp"]
        assert (
            result["structuredContent"]
            == (await client.get("/v1/freshness", headers=signed)).json()
        )


async def test_a_tool_call_takes_one_admission_slot(db_url: str) -> None:
    """The `/mcp` request itself holds no slot, so the call it forwards is admitted even when
    the token may have one request in flight."""
    server = LiveServer(db_url, MemorySettings(token_limit=1))
    server.start()
    try:
        async with mcp(server.base_url, server.token("alpha")) as session:
            result = await session.call_tool("freshness", {})
            assert not result.is_error, text(result)
            assert result.structured_content == {
                "scope": "alpha",
                "stored": None,
                "formed": None,
                "parked": 0,
            }
    finally:
        server.stop()


async def test_report_feedback_records_a_report(served: Deployment) -> None:
    """Needs `POST /v1/feedback/record`; the tool is its call under another name."""
    writer = served.token()
    reader = served.token(read_only=True)
    spec = httpx.get(served.base_url + "/openapi.json", timeout=SCHEMA_WAIT_S).json()
    async with mcp(served.base_url, writer) as session, http(served.base_url, writer) as client:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        schema = listed["report_feedback"].input_schema
        assert set(schema["properties"]) == openapi_fields(spec, "/v1/feedback/record")
        record = await fact(client)
        report = {
            "record_id": record["id"],
            "note": "She moved to Oslo last spring.",
            "proposed_object": "Oslo",
        }
        result = await session.call_tool("report_feedback", report)
        assert not result.is_error, text(result)
        answer = result.structured_content
        assert isinstance(answer, dict) and json.loads(text(result)) == answer
        assert {"id", "record_id", "recorded_by", "recorded_at"} <= set(answer)
        assert answer["record_id"] == record["id"]
        cited = (await client.post("/v1/citations/resolve", json={"id": record["id"]})).json()
        assert cited["status"] == "current"  # a report changes nothing
    async with mcp(served.base_url, reader) as session, http(served.base_url, reader) as client:
        forbidden = await refused_as_http(session, client, "report_feedback", report)
        assert forbidden.startswith("403 forbidden: ")
