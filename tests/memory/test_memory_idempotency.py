"""Idempotent observation: one key, one turn, the first receipt; contiguous offsets under load."""

from __future__ import annotations

import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
from memory_kit import LiveServer

TURN = [
    {"role": "user", "content": "I moved to Galway."},
    {"role": "assistant", "content": "Noted."},
]


def post_with_backoff(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    """Post an observation, retrying 429s with jittered exponential backoff."""
    delay = 0.01
    for _ in range(200):
        answer = client.post("/v1/observations", json=body)
        if answer.status_code != 429:
            return answer
        assert answer.json()["error"]["code"] == "rate_limited"
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.25)
    raise AssertionError("still rate limited after 200 attempts")


def offsets(url: str, project: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT o.log_offset FROM observations o JOIN projects p ON p.id = o.project_id"
            " WHERE p.name = %s ORDER BY o.log_offset",
            (project,),
        ).fetchall()
    return [row[0] for row in rows]


def authorized(server: LiveServer, project: str) -> httpx.Client:
    token = server.token(project)
    return httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def test_same_key_and_content_replays_the_first_receipt(live_server: LiveServer) -> None:
    key = str(uuid.uuid4())
    with authorized(live_server, "alpha") as client:
        first = client.post(
            "/v1/observations",
            json={"idempotency_key": key, "data_subject_id": "ann", "messages": TURN},
        )
        assert first.status_code == 201
        retimed = [{**m, "occurred_at": "2020-01-01T00:00:00+02:00"} for m in TURN]
        for body in (
            {"idempotency_key": key, "data_subject_id": "ann", "messages": TURN},
            {"idempotency_key": key.upper(), "data_subject_id": "ann", "messages": TURN},
            {
                "idempotency_key": key,
                "data_subject_id": "ann",
                "occurred_at": "2001-02-03T04:05:06Z",
                "messages": retimed,
            },
            {
                "idempotency_key": key,
                "data_subject_id": "ann",
                "messages": [{**m, "group_ordinal": i} for i, m in enumerate(TURN)],
            },
        ):
            again = client.post("/v1/observations", json=body)
            assert again.status_code == 201
            assert again.json() == first.json()
        assert client.get("/v1/freshness").json()["stored"] == 0


def test_same_key_with_other_content_conflicts(live_server: LiveServer) -> None:
    key = str(uuid.uuid4())
    with authorized(live_server, "alpha") as client:
        assert (
            client.post("/v1/observations", json={"idempotency_key": key, "messages": TURN})
        ).status_code == 201
        for body in (
            {"idempotency_key": key, "messages": TURN[:1]},
            {"idempotency_key": key, "messages": [{**TURN[0], "content": "I moved to Cork."}]},
            {"idempotency_key": key, "messages": [{**TURN[0], "role": "system"}, TURN[1]]},
            {"idempotency_key": key, "messages": TURN, "data_subject_id": "ann"},
            {
                "idempotency_key": key,
                "messages": [{**m, "group_ordinal": 0} for m in TURN],
            },
        ):
            answer = client.post("/v1/observations", json=body)
            assert answer.status_code == 409
            assert answer.json()["error"]["code"] == "idempotency_conflict"
        assert client.get("/v1/freshness").json()["stored"] == 0


def test_no_key_stores_a_new_turn_every_time(live_server: LiveServer) -> None:
    with authorized(live_server, "alpha") as client:
        for body in ({"messages": TURN}, {"idempotency_key": "", "messages": TURN}):
            for _ in range(2):
                assert client.post("/v1/observations", json=body).status_code == 201
        assert client.get("/v1/freshness").json()["stored"] == 3


def test_fifty_concurrent_attempts_with_one_key_store_one_turn(live_server: LiveServer) -> None:
    key = str(uuid.uuid4())
    body = {"idempotency_key": key, "data_subject_id": "ann", "messages": TURN}
    start = threading.Barrier(50)
    with authorized(live_server, "alpha") as client:

        def attempt(_: int) -> httpx.Response:
            start.wait()
            return post_with_backoff(client, body)

        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(attempt, range(50)))
        assert {a.status_code for a in answers} == {201}
        assert len({a.text for a in answers}) == 1
        assert answers[0].json()["log_offset"] == 0
        assert client.get("/v1/freshness").json()["stored"] == 0
    with psycopg.connect(live_server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM observations").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM retry_keys").fetchone() == (1,)


def test_offsets_stay_contiguous_per_project_under_concurrency(live_server: LiveServer) -> None:
    projects = ["alpha", "beta"]
    clients = {p: authorized(live_server, p) for p in projects}
    per_worker = 15

    def worker(index: int) -> list[tuple[str, int]]:
        project = projects[index % 2]
        seen = []
        for n in range(per_worker):
            if n % 5 == 4:  # a refused turn in the middle of the stream claims nothing
                bad = clients[project].post(
                    "/v1/observations", json={"messages": [{"role": "user", "content": "a\0b"}]}
                )
                assert bad.status_code == 400
            body: dict[str, Any] = {"messages": [{"role": "user", "content": f"{index}/{n}"}]}
            if n % 3 == 0:
                body["idempotency_key"] = str(uuid.uuid4())
            answer = post_with_backoff(clients[project], body)
            assert answer.status_code == 201, answer.text
            seen.append((project, answer.json()["log_offset"]))
        return seen

    try:
        with ThreadPoolExecutor(6) as pool:
            answered = [pair for seen in pool.map(worker, range(6)) for pair in seen]
    finally:
        for client in clients.values():
            client.close()
    for project in projects:
        mine = sorted(offset for name, offset in answered if name == project)
        assert mine == list(range(3 * per_worker))
        assert offsets(live_server.database_url, project) == mine
