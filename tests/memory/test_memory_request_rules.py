"""The request rules: strict bodies, the turn limits, methods, and the error shape everywhere."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memory_kit import LiveServer
from memory_routes import memory_app, served

from satchel.memory.api.errors import ApiError
from satchel.memory.api.strict import MAX_BODY_BYTES, decode_body

GETS = {"/v1/freshness", "/health", "/ready", "/metrics"}


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        yield client


def turn(*contents: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": c} for c in contents], **extra}


def assert_error(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def stored(http: httpx.Client) -> int | None:
    value: int | None = http.get("/v1/freshness").json()["stored"]
    return value


GOOD = '{"messages": [{"role": "user", "content": "hi"}]'

BAD_BODIES = [
    pytest.param(b"", "is empty", id="empty"),
    pytest.param(b"   ", "is empty", id="whitespace"),
    pytest.param(b"[]", "one JSON object", id="array"),
    pytest.param(b'"text"', "one JSON object", id="string"),
    pytest.param(b"null", "one JSON object", id="null"),
    pytest.param(b"{", "not valid JSON", id="truncated"),
    pytest.param((GOOD + "} {}").encode(), "not valid JSON", id="trailing-object"),
    pytest.param((GOOD + "} x").encode(), "not valid JSON", id="trailing-garbage"),
    pytest.param((GOOD + ', "extra": 1}').encode(), "extra: is not a field", id="unknown-field"),
    pytest.param((GOOD + ', "messages": []}').encode(), "repeats the key", id="duplicate-key"),
    pytest.param(
        (GOOD + ', "MESSAGES": []}').encode(), "repeats the key", id="duplicate-key-case-folded"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "Role": "user", "content": "hi"}]}',
        "repeats the key 'Role'",
        id="nested-duplicate-case-folded",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', "not valid UTF-8", id="bad-utf8"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
        "not valid UTF-8",
        id="utf8-surrogate",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "surrogate", id="lone-high"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\\udc00"}]}', "surrogate", id="lone-low"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\\ud800\\u0041"}]}',
        "surrogate",
        id="high-then-letter",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "\\uZZZZ"}]}', "not valid JSON", id="bad-escape"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": 7}]}',
        "messages[0].content: must be a string",
        id="wrong-type",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": null}]}',
        "messages[0].content: is required and must not be null",
        id="null-content",
    ),
    pytest.param(
        b'{"messages": [{"role": 7, "content": "hi"}]}',
        "messages[0].role: must be a string",
        id="role-not-a-string",
    ),
    pytest.param(
        b'{"messages": [{"content": "hi"}]}', "messages[0].role: is required", id="no-role"
    ),
    pytest.param(b"{}", "messages: is required", id="no-messages-field"),
    pytest.param(b'{"messages": [null]}', "messages[0]: must not be null", id="null-message"),
    pytest.param(
        b'{"messages": {"role": "user"}}', "messages: must be an array", id="object-for-array"
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "hi", "group_ordinal": 0.5}]}',
        "messages[0].group_ordinal: must be an integer",
        id="float-for-int",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "hi", "group_ordinal": "0"}]}',
        "messages[0].group_ordinal: must be an integer",
        id="string-for-int",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "hi", "group_ordinal": 18446744073709551616}]}',
        "does not fit in 64 bits",
        id="int-over-64-bits",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "hi", "group_ordinal": NaN}]}',
        "NaN is not a JSON number",
        id="nan",
    ),
    pytest.param(
        (GOOD + ', "occurred_at": "yesterday"}').encode(),
        "occurred_at: must be an RFC 3339 timestamp",
        id="bad-timestamp",
    ),
    pytest.param(
        (GOOD + ', "occurred_at": "2026-01-01T00:00:00"}').encode(),
        "occurred_at: must carry an offset",
        id="timestamp-without-offset",
    ),
    pytest.param(
        b'{"messages": [{"role": "user", "content": "hi", "occurred_at": 5}]}',
        "messages[0].occurred_at: must be a string",
        id="timestamp-not-a-string",
    ),
    pytest.param(b"\xef\xbb\xbf" + (GOOD + "}").encode(), "not valid JSON", id="byte-order-mark"),
    pytest.param(
        ('{"messages": [{"role": "user", "content": "hi"}], "x": ' + "[" * 100_000).encode(),
        "nests deeper than 128",
        id="very-deep",
    ),
]


@pytest.mark.parametrize(("raw", "reason"), BAD_BODIES)
def test_unreadable_bodies_are_invalid_body(http: httpx.Client, raw: bytes, reason: str) -> None:
    answer = http.post(
        "/v1/observations", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_error(answer, 400, "invalid_body")
    assert reason in answer.json()["error"]["message"]
    assert stored(http) is None


def test_a_body_over_one_mebibyte_is_refused(http: httpx.Client) -> None:
    exact = (GOOD + "}").encode()
    padded = exact + b" " * (MAX_BODY_BYTES - len(exact))
    assert len(padded) == MAX_BODY_BYTES
    assert http.post("/v1/observations", content=padded).status_code == 201
    assert_error(http.post("/v1/observations", content=padded + b" "), 413, "invalid_body")
    big = json.dumps(turn("x" * MAX_BODY_BYTES)).encode()
    assert_error(http.post("/v1/observations", content=big), 413, "invalid_body")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap holds while reading
        yield padded
        yield b"  "

    assert_error(http.post("/v1/observations", content=chunks()), 413, "invalid_body")
    assert stored(http) == 0


def test_nesting_is_capped_at_128() -> None:
    def nested(depth: int) -> bytes:  # the outer object is level 1
        return ('{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}").encode()

    assert decode_body(nested(128)) == {"a": json.loads("[" * 127 + "]" * 127)}
    with pytest.raises(ApiError) as refused:
        decode_body(nested(129))
    assert refused.value.code == "invalid_body"


def test_field_names_match_in_any_case_once(http: httpx.Client) -> None:
    answer = http.post(
        "/v1/observations", json={"Messages": [{"ROLE": "user", "Content": "hello"}]}
    )
    assert answer.status_code == 201, answer.text


def test_the_declared_content_type_does_not_matter(http: httpx.Client) -> None:
    answer = http.post(
        "/v1/observations",
        content=json.dumps(turn("hello")).encode(),
        headers={"Content-Type": "text/plain"},
    )
    assert answer.status_code == 201


def test_null_fields_count_as_omitted(http: httpx.Client) -> None:
    body = turn("hello", idempotency_key=None, data_subject_id=None, occurred_at=None)
    assert http.post("/v1/observations", json=body).status_code == 201


def message(content: str = "hi", role: str = "user", **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


TURN_LIMITS = [
    pytest.param([], id="no-messages"),
    pytest.param([message()] * 65, id="65-messages"),
    pytest.param([message("x" * 65_537)], id="message-over-64KiB"),
    pytest.param([message("é" * 32_769)], id="message-over-64KiB-in-bytes"),
    pytest.param([message("x" * 65_536)] * 4 + [message("y")], id="turn-over-256KiB"),
    pytest.param([message(role="robot")], id="unknown-role"),
    pytest.param([message(role="User")], id="role-case"),
    pytest.param([message("  \n\t ")], id="blank-content"),
    pytest.param([message("a\x00b")], id="nul-in-content"),
    pytest.param([message(group_ordinal=0), message()], id="groups-on-some"),
    pytest.param([message(), message(group_ordinal=1)], id="groups-on-later-only"),
    pytest.param([message(), message(role="tool")], id="tool-without-groups"),
    pytest.param([message(group_ordinal=1)], id="groups-start-above-0"),
    pytest.param([message(group_ordinal=-1)], id="negative-group"),
    pytest.param([message(group_ordinal=0), message(group_ordinal=2)], id="group-gap"),
    pytest.param(
        [message(group_ordinal=0), message(group_ordinal=1), message(group_ordinal=0)],
        id="group-goes-back",
    ),
]


@pytest.mark.parametrize("messages", TURN_LIMITS)
def test_turn_limits_are_invalid_turn(http: httpx.Client, messages: list[Any]) -> None:
    assert_error(http.post("/v1/observations", json={"messages": messages}), 400, "invalid_turn")
    assert stored(http) is None


def test_a_subject_with_nul_is_invalid_turn(http: httpx.Client) -> None:
    answer = http.post("/v1/observations", json=turn("hello", data_subject_id="a\x00b"))
    assert_error(answer, 400, "invalid_turn")


SOME_KEY = uuid.UUID("9fc679c6-6272-4aef-b54c-995982798453")  # fixed: parallel runs collect alike


@pytest.mark.parametrize(
    "key",
    ["nope", SOME_KEY.hex, "{" + str(SOME_KEY) + "}", "urn:uuid:" + str(SOME_KEY)],
)
def test_idempotency_key_must_be_a_hyphenated_uuid(http: httpx.Client, key: str) -> None:
    answer = http.post("/v1/observations", json=turn("hello", idempotency_key=key))
    assert_error(answer, 400, "invalid_turn")


def test_turns_at_the_limits_are_stored(http: httpx.Client) -> None:
    assert http.post("/v1/observations", json={"messages": [message()] * 64}).status_code == 201
    answer = http.post("/v1/observations", json={"messages": [message("x" * 65_536)] * 4})
    assert answer.status_code == 201
    grouped = [
        message(group_ordinal=0),
        message(role="assistant", group_ordinal=1),
        message(role="tool", group_ordinal=1),
        message(role="assistant", group_ordinal=2),
    ]
    assert http.post("/v1/observations", json={"messages": grouped}).status_code == 201
    upper = turn("hello", idempotency_key=str(uuid.uuid4()).upper())
    assert http.post("/v1/observations", json=upper).status_code == 201
    assert stored(http) == 3


def served_routes() -> list[tuple[str, set[str]]]:
    return [(path, methods) for path, methods, _ in served(memory_app())]


def test_only_freshness_health_ready_and_metrics_are_gets() -> None:
    routes = dict(served_routes())
    assert {"/v1/observations", "/v1/erasures", "/health"} <= set(routes)
    for path, methods in routes.items():
        assert methods == ({"GET"} if path in GETS else {"POST"}), path


def test_wrong_methods_are_405_in_the_error_shape(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.base_url) as client:
        for path, methods in served_routes():
            for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
                if method in methods:
                    continue
                answer = client.request(method, path)
                assert_error(answer, 405, "method_not_allowed")
                assert answer.headers["allow"] in (", ".join(sorted(methods)), "GET, HEAD")


def test_gets_answer(live_server: LiveServer, http: httpx.Client) -> None:
    assert http.get("/v1/freshness").status_code == 200
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        assert anonymous.get("/health").json() == {"status": "ok"}
        ready = anonymous.get("/ready")
        assert ready.json()["status"] == "ready"
        assert ready.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("path", ["/", "/v1", "/v1/nothing", "/v2/observations", "/v1/recalls/x"])
def test_unknown_paths_are_404_in_the_error_shape(live_server: LiveServer, path: str) -> None:
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        assert_error(anonymous.get(path), 404, "not_found")
        assert_error(anonymous.post(path, json={}), 404, "not_found")
