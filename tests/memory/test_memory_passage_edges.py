"""Passage search and recall at the edges: nothing related, the calendar's first and last days,
real similarities; and the lexeme counts behind the ranking, checked against a full count."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import LiveServer
from psycopg import sql

from satchel.memory.passages.caches import CommonWords, SearchCaches
from satchel.memory.passages.embedder import DIMENSIONS, EmbeddingSettings, load_embedder
from satchel.memory.passages.index import index_passages
from satchel.memory.passages.neighbours import with_neighbours
from satchel.memory.passages.ranking import (
    NEIGHBOUR_WEIGHT,
    STRETCH_TOP,
    STRETCH_WEIGHT,
    lexemes_to_read,
)
from satchel.memory.passages.search import SearchLimits, search_passages, weigh
from satchel.memory.store.passage_rankings import (
    EF_SEARCH,
    WINDOW_TURNS,
    MessagePlace,
    ScanSettings,
    text_ranking,
    vector_ranking,
)
from satchel.memory.store.passage_scope import Coverage, Scope, coverage_and_lexemes
from satchel.memory.store.terms import count_terms, frequencies
from satchel.memory.store.vectors import packed

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


def test_a_preview_is_the_first_512_characters_and_says_where_it_stops(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    long = "Sailing past the lighthouse, é " * 30  # 930 characters, 960 bytes
    observe(beta, long)
    build(live_server.database_url, project_id(live_server.database_url, "beta"))
    answer = beta.post("/v1/passages/search", json={"question": "lighthouse sailing"})
    (passage,) = answer.json()["passages"]
    assert passage["preview"] == long[:512] and passage["preview_complete"] is False
    assert passage["preview_byte_end"] == len(long[:512].encode())
    assert passage["message_bytes"] == len(long.encode())
    recalled = beta.post(
        "/v1/recalls", json={"question": "lighthouse sailing", "data_subject_id": "ann"}
    ).json()
    assert [(p["quote"], p["complete"]) for p in recalled["passages"]] == [(long[:512], False)]


def test_candidates_zero_is_exact_and_a_candidate_count_is_approximate(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    observe(beta, "My sister moved to Lisbon for a job at a bank.")
    for other in OTHERS:
        observe(beta, other)
    build(live_server.database_url, project_id(live_server.database_url, "beta"))
    question = {"question": "Where did my sister move?", "limit": 3}
    exact = beta.post("/v1/passages/search", json=question).json()
    named = beta.post("/v1/passages/search", json={**question, "candidates": 0}).json()
    approximate = beta.post("/v1/passages/search", json={**question, "candidates": 40}).json()
    assert exact["approximate"] is False and named["approximate"] is False
    assert approximate["approximate"] is True
    assert exact["build_state"] == approximate["build_state"] == "ready"
    assert exact["passages"] == named["passages"]
    assert exact["passages"][0]["preview"].startswith("My sister")
    assert approximate["passages"][0]["preview"].startswith("My sister")


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


# ---- neighbours ----------------------------------------------------------------------------

LOG = [
    ("ann", ["first thing", "second thing"]),
    ("ben", ["ben alone"]),
    ("ann", ["third thing"]),
    (None, ["nobody one", "nobody two"]),
    ("ann", "artifact"),  # an observation of ann's with no messages
    ("ann", ["after the artifact", "and its reply", "and more"]),
    ("ben", ["ben again"]),
    # ann goes on past a stretch's reach: her first turns and her last are not one stretch
    *[("ann", [f"later thing {n}"]) for n in range(6)],
    ("ben", ["ben a third time"]),
    ("ann", ["the last thing", "its answer"]),
]


@pytest.fixture
def logged(live_server: LiveServer, beta: httpx.Client) -> list[tuple[str, str | None, int, int]]:
    """The log above, stored; every message as (id, subject, log offset, ordinal)."""
    for subject, said in LOG:
        if said == "artifact":
            body = {"id": str(uuid.uuid4()), "data_subject_id": subject, "kind": "state"}
            body["content"] = "AA=="
            assert beta.post("/v1/artifacts/put", json=body).status_code == 200
            continue
        turn: dict[str, Any] = {"messages": [{"role": "user", "content": text} for text in said]}
        if subject:
            turn["data_subject_id"] = subject
        assert beta.post("/v1/observations", json=turn).status_code == 201
    with psycopg.connect(live_server.database_url) as conn:
        rows = conn.execute(
            "SELECT m.id, o.data_subject_id, o.log_offset, m.ordinal FROM messages m"
            " JOIN observations o ON o.id = m.observation_id ORDER BY o.log_offset, m.ordinal"
        ).fetchall()
    return [(str(row[0]), row[1], row[2], row[3]) for row in rows]


def said_around(
    log: list[tuple[str, str | None, int, int]], url: str
) -> dict[str, tuple[str | None, str | None]]:
    """Each message's neighbours by the rule, from the whole log: the next message of its
    turn, or the last message of its subject's previous turn and the first of its next."""
    with psycopg.connect(url) as conn:
        turns = conn.execute(
            "SELECT data_subject_id, log_offset FROM observations ORDER BY log_offset"
        ).fetchall()
    around: dict[str, tuple[str | None, str | None]] = {}
    for chunk, subject, offset, ordinal in log:
        same = [m for m in log if m[2] == offset]
        before = next((m[0] for m in same if m[3] == ordinal - 1), None)
        after = next((m[0] for m in same if m[3] == ordinal + 1), None)
        if subject is not None:
            mine = [t[1] for t in turns if t[0] == subject]
            place = mine.index(offset)
            if before is None and place > 0:
                earlier = [m for m in log if m[2] == mine[place - 1]]
                before = earlier[-1][0] if earlier else None
            if after is None and place + 1 < len(mine):
                later = [m for m in log if m[2] == mine[place + 1]]
                after = later[0][0] if later else None
        around[chunk] = (before, after)
    return around


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_neighbours_share_their_scores_exactly_as_the_log_says(
    live_server: LiveServer, logged: list[tuple[str, str | None, int, int]], data: st.DataObject
) -> None:
    chosen = data.draw(st.sets(st.sampled_from([m[0] for m in logged]), min_size=1))
    scores = {uuid.UUID(chunk): data.draw(st.floats(0.01, 1.0)) for chunk in sorted(chosen)}
    around = said_around(logged, live_server.database_url)

    async def smoothed(read_whole: bool) -> dict[uuid.UUID, float]:
        """The shares, with the places read as a vector ranking reads its messages whole (each
        turn's neighbourhood beside them where a later turn of its subject is among them), or
        read bare (the neighbourhood then asked of the database by `with_neighbours`)."""
        async with await psycopg.AsyncConnection.connect(
            live_server.database_url, autocommit=True
        ) as conn:
            if read_whole:
                vector = packed(np.full(DIMENSIONS, DIMENSIONS**-0.5, dtype=np.float32))
                project = project_id(live_server.database_url, "beta")
                nearest = await vector_ranking(
                    conn, Scope(project), vector, 0, scans=ScanSettings(), also=list(scores)
                )
                assert not nearest.ranking and set(nearest.placed) == set(scores)
                await conn.close()  # what was read whole must be all the neighbours need
                return dict(await with_neighbours(conn, scores, nearest.placed))
            cursor = await conn.execute(
                "SELECT m.id, m.observation_id, m.ordinal, o.project_id, o.data_subject_id,"
                " o.log_offset, m.occurred_at"
                " FROM messages m JOIN observations o ON o.id = m.observation_id"
                " WHERE m.id = ANY(%s)",
                (list(scores),),
            )
            place_of = {row[0]: MessagePlace(*row) for row in await cursor.fetchall()}
            return dict(await with_neighbours(conn, scores, place_of))

    found = asyncio.run(smoothed(read_whole=False))
    assert asyncio.run(smoothed(read_whole=True)) == found
    turn_of = turn_numbers(live_server.database_url)
    for chunk, score in scores.items():
        before, after = around[str(chunk)]
        near = sum(scores.get(uuid.UUID(m), 0.0) for m in (before, after) if m is not None)
        subject, turn = turn_of[chunk]
        mates = sorted(
            (
                other
                for mate, other in scores.items()
                if turn_of[mate][0] == subject
                and abs(turn_of[mate][1] - turn) <= (WINDOW_TURNS if subject else 0)
            ),
            reverse=True,
        )
        stretch = sum(mates[:STRETCH_TOP]) / STRETCH_TOP
        want = score + NEIGHBOUR_WEIGHT * near + STRETCH_WEIGHT * stretch
        assert found[chunk] == pytest.approx(want), chunk


def turn_numbers(url: str) -> dict[uuid.UUID, tuple[Any, int]]:
    """Each message's data subject and its turn's place among all its subject's turns (a
    message with no subject: its own turn, as the subject, at 0)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT m.id, o.data_subject_id, o.id,"
            " dense_rank() OVER (PARTITION BY o.data_subject_id ORDER BY o.log_offset)"
            " FROM observations o LEFT JOIN messages m ON m.observation_id = o.id"
        ).fetchall()
    return {
        row[0]: (row[1], int(row[3])) if row[1] is not None else (row[2], 0)
        for row in rows
        if row[0] is not None
    }


def test_full_text_reads_a_lexeme_over_the_cap_only_when_no_vectors_rank(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    for n in range(4):
        observe(beta, f"We hiked the ridge again, walk number {n}.")
    observe(beta, "The ridge had fog; we saw an ibex.")
    url = live_server.database_url
    project = project_id(url, "beta")
    build(url, project)
    cap = 3
    scope = Scope(project, "ann", turns_only=True)

    async def ranked(question: str, vectored: bool) -> int:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            state, per_word = await coverage_and_lexemes(conn, project, question.split())
            counted = state.counted_through_offset
            terms = await weigh(conn, scope, question, per_word, counted, CommonWords())
            lexemes = lexemes_to_read(terms.weights, terms.matches, vectored, cap)
            return len(await text_ranking(conn, scope, terms, lexemes, 10))

    # "ridge" is in 5 messages, over the cap of 3; "ibex" in one.
    assert asyncio.run(ranked("ridge", vectored=False)) == 5
    assert asyncio.run(ranked("ridge", vectored=True)) == 0
    assert asyncio.run(ranked("ridge ibex", vectored=True)) == 1
    assert asyncio.run(ranked("ridge ibex", vectored=False)) == 1


def test_the_hits_read_beside_the_neighbours_are_the_hits_read_after_them(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    for n in range(6):
        observe(beta, f"Did you see the heron by the canal, day {n}?", subject=f"s{n % 2}")
        observe(beta, f"Yes, the heron stood on the lock gate on day {n}.", subject=f"s{n % 2}")
    url = live_server.database_url
    project = project_id(url, "beta")
    build(url, project)
    embedder = load_embedder(EmbeddingSettings())

    caches = SearchCaches()

    async def found(question: str, limits: SearchLimits) -> list[tuple[str, str, float]]:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            result = await search_passages(
                conn,
                Scope(project, turns_only=True),
                question,
                limit=3,
                embedder=embedder,
                caches=caches,
                limits=limits,
            )
        return [(str(hit.chunk_id), hit.content, hit.similarity) for hit in result.hits]

    questions = ["where did the heron stand", "canal day 4", "lock gate"]
    speculated = [asyncio.run(found(question, SearchLimits())) for question in questions]
    alone = SearchLimits(speculated=0)  # nothing read beside the neighbours
    assert [asyncio.run(found(question, alone)) for question in questions] == speculated
    assert all(len(hits) == 3 for hits in speculated)


def test_the_vector_scan_settings_are_sent_again_unless_they_were_committed(
    live_server: LiveServer, beta: httpx.Client
) -> None:
    observe(beta, "The heron stood on the lock gate.")
    url = live_server.database_url
    project = project_id(url, "beta")
    build(url, project)
    embedder = load_embedder(EmbeddingSettings())
    vector = packed(embedder.embed(["heron"])[0])
    scope = Scope(project, turns_only=True)
    scans = ScanSettings()

    async def shown(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cursor = await conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
        )
        row = await cursor.fetchone()
        assert row is not None
        return list(row)

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            async with conn.transaction(force_rollback=True):  # the settings are rolled back
                assert (
                    len((await vector_ranking(conn, scope, vector, 10, scans=scans)).ranking) == 1
                )
            assert await shown(conn) == ["40", "off"]
            assert len((await vector_ranking(conn, scope, vector, 10, scans=scans)).ranking) == 1
            assert await shown(conn) == ["40", "relaxed_order"]
            assert len((await vector_ranking(conn, scope, vector, 200, scans=scans)).ranking) == 1
            assert await shown(conn) == [str(EF_SEARCH), "relaxed_order"]
            async with conn.transaction(force_rollback=True):
                await conn.execute("SET hnsw.ef_search = 7")
                assert (
                    len((await vector_ranking(conn, scope, vector, 200, scans=scans)).ranking) == 1
                )
            assert await shown(conn) == [str(EF_SEARCH), "relaxed_order"]

    asyncio.run(run())


def test_coverage_of_a_project_that_does_not_exist_is_empty(live_server: LiveServer) -> None:
    async def run() -> tuple[Coverage, list[list[str]]]:
        async with await psycopg.AsyncConnection.connect(live_server.database_url) as conn:
            return await coverage_and_lexemes(conn, 2**40, ["Herons", "the", "stood"])

    state, per_word = asyncio.run(run())
    assert state == Coverage("", "", -1, -1, -1)
    assert per_word == [["heron"], [], ["stood"]]
