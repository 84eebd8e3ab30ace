"""Passage search and recall at the edges: nothing related, the calendar's first and last days,
real similarities; and the lexeme counts behind the ranking, checked against a full count."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import LiveServer
from psycopg import sql

from satchel.memory.passages.embedder import EmbeddingSettings, load_embedder
from satchel.memory.passages.index import index_passages
from satchel.memory.store.terms import count_terms, frequencies

EDGE_QUESTIONS = [
    "What happened on 9999-12-31?",
    "What happened on 0001-01-01?",
    "What did we say in January 0001?",
    "What did we say in December 9999?",
    "Anything on 31 December, 9999 or on January 1, 0001?",
]


def client_for(live_server: LiveServer, project: str) -> httpx.Client:
    token = live_server.token(project)
    return httpx.Client(base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def beta(live_server: LiveServer) -> Iterator[httpx.Client]:
    with client_for(live_server, "beta") as client:
        yield client


def observe(client: httpx.Client, content: str, subject: str = "ann", **turn: Any) -> str:
    body = {"data_subject_id": subject, "messages": [{"role": "user", "content": content}], **turn}
    answer = client.post("/v1/observations", json=body)
    assert answer.status_code == 201, answer.text
    receipt: str = answer.json()["id"]
    return receipt


def project_id(url: str, name: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT id FROM projects WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def build(url: str, project: int) -> None:
    """What the worker does for passages: count lexemes and embed, until nothing is left."""

    async def run() -> None:
        embedder = load_embedder(EmbeddingSettings())
        async with await psycopg.AsyncConnection.connect(url) as conn:
            while await count_terms(conn, project) or await index_passages(conn, project, embedder):
                await conn.commit()
            await conn.commit()

    asyncio.run(run())


@pytest.mark.parametrize("indexed", [False, True], ids=["full text", "indexed"])
def test_a_question_nothing_relates_to_answers_no_passages(
    live_server: LiveServer, beta: httpx.Client, indexed: bool
) -> None:
    observe(beta, "other")
    if indexed:
        build(live_server.database_url, project_id(live_server.database_url, "beta"))
    page = beta.post("/v1/passages/search", json={"question": "Where does Ann live?"})
    assert page.status_code == 200, page.text
    assert page.json()["passages"] == []
    recalled = beta.post("/v1/recalls", json={"question": "Where does Ann live?"})
    assert recalled.status_code == 200, recalled.text
    assert recalled.json()["passages"] == []


@pytest.mark.parametrize("indexed", [False, True], ids=["full text", "indexed"])
def test_questions_at_the_calendars_edges_are_answered(
    live_server: LiveServer, beta: httpx.Client, indexed: bool
) -> None:
    first = "We met on the first day of the calendar."
    last = "We met on the last day of the calendar."
    observe(beta, first, occurred_at="0001-01-01T00:00:00Z")
    observe(beta, last, occurred_at="9999-12-31T12:00:00Z")
    observe(beta, "Something in between.", occurred_at="2024-05-01T12:00:00Z")
    if indexed:
        build(live_server.database_url, project_id(live_server.database_url, "beta"))
    for question in EDGE_QUESTIONS:
        page = beta.post("/v1/passages/search", json={"question": question})
        assert page.status_code == 200, (question, page.text)
        found = [passage["preview"] for passage in page.json()["passages"]]
        if "9999" in question and "0001" not in question:
            assert found[0] == last, question
        if "0001" in question and "9999" not in question:
            assert found[0] == first, question
        recalled = beta.post("/v1/recalls", json={"question": question})
        assert recalled.status_code == 200, (question, recalled.text)


def test_similarity_is_a_real_score_not_relative_to_the_best(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    observe(beta, "My sister moved to Lisbon for a job at a bank.")
    for other in OTHERS:
        observe(beta, other)
    build(live_server.database_url, project_id(live_server.database_url, "beta"))
    close = beta.post("/v1/passages/search", json={"question": "Where did my sister move?"})
    far = beta.post("/v1/passages/search", json={"question": "Who won the chess final?"})
    best = close.json()["passages"][0]
    assert best["preview"].startswith("My sister") and 0.4 < best["similarity"] < 1.0
    assert all(passage["similarity"] < 0.3 for passage in far.json()["passages"])


OTHERS = [
    "The tide comes in twice a day along this coast.",
    "I have been learning to play the cello since January.",
    "The quarterly budget review is on Thursday afternoon.",
    "Our dog chewed the sofa again.",
    "We planted tomatoes and basil in the garden.",
    "The train to Cork was late by an hour.",
]


# ---- lexeme counts -------------------------------------------------------------------------

WORDS = ["lisbon", "sister", "bank", "dog", "cello", "river"]
SUBJECTS = ["ann", "ben", ""]
ROLES = ["user", "assistant"]

turns = st.lists(
    st.tuples(
        st.sampled_from(SUBJECTS),
        st.sampled_from(ROLES),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=12,
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), turns),
        st.tuples(st.just("count"), st.integers(1, 5)),
        st.tuples(st.just("erase_subject"), st.sampled_from(SUBJECTS[:2])),
        st.tuples(st.just("erase_turn"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=8,
)


async def true_counts(
    conn: psycopg.AsyncConnection[Any], project: int, subject: str, roles: list[str]
) -> list[int]:
    """What the counts must say: every message of the scope counted from scratch."""
    cursor = await conn.execute(
        sql.SQL("SELECT count(*), {} FROM messages m WHERE m.project_id = %s{}{}").format(
            sql.SQL(", ").join(
                sql.SQL("count(*) FILTER (WHERE m.search_text @@ %s::tsquery)") for _ in WORDS
            ),
            sql.SQL(" AND m.data_subject_id = %s") if subject else sql.SQL(""),
            sql.SQL(" AND m.role = ANY(%s)") if roles else sql.SQL(""),
        ),
        [*WORDS, project, *([subject] if subject else []), *([roles] if roles else [])],
    )
    row = await cursor.fetchone()
    assert row is not None
    return [int(value) for value in row]


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=steps)
def test_counts_plus_the_uncounted_tail_equal_a_full_count(
    live_server: LiveServer, plan: list[tuple[str, Any]]
) -> None:
    name = f"p{uuid.uuid4().hex[:10]}"
    url = live_server.database_url
    with client_for(live_server, name) as client:
        observed: list[str] = []
        project = project_id(url, name)

        async def check() -> None:
            async with await psycopg.AsyncConnection.connect(url) as conn:
                for subject in SUBJECTS:
                    for roles in ([], ["user"], ["user", "assistant"]):
                        where = sql.SQL("m.project_id = %s")
                        params: list[Any] = [project]
                        if subject:
                            where = sql.SQL("{} AND m.data_subject_id = %s").format(where)
                            params.append(subject)
                        if roles:
                            where = sql.SQL("{} AND m.role = ANY(%s)").format(where)
                            params.append(roles)
                        cursor = await conn.execute(
                            "SELECT coalesce((SELECT terms_through FROM passage_progress"
                            " WHERE project_id = %s), -1)",
                            (project,),
                        )
                        row = await cursor.fetchone()
                        assert row is not None
                        found = await frequencies(
                            conn, project, subject, roles, False, WORDS, where, params, row[0]
                        )
                        want = await true_counts(conn, project, subject, roles)
                        assert [found.total, *found.frequencies] == want, (subject, roles)

        async def count(limit: int) -> None:
            async with await psycopg.AsyncConnection.connect(url) as conn:
                await count_terms(conn, project, limit)
                await conn.commit()

        for action, argument in plan:
            if action == "observe":
                for subject, role, words in argument:
                    body: dict[str, Any] = {
                        "messages": [{"role": role, "content": " ".join(words)}],
                    }
                    if subject:
                        body["data_subject_id"] = subject
                    answer = client.post("/v1/observations", json=body)
                    assert answer.status_code == 201, answer.text
                    observed.append(answer.json()["id"])
            elif action == "count":
                asyncio.run(count(argument))
            elif action == "erase_subject":
                answer = client.post("/v1/erasures", json={"data_subject_id": argument})
                assert answer.status_code == 200, answer.text
            elif observed:
                chosen = observed[argument % len(observed)]
                answer = client.post("/v1/erasures", json={"source_observation_ids": [chosen]})
                assert answer.status_code == 200, answer.text
            asyncio.run(check())
