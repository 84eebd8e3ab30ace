"""Every input gets a clear answer: timestamps outside UTC's range and NUL in any string are
refused naming the field, with the route's code; refusals say what was wrong; a stalled body is
timed out (408) and its admission slot released; exports leave search columns out; and each
request the schema fuzzer found refused (or failing) before stays answered as the schema says."""

from __future__ import annotations

import json
import select
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import psycopg
import pytest
from memory_kit import SCHEMA_WAIT_S, LiveServer

from satchel.memory.config import MemorySettings
from satchel.memory.store.predicates import PREDICATES

U = str(uuid.uuid4())
T = "2026-01-31T09:30:00+01:00"
DIGEST = "a" * 64

# A body for every POST route using every field (one per variant for "exactly one of" routes),
# with the code each route gives its field refusals.
BODIES: list[tuple[str, dict[str, Any], str]] = [
    (
        "/v1/observations",
        {
            "idempotency_key": U,
            "data_subject_id": "ann",
            "occurred_at": T,
            "messages": [{"role": "user", "content": "hi", "group_ordinal": 0, "occurred_at": T}],
        },
        "invalid_turn",
    ),
    (
        "/v1/recalls",
        {
            "question": "Where does Ann live?",
            "data_subject_id": "ann",
            "as_of": T,
            "as_known_at": T,
            "source_roles": ["user"],
            "surfaces": ["facts"],
        },
        "invalid_recall_controls",
    ),
    ("/v1/contexts", {"data_subject_id": "ann"}, "invalid_context"),
    (
        "/v1/passages/search",
        {"question": "Cork", "data_subject_id": "ann", "source_role": "user"},
        "invalid_passage_query",
    ),
    (
        "/v1/messages/get",
        {"chunk_id": U, "byte_start": 4, "expected_digest": DIGEST},
        "invalid_message_window",
    ),
    (
        "/v1/records/assert",
        {
            "records": [
                {
                    "idempotency_key": U,
                    "data_subject_id": "ann",
                    "subject": "Ann",
                    "predicate": "lives_in",
                    "object": "Cork",
                    "statement": "Ann lives in Cork.",
                    "valid_from": T,
                }
            ]
        },
        "invalid_record_mutation",
    ),
    (
        "/v1/records/correct",
        {
            "records": [
                {
                    "id": U,
                    "expected_version": U,
                    "object": "Galway",
                    "statement": "Ann lives in Galway.",
                    "valid_from": T,
                }
            ]
        },
        "invalid_record_mutation",
    ),
    (
        "/v1/records/retract",
        {"records": [{"id": U, "expected_version": U}]},
        "invalid_record_mutation",
    ),
    ("/v1/records/list", {"data_subject_id": "ann", "after": {"id": U}}, "invalid_record_page"),
    (
        "/v1/records/history",
        {"id": U, "before": {"known_until": T, "history_id": U}},
        "invalid_record_page",
    ),
    (
        "/v1/citations/resolve",
        {"id": U, "after": {"source_observation_id": U, "source_ordinal": 0, "byte_start": 0}},
        "invalid_citation",
    ),
    ("/v1/inspect/subjects", {"after": "ann"}, "invalid_inspection"),
    ("/v1/inspect/turns", {"data_subject_id": "ann"}, "invalid_inspection"),
    ("/v1/inspect/segments", {"data_subject_id": "ann", "after": U}, "invalid_inspection"),
    ("/v1/erasures", {"data_subject_id": "ann", "reason": "asked"}, "invalid_erasure"),
    ("/v1/erasures", {"source_observation_ids": [U]}, "invalid_erasure"),
    ("/v1/exports", {"data_subject_id": "ann"}, "invalid_export"),
    ("/v1/exports", {"source_observation_ids": [U]}, "invalid_export"),
    (
        "/v1/artifacts/put",
        {
            "id": U,
            "expected_version": U,
            "data_subject_id": "ann",
            "kind": "state",
            "name": "session",
            "content": "e30=",
        },
        "invalid_artifact",
    ),
    ("/v1/artifacts/get", {"id": U, "data_subject_id": "ann"}, "invalid_artifact"),
    (
        "/v1/artifacts/list",
        {"kind": "state", "name_prefix": "se", "data_subject_id": "ann", "after": U},
        "invalid_artifact",
    ),
    (
        "/v1/artifacts/delete",
        {"id": U, "expected_version": U, "data_subject_id": "ann"},
        "invalid_artifact",
    ),
    (
        "/v1/subjects/register",
        {"idempotency_key": U, "external_reference": "crm-1", "label": "Ann"},
        "invalid_subject",
    ),
    ("/v1/subjects/get", {"id": U}, "invalid_subject"),
    ("/v1/subjects/get", {"external_reference": "crm-1"}, "invalid_subject"),
    ("/v1/subjects/list", {"after": U}, "invalid_subject"),
    (
        "/v1/subjects/update",
        {"id": U, "expected_version": U, "external_reference": "crm-1", "label": "Ann"},
        "invalid_subject",
    ),
    (
        "/v1/notifications/endpoints/register",
        {"url": "https://hooks.example.com/x"},
        "invalid_body",
    ),
    ("/v1/notifications/endpoints/disable", {"id": U}, "invalid_body"),
    ("/v1/reports/candidates", {"question": "Growth?"}, "invalid_report_candidate_query"),
    (
        "/v1/feedback/record",
        {"record_id": U, "note": "Wrong.", "proposed_object": "Acme"},
        "invalid_feedback",
    ),
    (
        "/v1/feedback/list",
        {"record_id": U, "after": {"recorded_at": T, "id": U}},
        "invalid_feedback",
    ),
    ("/v1/feedback/promote", {"id": U, "expected_version": U}, "invalid_feedback"),
    ("/v1/entities/list", {"after": {"id": U}}, "invalid_entity_page"),
    ("/v1/entities/get", {"id": U}, "invalid_entity_page"),
    ("/v1/entities/candidates", {"question": "Jon"}, "invalid_entity_candidate_query"),
    ("/v1/entities/purge", {"id": U, "reason": "merged"}, "invalid_body"),
]
# Fields whose refusals take another code than their route's: recall's question, and artifact
# content, which is unreadable (as any non-base64 content) rather than a bad artifact.
FIELD_CODES = {
    ("/v1/recalls", "question"): "invalid_question",
    ("/v1/artifacts/put", "content"): "invalid_body",
}


@pytest.fixture
def memory_settings(request: pytest.FixtureRequest) -> MemorySettings:
    settings: MemorySettings = getattr(request, "param", MemorySettings())
    return settings


@pytest.fixture
def spec(live_server: LiveServer) -> dict[str, Any]:
    with httpx.Client(base_url=live_server.base_url, timeout=SCHEMA_WAIT_S) as anonymous:
        document: dict[str, Any] = anonymous.get("/openapi.json").json()
    return document


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def string_fields(
    spec: dict[str, Any], schema: dict[str, Any], path: str
) -> Iterator[tuple[str, str | None]]:
    """(path, format) of every string field a request schema holds; `[]` stands for an item."""
    schema = resolve(spec, schema)
    if "properties" not in schema:
        for branch in schema.get("anyOf", []):
            yield from string_fields(spec, branch, path)
    if schema.get("type") == "string":
        yield path, schema.get("format")
    for name, child in schema.get("properties", {}).items():
        yield from string_fields(spec, child, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        yield from string_fields(spec, schema["items"], f"{path}[]")


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, list[Any]]]:
    """(generic path, concrete location) of every string in a body."""
    if isinstance(value, str):
        yield path, []
    elif isinstance(value, dict):
        for key, child in value.items():
            for found, where in leaves(child, f"{path}.{key}" if path else key):
                yield found, [key, *where]
    elif isinstance(value, list):
        for index, child in enumerate(value):
            for found, where in leaves(child, f"{path}[]"):
                yield found, [index, *where]


def replaced(body: Any, where: list[Any], value: Any) -> Any:
    copy = json.loads(json.dumps(body))
    target = copy
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    return copy


def shown(where: list[Any]) -> str:
    text = ""
    for step in where:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def assert_refused(answer: httpx.Response, code: str, field: str, *words: str) -> None:
    assert answer.status_code == 400, (field, answer.text)
    error = answer.json()["error"]
    assert error["code"] == code, (field, error)
    assert error["message"].startswith(f"{field}: "), (field, error)
    for word in words:
        assert word in error["message"], (field, error)


def test_every_string_field_refuses_nul(alpha: httpx.Client, spec: dict[str, Any]) -> None:
    """A NUL in any string of any route is 400 naming the field, never a 500 (PostgreSQL text
    cannot hold one); the walk covers every string field the served schema lists."""
    listed = {
        (path, field)
        for path, item in spec["paths"].items()
        if "post" in item
        for field, _ in string_fields(
            spec, item["post"]["requestBody"]["content"]["application/json"]["schema"], ""
        )
    }
    walked = set()
    for path, body, code in BODIES:
        formats = dict(
            string_fields(
                spec,
                spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"],
                "",
            )
        )
        for field, where in leaves(body):
            walked.add((path, field))
            value = body
            for step in where:
                value = value[step]
            answer = alpha.post(path, json=replaced(body, where, value[:1] + "\x00" + value[1:]))
            expected = "invalid_body" if formats[field] == "date-time" else code
            assert_refused(answer, FIELD_CODES.get((path, field), expected), shown(where))
    assert walked == listed
    assert alpha.get("/v1/freshness").json()["stored"] is None


OUT_OF_RANGE = ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"]


@pytest.mark.parametrize("instant", OUT_OF_RANGE)
def test_every_timestamp_outside_utc_is_refused(
    alpha: httpx.Client, spec: dict[str, Any], instant: str
) -> None:
    """An instant that falls outside years 1..9999 once in UTC is 400 with the route's code,
    naming the field and the supported range, on every timestamp field of every route."""
    seen = 0
    for path, body, code in BODIES:
        schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        formats = dict(string_fields(spec, schema["schema"], ""))
        for field, where in leaves(body):
            if formats[field] != "date-time":
                continue
            seen += 1
            answer = alpha.post(path, json=replaced(body, where, instant))
            assert_refused(answer, code, shown(where), "0001-01-01T00:00:00Z", "9999-12-31")
    timed = {
        (path, field)
        for path, item in spec["paths"].items()
        if "post" in item
        for field, kind in string_fields(
            spec, item["post"]["requestBody"]["content"]["application/json"]["schema"], ""
        )
        if kind == "date-time"
    }
    assert seen >= len(timed) == 8


def test_text_the_schema_calls_not_blank_is_stored(alpha: httpx.Client) -> None:
    """The schema's `\\s` is ECMAScript's: U+001F and U+0085 are not spaces there (Python's
    `str.isspace` says they are), so a message of only those is not blank. Found by schemathesis."""
    for content in ("\u001f", "\u0085", "\u001c\u001d"):
        turn = {"messages": [{"role": "user", "content": content}]}
        assert alpha.post("/v1/observations", json=turn).status_code == 201, repr(content)


def test_the_edges_of_the_range_are_stored(alpha: httpx.Client) -> None:
    for edge in (
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T05:00:00+05:00",
    ):
        turn = {"occurred_at": edge, "messages": [{"role": "user", "content": "hi"}]}
        assert alpha.post("/v1/observations", json=turn).status_code == 201, edge


REFUSALS = [
    pytest.param(
        "/v1/observations",
        {"messages": [{"role": "user", "content": "a"}] * 2 + [{"role": "bot", "content": "b"}]},
        "invalid_turn",
        "messages[2].role: must be one of user, assistant, system, tool",
        id="role",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": [{"role": "user", "content": "hi", "colour": "red"}]},
        "invalid_body",
        "messages[0].colour: is not a field",
        id="unknown-field",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": [{"role": "user", "content": "  "}]},
        "invalid_turn",
        "messages[0].content: must not be empty or blank",
        id="blank-content",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": [{"role": "user", "content": "\ufeff\u2003\t"}]},
        "invalid_turn",
        "messages[0].content: must not be empty or blank",
        id="blank-content-as-the-schema-counts-space",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": [{"role": "user", "content": "x" * 65_537}]},
        "invalid_turn",
        "messages[0].content: must be at most 65536 UTF-8 bytes",
        id="content-bytes",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": []},
        "invalid_turn",
        "messages: must hold at least 1 item",
        id="no-messages",
    ),
    pytest.param(
        "/v1/observations",
        {"idempotency_key": "nope", "messages": [{"role": "user", "content": "hi"}]},
        "invalid_turn",
        "idempotency_key: must be a UUID",
        id="key",
    ),
    pytest.param(
        "/v1/observations",
        {
            "messages": [
                {"role": "user", "content": "a", "group_ordinal": 0},
                {"role": "user", "content": "b", "group_ordinal": 2},
            ]
        },
        "invalid_turn",
        "messages[1].group_ordinal: is 2, must be 0 or 1",
        id="group-gap",
    ),
    pytest.param("/v1/recalls", {}, "invalid_question", "question: is required", id="no-question"),
    pytest.param(
        "/v1/recalls",
        {"question": "q", "surfaces": ["facts", "facts"]},
        "invalid_recall_controls",
        "surfaces: must not repeat a value",
        id="repeated-surface",
    ),
    pytest.param(
        "/v1/recalls",
        {"question": "q", "max_characters": 16_001},
        "invalid_recall_controls",
        "max_characters: must be at most the server's budget, 16000",
        id="over-budget",
    ),
    pytest.param(
        "/v1/contexts", {}, "invalid_context", "data_subject_id: is required", id="no-subject"
    ),
    pytest.param(
        "/v1/passages/search",
        {"question": "q", "limit": 10, "candidates": 5},
        "invalid_passage_query",
        "candidates: is 5, must be 0 or at least limit (10)",
        id="few-candidates",
    ),
    pytest.param(
        "/v1/messages/get",
        {"chunk_id": U, "byte_start": 8},
        "invalid_message_window",
        "expected_digest: is required past byte 0",
        id="no-digest",
    ),
    pytest.param(
        "/v1/records/assert",
        {
            "records": [
                {
                    "idempotency_key": U,
                    "subject": "Ann",
                    "predicate": "likes",
                    "object": "tea",
                    "statement": "Ann likes tea.",
                }
            ]
        },
        "invalid_record_mutation",
        "records[0].predicate: must be one of has_name,",
        id="predicate",
    ),
    pytest.param(
        "/v1/records/assert",
        {
            "records": [
                {
                    "idempotency_key": U,
                    "subject": "she",
                    "predicate": "lives_in",
                    "object": "Cork",
                    "statement": "She lives in Cork.",
                }
            ]
        },
        "invalid_record_mutation",
        "records[0].subject: must name someone",
        id="pronoun",
    ),
    pytest.param(
        "/v1/records/retract",
        {"records": [{"id": U, "expected_version": U}] * 2},
        "invalid_record_mutation",
        "records[1].id: repeats an earlier record's",
        id="repeated-id",
    ),
    pytest.param(
        "/v1/records/list",
        {"limit": 101},
        "invalid_record_page",
        "limit: must be at most 100",
        id="page-limit",
    ),
    pytest.param(
        "/v1/erasures", {}, "no_subject", "data_subject_id or source_observation_ids", id="nobody"
    ),
    pytest.param(
        "/v1/exports",
        {"data_subject_id": "ann", "source_observation_ids": [U]},
        "invalid_export",
        "give one of them, not both",
        id="both",
    ),
    pytest.param(
        "/v1/artifacts/put",
        {"id": U, "data_subject_id": "ann", "kind": "note", "content": "e30="},
        "invalid_artifact",
        "kind: must be one of state, file",
        id="artifact-kind",
    ),
    pytest.param(
        "/v1/artifacts/put",
        {"id": U, "data_subject_id": "ann", "kind": "state", "content": None},
        "invalid_body",
        "content: is required and must not be null",
        id="artifact-null-content",
    ),
    pytest.param(
        "/v1/artifacts/put",
        {"id": U, "data_subject_id": "ann", "kind": "state", "content": "e30"},
        "invalid_body",
        "content: must be canonical standard base64",
        id="artifact-base64",
    ),
    pytest.param(
        "/v1/subjects/get",
        {"id": U, "external_reference": "crm-1"},
        "invalid_subject",
        "give exactly one of them",
        id="subject-both",
    ),
]


@pytest.mark.parametrize(("path", "body", "code", "message"), REFUSALS)
def test_refusals_name_the_field_and_what_was_wrong(
    alpha: httpx.Client, path: str, body: dict[str, Any], code: str, message: str
) -> None:
    answer = alpha.post(path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == code
    assert message in answer.json()["error"]["message"]


def test_the_predicate_vocabulary_is_the_databases(live_server: LiveServer) -> None:
    with psycopg.connect(live_server.database_url) as conn:
        rows = conn.execute("SELECT name FROM predicates").fetchall()
    assert sorted(PREDICATES) == sorted(name for (name,) in rows)


def stall(server: LiveServer, token: str) -> socket.socket:
    """A connection that sends its headers and part of a body, then nothing more."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    head = (
        "POST /v1/observations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n"
    )
    sock.sendall(head.encode() + b'{"messages": [')
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("memory_settings", [MemorySettings(body_timeout=3.0)], indirect=True)
def test_stalled_bodies_time_out_and_free_the_token(live_server: LiveServer) -> None:
    """Eight connections that send part of a body and stall hold the token's eight admission
    slots (it is refused, 429) only until the body timeout: each gets 408 and is closed, and the
    token is served again."""
    token = live_server.token("alpha")
    turn = {"messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        assert http.get("/v1/freshness").status_code == 200
        stalled = [stall(live_server, token) for _ in range(8)]  # the token's 8 slots
        try:
            deadline = time.monotonic() + 30
            while (busy := http.get("/v1/freshness")).status_code != 429:
                assert time.monotonic() < deadline, "the stalled bodies never held the token"
                # A stalled request admitted while this probe held a slot was answered (429) at
                # once: stall it again.
                answered, _, _ = select.select(stalled, [], [], 0.05)
                for sock in answered:
                    sock.close()
                    stalled[stalled.index(sock)] = stall(live_server, token)
            assert busy.json()["error"]["code"] == "rate_limited"
            for sock in stalled:
                answer = answer_of(sock)
                assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
                error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
                assert error["code"] == "invalid_body"
                assert "did not arrive within 3 s" in error["message"]
        finally:
            for sock in stalled:
                sock.close()
        assert http.post("/v1/observations", json=turn).status_code == 201
        assert http.get("/v1/freshness").json()["stored"] == 0


def test_exports_leave_out_search_columns(alpha: httpx.Client, live_server: LiveServer) -> None:
    """A message's derived search data (its full-text vector and its embedding) is not the
    person's and is large: an export carries the message without it."""
    turn = {"data_subject_id": "ann", "messages": [{"role": "user", "content": "I live in Cork."}]}
    assert alpha.post("/v1/observations", json=turn).status_code == 201
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute(
            "INSERT INTO message_vectors (message_id, project_id, data_subject_id, role, turn,"
            " embedding) SELECT id, project_id, data_subject_id, role, turn, %s::vector"
            " FROM messages",
            ("[" + ",".join(["0.5"] * 384) + "]",),
        )
        assert conn.execute(
            "SELECT count(*) FROM messages WHERE search_text IS NOT NULL"
        ).fetchone()
    exported = alpha.post("/v1/exports", json={"data_subject_id": "ann"}).json()
    rows = exported["sections"]["message"]
    assert [row["content"] for row in rows] == ["I live in Cork."]
    assert not {"embedding", "search_text"} & set(rows[0])
    assert {"id", "observation_id", "role", "ordinal", "occurred_at"} <= set(rows[0])
    assert "0.5, 0.5" not in json.dumps(exported) and "'cork'" not in json.dumps(exported)


def schema_admits(spec: dict[str, Any], path: str, body: dict[str, Any]) -> bool:
    """Whether the served request schema of `path` admits `body`."""
    ref = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    validator = jsonschema_rs.Draft202012Validator({**ref, "components": spec["components"]})
    return bool(validator.is_valid(body))


# Requests on which the served schema and the service must agree, most of them generated by the
# schema fuzzer and refused (or failed on) before: each is now both admitted and answered, or
# refused by the schema as by the service. (Group
# ordinals that do not start at 0 and rise by 0 or 1 are beyond a JSON Schema; the fuzzer keeps
# that rule itself, and `REFUSALS` holds its refusal.)
FOUND_ACCEPTED = [
    pytest.param("/v1/artifacts/list", {"limit": 8.0, "after": None}, id="integral-float"),
    pytest.param("/v1/records/list", {"limit": 1e1}, id="integral-exponent"),
    pytest.param("/v1/recalls", {"question": "0"}, id="recall-digit"),
    pytest.param("/v1/passages/search", {"question": "0"}, id="passages-digit"),
    pytest.param(
        "/v1/messages/get",
        {"chunk_id": U, "byte_start": 25_167.0, "expected_digest": DIGEST, "byte_limit": 1e3},
        id="window-floats",
    ),
]
FOUND_REFUSED = [
    pytest.param(
        "/v1/records/assert",
        {
            "records": [
                {
                    "idempotency_key": U,
                    "subject": " They ",
                    "predicate": "lives_in",
                    "object": "Cork",
                    "statement": "They live in Cork.",
                }
            ]
        },
        "invalid_record_mutation",
        "records[0].subject: must name someone or something",
        id="stand-in-subject",
    ),
    pytest.param(
        "/v1/observations",
        {"messages": [{"content": "0", "role": "tool"}]},
        "invalid_turn",
        "tool messages require explicit group ordinals",
        id="tool-without-groups",
    ),
    pytest.param(
        "/v1/messages/get",
        {"chunk_id": U, "byte_start": 5_420.0, "expected_digest": None},
        "invalid_message_window",
        "expected_digest: is required past byte 0",
        id="null-digest-past-0",
    ),
    pytest.param(
        "/v1/messages/get",
        {"chunk_id": U, "byte_start": 25_167, "expected_digest": ""},
        "invalid_message_window",
        "expected_digest: is required past byte 0",
        id="empty-digest-past-0",
    ),
    pytest.param(
        "/v1/observations",
        {
            "occurred_at": "0001-01-01T00:00:00+05:00",
            "messages": [{"role": "user", "content": "a"}],
        },
        "invalid_turn",
        "occurred_at: must lie in the range 0001-01-01T00:00:00Z to",
        id="first-day-with-offset",
    ),
]


@pytest.mark.parametrize(("path", "body"), FOUND_ACCEPTED)
def test_found_schema_valid_requests_are_answered(
    alpha: httpx.Client, spec: dict[str, Any], path: str, body: dict[str, Any]
) -> None:
    assert schema_admits(spec, path, body)
    answer = alpha.post(path, json=body)
    assert answer.status_code in (200, 404), answer.text


@pytest.mark.parametrize(("path", "body", "code", "message"), FOUND_REFUSED)
def test_found_refusals_are_the_schemas_too(
    alpha: httpx.Client,
    spec: dict[str, Any],
    path: str,
    body: dict[str, Any],
    code: str,
    message: str,
) -> None:
    assert not schema_admits(spec, path, body)
    answer = alpha.post(path, json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code
    assert message in answer.json()["error"]["message"]
