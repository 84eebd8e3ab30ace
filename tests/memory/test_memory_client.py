"""`satchel.memory.client` against the real service: every operation this deployment serves, through
both the synchronous and the asynchronous client; typed errors; retries of 429 with one key."""

from __future__ import annotations

import base64
import itertools
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg
import pytest
from client_kit import client_for, close
from hypothesis import given
from hypothesis import strategies as st
from memory_kit import LiveServer
from test_memory_metrics import scrape

from satchel.memory.client import (
    AsyncMemoryClient,
    Conflict,
    Forbidden,
    Freshness,
    InvalidRequest,
    MemoryClient,
    MemoryServiceError,
    NotFound,
    RateLimited,
    Retries,
    Unauthenticated,
    Unavailable,
)
from satchel.memory.client.calls import Call
from satchel.memory.config import MemorySettings

TURN = [
    {"role": "user", "content": "I moved to Lisbon last spring."},
    {"role": "assistant", "content": "Lisbon, noted."},
]


# ---- turns, recall, context, passages, messages ------------------------------------------------


async def test_turns_are_stored_once_recalled_and_read_back(
    live_server: LiveServer, memory: Any
) -> None:
    assert await memory.freshness() == Freshness("alpha", None, None, 0)
    key = str(uuid.uuid4())
    first = await memory.observe(idempotency_key=key, messages=TURN, data_subject_id="ana")
    again = await memory.observe(idempotency_key=key, messages=TURN, data_subject_id="ana")
    assert again == first == {"id": first["id"], "scope": "alpha", "log_offset": 0}
    keyless = await memory.observe(messages=TURN[:1], occurred_at="2026-03-01T10:00:00Z")
    assert keyless["log_offset"] == 1
    assert (await memory.freshness()).stored == 1

    recall = await memory.recall(question="Where does Ana live?", data_subject_id="ana", hops=1)
    assert recall["controls"]["hops"] == 1
    assert {"facts", "reports", "passages", "anchors"} <= set(recall)

    context = await memory.context(data_subject_id="ana", max_characters=2000)
    assert [turn["log_offset"] for turn in context["turns"]] == [0]
    assert context["watermark"]["stored"] == 1

    found = await memory.search_passages(question="Lisbon", data_subject_id="ana", limit=5)
    assert found["passages"], found
    passage = found["passages"][0]
    assert "Lisbon" in passage["preview"]
    window = await memory.get_message(chunk_id=passage["chunk_id"], byte_limit=4096)
    assert window["text"] in {m["content"] for m in TURN}
    assert window["content_digest"] == passage["content_digest"]
    assert window["complete"] is True
    only_assistant = await memory.search_passages(question="Lisbon", source_role="assistant")
    assert {p["role"] for p in only_assistant["passages"]} == {"assistant"}


# ---- records and citations ---------------------------------------------------------------------


def claim(subject: str, predicate: str, obj: str, statement: str) -> dict[str, Any]:
    return {
        "data_subject_id": "ana",
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "statement": statement,
    }


async def test_records_are_asserted_listed_cited_corrected_and_retracted(memory: Any) -> None:
    works, speaks = (
        claim("Ana", "works_at", "Ensera", "Ana works at Ensera."),
        claim("Ana", "speaks", "Irish", "Ana speaks Irish."),
    )
    asserted = (await memory.assert_records([works, speaks]))["records"]
    assert [r["replayed"] for r in asserted] == [False, False]
    assert "idempotency_key" not in works  # the caller's mapping is left alone

    listed = await memory.list_records(data_subject_id="ana")
    assert {r["id"] for r in listed["records"]} == {r["id"] for r in asserted}
    pages = await memory.every("list_records", data_subject_id="ana", limit=1)
    assert [len(p["records"]) for p in pages] == [1, 1]
    assert {p["records"][0]["id"] for p in pages} == {r["id"] for r in asserted}

    fact = asserted[0]
    cited = await memory.resolve_citation(id=fact["id"], limit=1)
    assert (cited["id"], cited["status"], cited["predicate"]) == (fact["id"], "current", "works_at")
    assert len(cited["evidence"]) == 1

    (corrected,) = (
        await memory.correct_records(
            [
                {
                    "id": fact["id"],
                    "expected_version": fact["version"],
                    "object": "Ensera Labs",
                    "statement": "Ana works at Ensera Labs.",
                }
            ]
        )
    )["records"]
    assert corrected["original_id"] == fact["id"]
    history = await memory.record_history(id=fact["id"])
    assert history["id"] == fact["id"]
    history_pages = await memory.every("record_history", id=fact["id"], limit=1)
    assert history_pages[0]["id"] == fact["id"]

    spoken = asserted[1]
    (retracted,) = (
        await memory.retract_records([{"id": spoken["id"], "expected_version": spoken["version"]}])
    )["records"]
    assert retracted["id"] == spoken["id"]
    assert (await memory.resolve_citation(id=spoken["id"]))["status"] == "retracted"


async def test_a_record_key_the_caller_gave_is_kept(memory: Any) -> None:
    key = str(uuid.uuid4())
    item = {**claim("Ana", "works_at", "Ensera", "Ana works at Ensera."), "idempotency_key": key}
    first = (await memory.assert_records([item]))["records"][0]
    again = (await memory.assert_records([item]))["records"][0]
    assert (again["id"], again["replayed"]) == (first["id"], True)


# ---- artifacts and subjects --------------------------------------------------------------------


async def test_artifacts_are_written_read_listed_and_deleted(memory: Any) -> None:
    ids = [str(uuid.uuid4()) for _ in range(2)]
    content = b'{"step": 1, "bytes": "\x00\xff"}'
    stored = await memory.put_artifact(
        id=ids[0], data_subject_id="ana", kind="state", content=content, name="session"
    )
    assert (stored["id"], stored["bytes"], stored["replayed"]) == (ids[0], len(content), False)
    updated = await memory.put_artifact(
        id=ids[0],
        data_subject_id="ana",
        kind="state",
        content=b"{}",
        name="session",
        expected_version=stored["version"],
    )
    await memory.put_artifact(id=ids[1], data_subject_id="ana", kind="file", content=b"notes")
    loaded = await memory.get_artifact(id=ids[0], data_subject_id="ana")
    assert base64.b64decode(loaded["content"]) == b"{}"
    assert loaded["version"] == updated["version"]

    states = await memory.list_artifacts(kind="state", data_subject_id="ana")
    assert [a["id"] for a in states["artifacts"]] == [ids[0]]
    pages = await memory.every("list_artifacts", data_subject_id="ana", limit=1)
    assert sorted(p["artifacts"][0]["id"] for p in pages) == sorted(ids)

    deleted = await memory.delete_artifact(id=ids[0], expected_version=updated["version"])
    assert deleted == {"deleted": True}
    with pytest.raises(NotFound) as missing:
        await memory.get_artifact(id=ids[0])
    assert (missing.value.status, missing.value.code) == (404, "not_found")


async def test_subjects_are_registered_found_listed_and_updated(memory: Any) -> None:
    first = await memory.register_subject(external_reference="crm-1", label="Ana")
    assert (first["external_reference"], first["replayed"]) == ("crm-1", False)
    key = str(uuid.uuid4())
    second = await memory.register_subject(idempotency_key=key, external_reference="crm-2")
    replay = await memory.register_subject(idempotency_key=key, external_reference="crm-2")
    assert (replay["id"], replay["replayed"]) == (second["id"], True)

    assert (await memory.get_subject(id=first["id"]))["label"] == "Ana"
    assert (await memory.get_subject(external_reference="crm-2"))["id"] == second["id"]
    pages = await memory.every("list_subjects", limit=1)
    assert sorted(p["subjects"][0]["id"] for p in pages) == sorted([first["id"], second["id"]])

    renamed = await memory.update_subject(
        id=first["id"], expected_version=first["version"], external_reference="crm-1", label="A."
    )
    assert renamed["label"] == "A." and renamed["version"] != first["version"]
    with pytest.raises(Conflict) as stale:
        await memory.update_subject(id=first["id"], expected_version=first["version"], label="B")
    assert stale.value.status == 409


# ---- erasure and export ------------------------------------------------------------------------


async def test_a_person_is_exported_then_erased(memory: Any) -> None:
    kept = await memory.observe(messages=TURN, data_subject_id="bo")
    gone = await memory.observe(messages=TURN, data_subject_id="ana")
    exported = await memory.export(data_subject_id="ana")
    assert exported["data_subject_id"] == "ana"
    assert exported["rows"]["observation"] == 1
    turns = await memory.export(source_observation_ids=[gone["id"]])
    assert turns["rows"]["observation"] == 1

    receipt = await memory.erase(data_subject_id="ana", reason="asked")
    assert receipt["deleted"]["observation"] == 1 and receipt["clean"] is True
    assert (await memory.export(data_subject_id="ana"))["rows"]["observation"] == 0
    by_turn = await memory.erase(source_observation_ids=[kept["id"]])
    assert by_turn["source_observation_ids"] == [kept["id"]]


# ---- typed errors ------------------------------------------------------------------------------


async def test_refusals_are_typed_and_carry_status_and_code(
    live_server: LiveServer, memory: Any, flavour: str
) -> None:
    key = str(uuid.uuid4())
    await memory.observe(idempotency_key=key, messages=TURN)
    with pytest.raises(Conflict) as conflict:
        await memory.observe(idempotency_key=key, messages=TURN[:1])
    assert (conflict.value.status, conflict.value.code) == (409, "idempotency_conflict")

    with pytest.raises(InvalidRequest) as invalid:
        await memory.observe(messages=[{"role": "narrator", "content": "hi"}])
    assert (invalid.value.status, invalid.value.code) == (400, "invalid_turn")
    assert "role" in invalid.value.message

    with pytest.raises(NotFound) as missing:
        await memory.resolve_citation(id=str(uuid.uuid4()))
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    token = live_server.token("alpha", read_only=True)
    reader = client_for(live_server, flavour, token)
    try:
        assert (await reader.freshness()).stored == 0
        with pytest.raises(Forbidden) as forbidden:
            await reader.observe(messages=TURN)
        assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
        assert token not in str(forbidden.value) and token not in repr(forbidden.value)
        assert token not in repr(reader.client)
    finally:
        await close(reader)

    stranger = client_for(live_server, flavour, "tsk_not-a-token")
    try:
        with pytest.raises(Unauthenticated) as unknown:
            await stranger.freshness()
        assert (unknown.value.status, unknown.value.code) == (401, "unauthenticated")
    finally:
        await close(stranger)
    assert (await memory.freshness()).stored == 0  # nothing refused was stored


def dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_no_answer_is_unavailable_with_status_zero(flavour: str) -> None:
    token = "tsk_" + "s" * 40
    if flavour == "sync":
        with MemoryClient(dead_address(), token) as client, pytest.raises(Unavailable) as down:
            client.freshness()
    else:
        async with AsyncMemoryClient(dead_address(), token) as async_client:
            with pytest.raises(Unavailable) as down:
                await async_client.observe(messages=TURN)
    assert (down.value.status, down.value.code) == (0, "unreachable")
    assert isinstance(down.value, MemoryServiceError)
    assert token not in str(down.value) and down.value.__cause__ is None


# ---- retries -----------------------------------------------------------------------------------

HELD = b'{"question": "who works at Ensera?"}'


def hold(server: LiveServer, token: str) -> socket.socket | str:
    """A recall admitted and left waiting for the rest of its body, holding the token's slot;
    else why not (a busy machine can refuse its first lookup, or a probe can take the slot)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(
        b"POST /v1/recalls HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(HELD)}\r\n\r\n".encode()
        + HELD[:1]
    )
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 20
    why = "no probe was refused within 20 s"
    while time.monotonic() < deadline:
        if select.select([sock], [], [], 0)[0]:
            why = "answered: " + sock.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
            break
        if httpx.get(f"{server.base_url}/v1/freshness", headers=headers).status_code == 429:
            return sock
        time.sleep(0.02)
    sock.close()
    return why


@contextmanager
def holding(server: LiveServer, token: str) -> Iterator[socket.socket]:
    """`hold`, tried again for up to a minute while the slot is taken (by a probe, or by a
    request of the test that the deployment is still answering: a race that grows with the
    machine's load); the socket is closed on the way out."""
    why = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = hold(server, token)
        if isinstance(held, socket.socket):
            with held:
                yield held
            return
        why = held
        time.sleep(0.25)
    raise AssertionError(f"the held request was never admitted (last: {why})")


def release_later(sock: socket.socket, seconds: float) -> threading.Thread:
    def release() -> None:
        time.sleep(seconds)
        sock.sendall(HELD[1:])

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def observations(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM observations").fetchone()
    assert row is not None
    return int(row[0])


class Attempts:
    """What each attempt sent, seen by an httpx event hook on the real connection."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, str, bytes]] = []

    def request(self, request: httpx.Request) -> None:
        self.sent.append((time.monotonic(), request.url.path, request.content))

    async def arequest(self, request: httpx.Request) -> None:
        self.request(request)


PATIENT = Retries(attempts=10, deadline=30.0)  # room for a slow machine to release the slot


@pytest.fixture
def memory_settings() -> MemorySettings:
    """One request at a time per token, so a held request makes the next one 429 (for as long
    as the test holds it: its body may take a minute, not the default 10 s)."""
    return MemorySettings(work_limit=3, project_limit=2, token_limit=1, body_timeout=60.0)


async def test_a_rate_limited_turn_is_retried_with_the_same_key_and_stored_once(
    live_server: LiveServer, flavour: str
) -> None:
    token = live_server.token("alpha")
    attempts = Attempts()
    with holding(live_server, token) as sock:
        releaser = release_later(sock, 0.3)
        if flavour == "sync":
            http = httpx.Client(event_hooks={"request": [attempts.request]})
            with MemoryClient(live_server.base_url, token, http=http, retries=PATIENT) as client:
                receipt = client.observe(messages=TURN, data_subject_id="ana")
            http.close()
        else:
            async with (
                httpx.AsyncClient(event_hooks={"request": [attempts.arequest]}) as ahttp,
                AsyncMemoryClient(
                    live_server.base_url, token, http=ahttp, retries=PATIENT
                ) as async_client,
            ):
                receipt = await async_client.observe(messages=TURN, data_subject_id="ana")
        releaser.join()
    assert receipt["log_offset"] == 0
    assert len(attempts.sent) >= 2  # refused while the slot was held, then stored
    assert {path for _, path, _ in attempts.sent} == {"/v1/observations"}
    bodies = {body for _, _, body in attempts.sent}
    assert len(bodies) == 1 and b'"idempotency_key"' in bodies.pop()
    times = [at for at, _, _ in attempts.sent]
    assert all(later - earlier >= 0.9 for earlier, later in itertools.pairwise(times))
    assert observations(live_server.database_url) == 1


def refused_turns(server: LiveServer) -> float:
    """How many observations the deployment has refused with 429, by its own metrics."""
    return sum(
        sample.value
        for sample in scrape(server.base_url)
        if sample.name == "satchel_memory_requests_total"
        and sample.labels.get("route") == "/v1/observations"
        and sample.labels.get("status") == "429"
    )


async def test_retrying_stops_at_its_attempts_and_deadline(
    live_server: LiveServer, flavour: str
) -> None:
    token = live_server.token("alpha")
    for retries in (Retries(attempts=1), Retries(attempts=5, deadline=0.5)):
        client = client_for(live_server, flavour, token, retries=retries)
        try:
            with holding(live_server, token) as sock:
                before = refused_turns(live_server)
                with pytest.raises(RateLimited) as limited:
                    await client.observe(messages=TURN)
                # One attempt: a retry would wait the 1 s Retry-After, past the deadline.
                assert refused_turns(live_server) == before + 1
                sock.sendall(HELD[1:])
        finally:
            await close(client)
        assert (limited.value.status, limited.value.code) == (429, "rate_limited")
        assert limited.value.retry_after == 1.0
    assert observations(live_server.database_url) == 0


async def test_a_503_with_retry_after_is_retried_for_a_repeatable_call(
    live_server: LiveServer, flavour: str
) -> None:
    """A stand-in gateway answers 503 with Retry-After once, then forwards to the service."""
    token = live_server.token("alpha")
    real = httpx.Client()
    seen: list[bytes] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        if len(seen) == 1:
            error = {"error": {"code": "no_database_capacity", "message": "busy"}}
            return httpx.Response(503, json=error, headers={"Retry-After": "0"})
        answer = real.send(
            real.build_request(
                request.method, request.url, content=request.content, headers=request.headers
            )
        )
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    if flavour == "sync":
        with MemoryClient(
            live_server.base_url, token, http=httpx.Client(transport=httpx.MockTransport(gateway))
        ) as client:
            receipt = client.observe(messages=TURN)
    else:

        async def agateway(request: httpx.Request) -> httpx.Response:
            await request.aread()
            return gateway(request)

        transport = httpx.MockTransport(agateway)
        async with AsyncMemoryClient(
            live_server.base_url, token, http=httpx.AsyncClient(transport=transport)
        ) as async_client:
            receipt = await async_client.observe(messages=TURN)
    real.close()
    assert receipt["log_offset"] == 0
    assert len(seen) == 2 and seen[0] == seen[1]
    assert observations(live_server.database_url) == 1


def refused(status: int, retry_after: float | None) -> MemoryServiceError:
    return MemoryServiceError(status, "x", "refused", retry_after=retry_after)


OBSERVE = Call("POST", "/v1/observations", {}, 201)
FEEDBACK = Call("POST", "/v1/feedback/record", {}, 200, repeatable=False)


def test_what_is_retried() -> None:
    retries = Retries(attempts=3, longest_wait=2.0, deadline=10.0)
    assert retries.wait(OBSERVE, refused(429, None), 1, 0.0) == 1.0
    assert retries.wait(OBSERVE, refused(429, 30.0), 1, 0.0) == 2.0  # capped
    assert retries.wait(FEEDBACK, refused(429, 0.5), 1, 0.0) == 0.5  # nothing was done
    assert retries.wait(OBSERVE, refused(503, 0.5), 1, 0.0) == 0.5
    assert retries.wait(FEEDBACK, refused(503, 0.5), 1, 0.0) is None  # may have been done
    assert retries.wait(OBSERVE, refused(503, None), 1, 0.0) is None
    for status in (400, 404, 409, 500, 502):
        assert retries.wait(OBSERVE, refused(status, 0.0), 1, 0.0) is None
    assert retries.wait(OBSERVE, refused(429, 1.0), 3, 0.0) is None  # out of attempts
    assert retries.wait(OBSERVE, refused(429, 1.0), 1, 9.5) is None  # past the deadline
    with pytest.raises(ValueError, match="attempts"):
        Retries(attempts=0)


@given(
    attempts=st.integers(1, 6),
    longest=st.floats(0, 5),
    deadline=st.floats(0, 20),
    answers=st.lists(
        st.tuples(st.sampled_from([429, 503, 400]), st.none() | st.floats(0, 60)), max_size=10
    ),
)
def test_retrying_never_passes_its_limits(
    attempts: int, longest: float, deadline: float, answers: list[tuple[int, float | None]]
) -> None:
    retries = Retries(attempts=attempts, longest_wait=longest, deadline=deadline)
    spent, tried = 0.0, 1
    for status, after in answers:
        pause = retries.wait(OBSERVE, refused(status, after), tried, spent)
        if pause is None:
            break
        assert 0 <= pause <= longest
        spent, tried = spent + pause, tried + 1
    assert tried <= attempts
    assert spent <= deadline
