"""Idempotent observation: one key, one turn, the first receipt; contiguous offsets under load;
and a state machine of retries, reuses and erasures against the contract's model."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from memory_kit import LiveServer, post_with_backoff

TURN = [
    {"role": "user", "content": "I moved to Galway."},
    {"role": "assistant", "content": "Noted."},
]


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


TURNS = [
    (None, (("user", "I moved to Galway."),)),
    ("ann", (("user", "I moved to Galway."),)),
    ("ann", (("user", "I moved to Galway."), ("assistant", "Noted."))),
    ("ann", (("user", "I moved to Cork."),)),
]
TIMES = [None, "2020-01-01T00:00:00+02:00", "2001-02-03T04:05:06Z"]


class Retries(RuleBasedStateMachine):
    """A client retrying, reusing and erasing keys against the model of the contract: a key's
    first turn gives its receipt for ever, other content under it (or any after its erasure) is
    409, and every stored turn takes the next offset, none reused."""

    server: LiveServer

    def __init__(self) -> None:
        super().__init__()
        self.http = authorized(self.server, f"p{uuid.uuid4().hex[:12]}")
        self.keys: dict[str, tuple[int, dict[str, Any]]] = {}  # key -> (turn, receipt)
        self.erased: set[str] = set()
        self.appended = 0

    keys_made = Bundle("keys_made")

    def post(self, key: str | None, turn: int, when: str | None) -> httpx.Response:
        subject, said = TURNS[turn]
        body: dict[str, Any] = {"messages": [{"role": r, "content": c} for r, c in said]}
        if key is not None:
            body["idempotency_key"] = key
        if subject is not None:
            body["data_subject_id"] = subject
        if when is not None:
            body["occurred_at"] = when
        return self.http.post("/v1/observations", json=body)

    def stored_new(self, answer: httpx.Response) -> dict[str, Any]:
        assert answer.status_code == 201, answer.text
        receipt: dict[str, Any] = answer.json()
        assert receipt["log_offset"] == self.appended
        self.appended += 1
        return receipt

    @rule(target=keys_made, turn=st.integers(0, len(TURNS) - 1), when=st.sampled_from(TIMES))
    def observe_with_a_new_key(self, turn: int, when: str | None) -> str:
        key = str(uuid.uuid4())
        self.keys[key] = (turn, self.stored_new(self.post(key, turn, when)))
        return key

    @rule(
        key=keys_made,
        turn=st.integers(0, len(TURNS) - 1),
        when=st.sampled_from(TIMES),
        upper=st.booleans(),
    )
    def retry(self, key: str, turn: int, when: str | None, upper: bool) -> None:
        answer = self.post(key.upper() if upper else key, turn, when)
        first, receipt = self.keys[key]
        if key in self.erased or turn != first:
            assert answer.status_code == 409, answer.text
            assert answer.json()["error"]["code"] == "idempotency_conflict"
        else:
            assert answer.status_code == 201
            assert answer.json() == receipt

    @rule(turn=st.integers(0, len(TURNS) - 1))
    def observe_without_a_key(self, turn: int) -> None:
        self.stored_new(self.post(None, turn, None))

    @rule(key=keys_made)
    def erase(self, key: str) -> None:
        receipt = self.keys[key][1]
        answer = self.http.post("/v1/erasures", json={"source_observation_ids": [receipt["id"]]})
        assert answer.status_code == 200, answer.text
        self.erased.add(key)

    @invariant()
    def the_log_is_contiguous(self) -> None:
        stored = self.http.get("/v1/freshness").json()["stored"]
        assert stored == (self.appended - 1 if self.appended else None)

    def teardown(self) -> None:
        self.http.close()


def test_retries_follow_the_contract(live_server: LiveServer) -> None:
    Retries.server = live_server
    run_state_machine_as_test(
        Retries,
        settings=settings(
            max_examples=15, stateful_step_count=12, deadline=None, derandomize=True, database=None
        ),
    )
