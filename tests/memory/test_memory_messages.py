"""Reading the stored words: POST /v1/messages/get windows and POST /v1/passages/search controls."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from memory_kit import LiveServer

TEXT = "Olá, café ☕ and 𝄞 music"  # 1-, 2-, 3- and 4-byte characters
RAW = TEXT.encode()
DIGEST = hashlib.sha256(RAW).hexdigest()


@pytest.fixture
def alpha(live_server: LiveServer) -> Iterator[httpx.Client]:
    token = live_server.token("alpha", read_only=True)
    writer = live_server.token("alpha")
    answer = httpx.post(
        f"{live_server.base_url}/v1/observations",
        headers={"Authorization": f"Bearer {writer}"},
        json={
            "data_subject_id": "ana",
            "occurred_at": "2026-03-01T10:00:00+02:00",
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": TEXT},
            ],
        },
    )
    assert answer.status_code == 201
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client


def chunk(url: str, content: str) -> tuple[str, str]:
    """A message's chunk id and observation id, found in the database."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT id, observation_id FROM messages WHERE content = %s", (content,)
        ).fetchone()
    assert row is not None
    return str(row[0]), str(row[1])


def window(client: httpx.Client, **body: object) -> httpx.Response:
    return client.post("/v1/messages/get", json=body)


def test_a_whole_message_in_one_window(live_server: LiveServer, alpha: httpx.Client) -> None:
    chunk_id, source_id = chunk(live_server.database_url, TEXT)
    answer = window(alpha, chunk_id=chunk_id)
    assert answer.status_code == 200
    assert answer.json() == {
        "chunk_id": chunk_id,
        "source_id": source_id,
        "ordinal": 1,
        "role": "assistant",
        "occurred_at": "2026-03-01T08:00:00Z",
        "content_digest": DIGEST,
        "message_bytes": len(RAW),
        "byte_start": 0,
        "byte_end": len(RAW),
        "text": TEXT,
        "complete": True,
    }


def test_windows_follow_character_boundaries(live_server: LiveServer, alpha: httpx.Client) -> None:
    chunk_id, _ = chunk(live_server.database_url, TEXT)
    pieces: list[str] = []
    start = 0
    while True:
        body: dict[str, object] = {"chunk_id": chunk_id, "byte_start": start, "byte_limit": 5}
        if start:
            body["expected_digest"] = DIGEST
        answer = window(alpha, **body).json()
        assert answer["byte_start"] == start
        assert 0 < answer["byte_end"] - start <= 5
        assert answer["text"].encode() == RAW[start : answer["byte_end"]]
        assert answer["complete"] is False
        pieces.append(answer["text"])
        if "next_byte_start" not in answer:
            assert answer["byte_end"] == len(RAW)
            break
        assert answer["next_byte_start"] == answer["byte_end"]
        start = answer["byte_end"]
    assert "".join(pieces) == TEXT
    assert len(pieces) > len(RAW) // 5  # some windows gave back a partial character


def test_continuations_are_bound_to_the_digest(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    chunk_id, _ = chunk(live_server.database_url, TEXT)
    unbound = window(alpha, chunk_id=chunk_id, byte_start=4)
    assert unbound.status_code == 400
    assert unbound.json()["error"]["code"] == "invalid_message_window"
    changed = window(alpha, chunk_id=chunk_id, byte_start=4, expected_digest="0" * 64)
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "source_changed"
    first = window(alpha, chunk_id=chunk_id, expected_digest="f" * 64)
    assert first.json()["error"]["code"] == "source_changed"
    at_end = window(alpha, chunk_id=chunk_id, byte_start=len(RAW), expected_digest=DIGEST)
    assert at_end.status_code == 200
    assert (at_end.json()["text"], at_end.json()["byte_end"]) == ("", len(RAW))


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"chunk_id": "not-a-uuid"},
        {"chunk_id": str(uuid.UUID(int=0))},
        {"chunk_id": "CHUNK", "byte_start": -1},
        {"chunk_id": "CHUNK", "byte_start": 65_537, "expected_digest": DIGEST},
        {"chunk_id": "CHUNK", "byte_limit": 3},
        {"chunk_id": "CHUNK", "byte_limit": 4097},
        {"chunk_id": "CHUNK", "expected_digest": DIGEST.upper()},
        {"chunk_id": "CHUNK", "expected_digest": "abc"},
        {"chunk_id": "CHUNK", "byte_start": 1000, "expected_digest": DIGEST},  # past the end
        {"chunk_id": "CHUNK", "byte_start": 3, "expected_digest": DIGEST},  # inside "á"
    ],
)
def test_bad_windows_are_refused(
    live_server: LiveServer, alpha: httpx.Client, body: dict[str, object]
) -> None:
    chunk_id, _ = chunk(live_server.database_url, TEXT)
    if body.get("chunk_id") == "CHUNK":
        body = {**body, "chunk_id": chunk_id}
    answer = window(alpha, **body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_message_window"


def test_other_projects_and_erased_messages_are_not_found(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    chunk_id, source_id = chunk(live_server.database_url, TEXT)
    beta = live_server.token("beta")
    foreign = httpx.post(
        f"{live_server.base_url}/v1/messages/get",
        headers={"Authorization": f"Bearer {beta}"},
        json={"chunk_id": chunk_id},
    )
    unknown = window(alpha, chunk_id=str(uuid.uuid4()))
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("DELETE FROM observations WHERE id = %s", (source_id,))
    erased = window(alpha, chunk_id=chunk_id)
    for answer in (foreign, unknown, erased):
        assert answer.status_code == 404
        assert answer.json() == {"error": {"code": "not_found", "message": "message not found"}}


def test_passage_search_answers_from_full_text_before_the_index_is_built(
    alpha: httpx.Client,
) -> None:
    answer = alpha.post(
        "/v1/passages/search",
        json={
            "question": "café",
            "limit": 32,
            "candidates": 1000,
            "data_subject_id": "ana",
            "source_role": "assistant",
        },
    )
    assert answer.status_code == 200
    page = answer.json()
    assert [passage["preview"] for passage in page.pop("passages")] == [TEXT]
    assert page == {
        "generation_id": "",
        "through_offset": 0,
        "covered_through_offset": -1,
        "build_state": "building",
        "approximate": True,
    }


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"question": ""},
        {"question": " \t"},
        {"question": "x" * 8193},
        {"question": "é" * 4097},
        {"question": "a\x00b"},
        {"question": "q", "limit": 0},
        {"question": "q", "limit": 33},
        {"question": "q", "candidates": -1},
        {"question": "q", "candidates": 1001},
        {"question": "q", "limit": 10, "candidates": 9},
        {"question": "q", "data_subject_id": "s" * 1025},
        {"question": "q", "data_subject_id": "a\x00"},
        {"question": "q", "source_role": "robot"},
    ],
)
def test_bad_passage_searches_are_refused(alpha: httpx.Client, body: dict[str, object]) -> None:
    answer = alpha.post("/v1/passages/search", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_passage_query"


def test_passage_search_bounds_are_inclusive(alpha: httpx.Client) -> None:
    for body in (
        {"question": "x" * 8192, "limit": 1, "candidates": 1},
        {"question": "q", "candidates": 0, "source_role": ""},
        {"question": "q", "limit": None, "candidates": None, "data_subject_id": "s" * 1024},
    ):
        assert alpha.post("/v1/passages/search", json=body).status_code == 200
