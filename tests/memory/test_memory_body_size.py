"""One body-size rule everywhere: a body over 1 MiB is 413 `invalid_body` in the contract's
error shape, on every v1 route that takes a body and on `/mcp`, read with or without a declared
length; a body of exactly 1 MiB is read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from memory_kit import LiveServer

from satchel.memory.api.strict import MAX_BODY_BYTES

TOO_LARGE = "the request body is over 1 MiB (1,048,576 bytes)"
ACCEPT = {"Accept": "application/json, text/event-stream"}
JSON = {"Content-Type": "application/json"}
BODIES: dict[str, dict[str, Any]] = {
    "/v1/observations": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/recalls": {"question": "Where does Ann live?"},
    "/v1/contexts": {"data_subject_id": "ann"},
    "/v1/records/assert": {"records": []},
    "/v1/erasures": {"data_subject_id": "nobody"},
    "/v1/artifacts/put": {"id": "a", "data_subject_id": "ann", "kind": "note", "content": ""},
    "/v1/passages/search": {"question": "bees"},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
}


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    token = live_server.token("alpha")
    headers = {"Authorization": f"Bearer {token}", **ACCEPT}
    with httpx.Client(base_url=live_server.base_url, headers=headers, timeout=60) as client:
        yield client


def padded(body: dict[str, Any], size: int) -> bytes:
    """`body` as JSON, padded with trailing spaces to `size` bytes."""
    raw = json.dumps(body).encode()
    return raw + b" " * (size - len(raw))


def assert_too_large(answer: httpx.Response) -> None:
    assert answer.status_code == 413, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"error": {"code": "invalid_body", "message": TOO_LARGE}}


@pytest.mark.parametrize("path", list(BODIES))
def test_a_body_just_over_the_limit_is_413_in_the_error_shape(
    http: httpx.Client, path: str
) -> None:
    over = padded(BODIES[path], MAX_BODY_BYTES + 1)
    assert_too_large(http.post(path, content=over, headers=JSON))

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield over[:MAX_BODY_BYTES]
        yield over[MAX_BODY_BYTES:]

    assert_too_large(http.post(path, content=chunks(), headers=JSON))


@pytest.mark.parametrize("path", ["/v1/recalls", "/mcp"])
def test_a_body_of_exactly_the_limit_is_read(http: httpx.Client, path: str) -> None:
    exact = padded(BODIES[path], MAX_BODY_BYTES)
    answer = http.post(path, content=exact, headers=JSON)
    assert answer.status_code == 200, answer.text


def test_the_credential_is_checked_before_the_size(live_server: LiveServer) -> None:
    over = padded(BODIES["/mcp"], MAX_BODY_BYTES + 1)
    with httpx.Client(base_url=live_server.base_url, headers=ACCEPT, timeout=60) as client:
        for path in ("/mcp", "/v1/recalls"):
            answer = client.post(path, content=over)
            assert answer.status_code == 401, answer.text
            assert answer.json()["error"]["code"] == "unauthenticated"
