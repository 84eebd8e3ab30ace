"""Bearer tokens, read-only access, digests only at rest, and fair admission (429, not a queue)."""

from __future__ import annotations

import base64
import hashlib
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import memory_seed as seed
import psycopg
import pytest
from memory_kit import LiveServer
from memory_routes import memory_app, served

from satchel.memory.config import MemorySettings
from satchel.memory.service.tokens import revoke_token

NO_CREDENTIAL = (
    "no credential was sent: send the project's token as `Authorization: Bearer <token>`"
)
NOT_BEARER = (
    "the Authorization header is not `Bearer <token>` (other schemes and bare tokens are"
    " refused): send the project's token after `Bearer `"
)
NOT_ACCEPTED = (
    "the bearer token is not accepted (unknown, revoked, or its project suspended): check it,"
    " or make one with `satchel tokens create`"
)
READ_ONLY_ALLOWED = {
    "/v1/freshness",
    "/v1/recalls",
    "/v1/contexts",
    "/v1/exports",
    "/v1/passages/search",
    "/v1/messages/get",
    "/v1/citations/resolve",
    "/v1/records/list",
    "/v1/records/history",
    "/v1/artifacts/get",
    "/v1/artifacts/list",
    "/v1/subjects/get",
    "/v1/subjects/list",
    "/v1/entities/list",
    "/v1/entities/get",
    "/v1/entities/candidates",
    "/v1/reports/candidates",
    "/v1/feedback/list",
    "/v1/notifications/endpoints/list",
    "/v1/notifications/deliveries/list",
    "/v1/inspect/subjects",
    "/v1/inspect/turns",
    "/v1/inspect/segments",
    "/v1/inspect/parked",
    "/v1/inspect/worker",
}
ROUTES = [(path, methods.pop(), level) for path, methods, level in served(memory_app())]
GUARDED = [(path, method) for path, method, level in ROUTES if level is not None]
WRITES = [path for path, _, level in ROUTES if level == "write"]


@pytest.fixture
def memory_settings() -> MemorySettings:
    """Small admission limits: 3 requests at once, 2 per project, 1 per token."""
    return MemorySettings(work_limit=3, project_limit=2, token_limit=1)


def call(
    client: httpx.Client, method: str, path: str, token: str | None, body: bytes = b"{}"
) -> httpx.Response:
    headers = {} if token is None else {"Authorization": token}
    if method == "GET":
        return client.get(path, headers=headers)
    return client.post(path, content=body, headers=headers)


def test_routes_declare_the_contracts_access() -> None:
    assert GUARDED
    for path, _, level in ROUTES:
        if path in ("/health", "/ready", "/metrics"):
            assert level is None
        else:
            assert level == ("read" if path in READ_ONLY_ALLOWED else "write"), path


def unauthenticated(message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": "unauthenticated", "message": message}}


def test_every_guarded_route_says_which_credential_failed(live_server: LiveServer) -> None:
    token = live_server.token("alpha")
    revoked = live_server.token("alpha")
    assert revoke_token(live_server.database_url, revoked) == 1
    suspended = live_server.token("frozen")
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("UPDATE projects SET suspended_at = now() WHERE name = 'frozen'")
    unknown = "tsk_" + "A" * 43
    basic = base64.b64encode(f"alpha:{token}".encode()).decode()
    headers = {
        None: NO_CREDENTIAL,
        "": NO_CREDENTIAL,
        "Bearer": NOT_BEARER,
        "Bearer\t" + token: NOT_BEARER,
        "Basic " + basic: NOT_BEARER,
        "Token " + token: NOT_BEARER,
        token: NOT_BEARER,
        "Bearer " + token[4:]: NOT_ACCEPTED,
        "Bearer " + token[:-1]: NOT_ACCEPTED,
        "Bearer " + unknown: NOT_ACCEPTED,
        "Bearer " + revoked: NOT_ACCEPTED,
        "Bearer " + suspended: NOT_ACCEPTED,
        "Bearer " + token + "x": NOT_ACCEPTED,
    }
    with httpx.Client(base_url=live_server.base_url) as client:
        for path, method in GUARDED:
            for header, message in headers.items():
                answer = call(client, method, path, header, b"not even json")
                assert answer.status_code == 401, (path, header)
                assert answer.json() == unauthenticated(message), (path, header)
                assert answer.headers["content-type"].startswith("application/json")
                assert token not in answer.text and token[4:] not in answer.text


def test_the_scheme_ignores_case_and_the_token_is_trimmed(live_server: LiveServer) -> None:
    token = live_server.token("alpha")
    with httpx.Client(base_url=live_server.base_url) as client:
        for header in ("bearer " + token, "BEARER " + token, "Bearer \t " + token):
            assert client.get("/v1/freshness", headers={"Authorization": header}).status_code == 200


def test_read_only_tokens_are_forbidden_on_every_write_route(live_server: LiveServer) -> None:
    reader = "Bearer " + live_server.token("alpha", read_only=True)
    assert WRITES
    with httpx.Client(base_url=live_server.base_url) as client:
        for path in WRITES:
            for body in (b"{}", b"{broken", b'{"unknown": 1}'):
                answer = client.post(path, content=body, headers={"Authorization": reader})
                assert answer.status_code == 403, (path, answer.text)
                assert answer.json() == {
                    "error": {
                        "code": "forbidden",
                        "message": "the credential does not permit this operation",
                    }
                }
        for path, method, level in ROUTES:
            if level == "read":
                answer = call(client, method, path, reader)
                assert answer.status_code != 403, path
                assert answer.status_code != 401, path
        assert (
            client.get("/v1/freshness", headers={"Authorization": reader}).json()["stored"] is None
        )


def test_tokens_are_stored_only_as_digests(live_server: LiveServer) -> None:
    tokens = [live_server.token("alpha"), live_server.token("beta", read_only=True)]
    with psycopg.connect(live_server.database_url) as conn:
        rows = conn.execute("SELECT digest, prefix FROM tokens ORDER BY created_at").fetchall()
        assert [(bytes(d), p) for d, p in rows] == [
            (hashlib.sha256(t.encode()).digest(), t[:12]) for t in tokens
        ]
        secrets = [t[12:] for t in tokens] + [t[4:] for t in tokens]
        assert seed.traces(conn, [*tokens, *secrets]) == {}


# ---- admission ---------------------------------------------------------------------------------


@contextmanager
def held(server: LiveServer, token: str) -> Iterator[None]:
    """A request admitted and left waiting for the rest of its body, holding its slot."""
    body = b'{"question": "who works at Ensera?"}'
    head = (
        b"POST /v1/recalls HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    deadline = time.monotonic() + 20
    with httpx.Client(base_url=server.base_url) as client, ExitStack() as stack:
        while True:
            assert time.monotonic() < deadline, "the held request was never admitted"
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", server.port), 30))
            sock.sendall(head + body[:1])
            # Until the held request has taken its slot; a probe that took the slot first had
            # the held request refused (it is answered at once), and it is sent again.
            while busy(client, token) is None and not select.select([sock], [], [], 0)[0]:
                assert time.monotonic() < deadline, "the held request was never admitted"
                time.sleep(0.02)
            if not select.select([sock], [], [], 0)[0]:
                break
            sock.close()
        yield
        sock.sendall(body[1:])
        assert sock.recv(64).startswith(b"HTTP/1.1 200")


def busy(client: httpx.Client, token: str) -> httpx.Response | None:
    """The 429 a token gets now, or None if it was admitted."""
    answer = client.get("/v1/freshness", headers={"Authorization": f"Bearer {token}"})
    if answer.status_code == 200:
        return None
    return answer


def assert_rate_limited(answer: httpx.Response | None) -> None:
    assert answer is not None
    assert answer.status_code == 429
    assert answer.json()["error"]["code"] == "rate_limited"
    assert answer.headers["retry-after"] == "1"


def test_a_token_over_its_limit_is_refused_at_once(live_server: LiveServer) -> None:
    first, second = live_server.token("alpha"), live_server.token("alpha")
    with httpx.Client(base_url=live_server.base_url) as client:
        with held(live_server, first):
            assert_rate_limited(busy(client, first))
            observed = client.post(
                "/v1/observations",
                json={"messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {first}"},
            )
            assert_rate_limited(observed)
            assert busy(client, second) is None  # the project has room for another token
            unknown = client.get("/v1/freshness", headers={"Authorization": "Bearer tsk_x"})
            assert unknown.json() == unauthenticated(NOT_ACCEPTED)  # authentication comes first
        assert busy(client, first) is None
        assert busy(client, first) is None
        assert (
            client.get("/v1/freshness", headers={"Authorization": f"Bearer {first}"}).json()[
                "stored"
            ]
            is None
        )  # the refused observation stored nothing


def test_a_busy_project_does_not_block_another(live_server: LiveServer) -> None:
    alpha = [live_server.token("alpha") for _ in range(3)]
    beta, gamma = live_server.token("beta"), live_server.token("gamma")
    with httpx.Client(base_url=live_server.base_url) as client:
        with held(live_server, alpha[0]), held(live_server, alpha[1]):
            assert_rate_limited(busy(client, alpha[2]))  # alpha is at its project limit
            assert busy(client, beta) is None  # beta is served meanwhile
            with held(live_server, beta):
                assert_rate_limited(busy(client, gamma))  # the process is at its limit
            assert busy(client, gamma) is None
        assert busy(client, alpha[2]) is None
