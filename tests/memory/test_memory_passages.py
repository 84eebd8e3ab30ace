"""Passage search over HTTP: full text at once, vectors once indexed, fused; recall's passages."""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import psycopg
import pytest
import taisce
from memory_kit import Letters, LiveServer

from satchel.memory.passages.caches import CommonWords, SearchCaches
from satchel.memory.passages.embedder import EmbeddingSettings, Vectors, load_embedder
from satchel.memory.passages.index import index_passages
from satchel.memory.passages.search import question_terms, search_passages
from satchel.memory.store.passage_scope import Scope

ANA = [
    "I adopted a golden retriever puppy last weekend, she is called Biscuit.",
    "My sister moved to Lisbon for a job at a bank.",
    "The quarterly budget review is on Thursday afternoon.",
    "I have been learning to play the cello since January.",
]
BEN = ["Ben here: my dog chewed the sofa again."]


@pytest.fixture(scope="module")
def minilm() -> Any:
    return load_embedder(EmbeddingSettings())


@pytest.fixture
def alpha(live_server: LiveServer) -> Iterator[httpx.Client]:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        for subject, texts in (("ana", ANA), ("ben", BEN)):
            for text in texts:
                body = {"data_subject_id": subject, "messages": [{"role": "user", "content": text}]}
                assert client.post("/v1/observations", json=body).status_code == 201
        client.post(
            "/v1/observations",
            json={
                "data_subject_id": "ana",
                "messages": [
                    {"role": "user", "content": "Any tips for the puppy?"},
                    {"role": "assistant", "content": "Reward calm behaviour with treats."},
                ],
            },
        )
        yield client


def project_id(url: str, name: str = "alpha") -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT id FROM projects WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def index(url: str, embedder: Any, limit: int = 256) -> list[int]:
    """Run `index_passages` until it has nothing left; how many each pass embedded."""

    async def run() -> list[int]:
        passes = []
        async with await psycopg.AsyncConnection.connect(url) as conn:
            while True:
                done = await index_passages(conn, project_id(url), embedder, limit)
                await conn.commit()
                if not done:
                    return passes
                passes.append(done)

    return asyncio.run(run())


def search(client: httpx.Client, question: str, **controls: Any) -> dict[str, Any]:
    answer = client.post("/v1/passages/search", json={"question": question, **controls})
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    return page


def previews(page: dict[str, Any]) -> list[str]:
    return [passage["preview"] for passage in page["passages"]]


def test_full_text_answers_before_any_vector_exists(alpha: httpx.Client) -> None:
    page = search(alpha, "Where does the sister live? Lisbon?", data_subject_id="ana")
    assert previews(page)[0] == ANA[1]
    # the exact search (candidates 0) over no vectors yet: a build in progress
    assert page["approximate"] is False and page["build_state"] == "building"
    assert (page["generation_id"], page["covered_through_offset"]) == ("", -1)
    assert page["through_offset"] == 5
    # a message without a vector yet is not embedded on the request path: its similarity is
    # its share of the question's term weight, and the other messages hold less of it
    shares = [passage["similarity"] for passage in page["passages"]]
    assert shares[0] == 1.0 and all(0.0 <= share < 1.0 for share in shares[1:])
    assert search(alpha, "zebra crossing")["passages"] == []


def test_indexed_vectors_find_meaning_without_shared_words(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    assert index(live_server.database_url, minilm, limit=4) == [4, 3]
    page = search(alpha, "What kind of pet animal do they own?", data_subject_id="ana", limit=3)
    # No word is shared; both puppy messages lead (the two-message turn carries its reply too),
    # and the adoption is the closest in meaning.
    assert set(previews(page)[:2]) == {ANA[0], "Any tips for the puppy?"}
    assert page["build_state"] == "ready" and page["approximate"] is False
    assert page["covered_through_offset"] == page["through_offset"] == 5
    assert page["generation_id"]
    first = max(page["passages"], key=lambda passage: passage["similarity"])
    assert first["role"] == "user" and first["ordinal"] == 0
    assert first["preview_complete"] is True
    assert first["message_bytes"] == first["preview_byte_end"] == len(ANA[0].encode())
    assert first["content_digest"] == hashlib.sha256(ANA[0].encode()).hexdigest()
    # similarity is the cosine similarity of the question (as embedded) and the message
    asked = minilm.embed(["What kind of pet animal do they own?"])[0]
    for passage in page["passages"]:
        told = minilm.embed([passage["preview"]])[0]
        assert passage["similarity"] == pytest.approx(float(asked @ told), abs=0.15)
    assert 0.3 < first["similarity"] < 1.0
    music = search(alpha, "which musical instrument is being practised", data_subject_id="ana")
    assert previews(music)[0] == ANA[3]


def test_new_turns_are_searchable_by_text_while_vectors_catch_up(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    index(live_server.database_url, minilm)
    body = {"data_subject_id": "ana", "messages": [{"role": "user", "content": "Kayak trip!"}]}
    assert alpha.post("/v1/observations", json=body).status_code == 201
    page = search(alpha, "kayak", data_subject_id="ana")
    assert previews(page)[0] == "Kayak trip!"
    assert page["build_state"] == "building" and page["approximate"] is False
    assert (page["covered_through_offset"], page["through_offset"]) == (5, 6)
    # not embedded yet: the whole of the question's term weight, until the worker's cosine
    assert page["passages"][0]["similarity"] == 1.0
    assert index(live_server.database_url, minilm) == [1]
    page = search(alpha, "kayak", data_subject_id="ana")
    assert page["build_state"] == "ready"
    kayak = minilm.embed(["kayak"])[0] @ minilm.embed(["Kayak trip!"])[0]
    assert page["passages"][0]["similarity"] == pytest.approx(float(kayak), abs=0.05)


def test_subject_role_and_project_narrow_the_search(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    index(live_server.database_url, minilm)
    assert set(previews(search(alpha, "dog", data_subject_id="ben"))) == set(BEN)
    assert BEN[0] in previews(search(alpha, "dog"))
    assistant = search(alpha, "puppy treats", source_role="assistant", data_subject_id="ana")
    assert previews(assistant) == ["Reward calm behaviour with treats."]
    assert len(search(alpha, "puppy dog bank cello", limit=2)["passages"]) == 2
    other = live_server.token("beta")
    headers = {"Authorization": f"Bearer {other}"}
    answer = httpx.post(
        f"{live_server.base_url}/v1/passages/search", json={"question": "dog"}, headers=headers
    )
    assert answer.status_code == 200 and answer.json()["passages"] == []


def test_another_embedder_starts_a_new_generation(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    url = live_server.database_url
    index(url, Letters())
    stale = search(alpha, "What kind of pet animal do they own?", data_subject_id="ana")
    assert stale["build_state"] == "building"
    assert stale["generation_id"] == "" and stale["covered_through_offset"] == -1
    assert index(url, minilm) == [7]
    fresh = search(alpha, "What kind of pet animal do they own?", data_subject_id="ana")
    assert fresh["build_state"] == "ready"
    assert set(previews(fresh)[:2]) == {ANA[0], "Any tips for the puppy?"}


def test_without_a_model_search_is_unavailable_and_recall_degrades(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index(live_server.database_url, minilm)
    monkeypatch.setenv("SATCHEL_EMBEDDINGS_BASE_URL", "https://refused.example.com/v1")
    monkeypatch.setenv("SATCHEL_EMBEDDINGS_MODEL", "m")

    async def ask() -> None:
        async with taisce.Client(live_server.base_url, live_server.token("alpha")) as client:
            await client.search_passages(question="Lisbon bank", data_subject_id="ana")

    with pytest.raises(taisce.TaisceError) as refused:
        asyncio.run(ask())
    assert (refused.value.status, refused.value.code) == (503, "passage_unavailable")
    named = alpha.post(
        "/v1/recalls", json={"question": "Lisbon bank", "surfaces": ["passages"]}
    ).json()
    assert named["degraded"] == ["passages"]
    assert [p["quote"] for p in named["passages"]] == [ANA[1]]


def test_recall_charges_passages_against_the_budget(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    index(live_server.database_url, minilm)
    bundle = alpha.post(
        "/v1/recalls",
        json={"question": "Tell me about the puppy", "data_subject_id": "ana"},
    ).json()
    quotes = [p["quote"] for p in bundle["passages"]]
    assert quotes[0] in (ANA[0], "Any tips for the puppy?")
    assert "Reward calm behaviour with treats." not in quotes  # source_roles default to user
    assert len(quotes) <= 8 and bundle["degraded"] == ["facts_not_formed"]
    assert bundle["characters"] == sum(len(q) + len("user") for q in quotes)
    first = bundle["passages"][0]
    assert set(first) == {
        "chunk_id",
        "source_id",
        "ordinal",
        "role",
        "quote",
        "similarity",
        "occurred_at",
        "complete",
    }
    tight = alpha.post(
        "/v1/recalls",
        json={"question": "Tell me about the puppy", "max_characters": len(quotes[0]) + 4},
    ).json()
    assert len(tight["passages"]) == 1 and tight["truncated"] is True


def test_erased_messages_leave_the_index(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    index(live_server.database_url, minilm)
    assert BEN[0] in previews(search(alpha, "dog sofa"))
    assert alpha.post("/v1/erasures", json={"data_subject_id": "ben"}).status_code == 200
    page = search(alpha, "dog sofa")
    assert BEN[0] not in previews(page)
    assert page["build_state"] == "ready"


def observe_said(client: httpx.Client, subject: str, said: list[tuple[str, str]]) -> None:
    """Store one single-message turn per `(occurred_at, text)` for `subject`."""
    for when, text in said:
        body = {
            "data_subject_id": subject,
            "occurred_at": when,
            "messages": [{"role": "user", "content": text}],
        }
        assert client.post("/v1/observations", json=body).status_code == 201


def test_a_turn_ranks_with_the_stretch_it_was_said_in(alpha: httpx.Client) -> None:
    """Of two identical turns, the one among more turns about the question ranks first, though
    the other has one right beside it: the stretch is counted in the subject's own turns, with
    no dates given and another subject's turns stored in between."""
    twin = "We talked about the garden."
    said = [
        "Garden soil is dry after the heat.",
        "The garden needs water every evening.",
        "Roses in the garden bloomed early.",
        "The train was late again.",
        twin,  # three turns about the garden within two to four turns of it
        "The bus was late again.",
        *(f"Lunch number {n} was soup." for n in range(7)),
        "The garden gate is broken.",
        twin,  # one right before it
        "The taxi was late again.",
    ]
    twins = []
    for text in said:
        for subject, content in (("cara", text), ("dan", "Nothing to report from the garden.")):
            body = {"data_subject_id": subject, "messages": [{"role": "user", "content": content}]}
            answer = alpha.post("/v1/observations", json=body)
            assert answer.status_code == 201
            if subject == "cara" and content == twin:
                twins.append(answer.json()["id"])
    page = search(alpha, "garden", data_subject_id="cara")
    found = [hit["source_id"] for hit in page["passages"] if hit["preview"] == twin]
    assert found == twins  # the first one first


def test_a_day_the_question_names_draws_in_what_was_said_around_it(alpha: httpx.Client) -> None:
    """Of two identical messages the one said on the named day ranks first, and a message
    sharing no word with the question is found because it was said that day."""
    observe_said(
        alpha,
        "dora",
        [
            ("2026-03-01T10:00:00Z", "We went hiking in the hills."),
            ("2026-03-08T10:00:00Z", "We went hiking in the hills."),
            ("2026-03-08T10:05:00Z", "Then a picnic by the lake."),
            ("2026-05-20T10:00:00Z", "A quiet day at home."),
        ],
    )
    page = search(alpha, "Where did we go hiking on 8 March, 2026?", data_subject_id="dora")
    found = [(p["preview"], p["occurred_at"][:10]) for p in page["passages"]]
    assert found[0] == ("We went hiking in the hills.", "2026-03-08")
    assert ("Then a picnic by the lake.", "2026-03-08") in found
    assert ("A quiet day at home.", "2026-05-20") not in found


def test_words_common_to_the_scope_are_left_out_of_the_embedded_question(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    said = [("2026-04-01T10:00:00Z", f"Evan: note {n} about the week.") for n in range(8)]
    said.append(("2026-04-01T11:00:00Z", "Sam: the kayak trip was cancelled."))
    observe_said(alpha, "evan", said)

    async def terms() -> Any:
        async with await psycopg.AsyncConnection.connect(live_server.database_url) as conn:
            scope = Scope(project_id(live_server.database_url), "evan")
            question = "Did Evan cancel the kayak trip?"
            return await question_terms(conn, scope, question, -1, CommonWords())

    found = asyncio.run(terms())
    assert found.focused == "Did cancel the kayak trip?"
    assert {lexeme for lexeme, _ in found.weights} >= {"'evan'", "'kayak'", "'trip'"}


def test_lexeme_counts_stay_with_their_lexemes_under_parallel_plans(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    """Each lexeme's IDF comes from its own count whatever plan the database picks (a regression:
    counts read from a UNION ALL came back in the order parallel workers finished)."""
    said = [("2026-04-02T10:00:00Z", f"Fay: the garden needs work, day {n}.") for n in range(30)]
    said += [("2026-04-03T10:00:00Z", "Fay: the violin lesson moved to Monday.")]
    observe_said(alpha, "fay", said)

    async def terms() -> Any:
        async with await psycopg.AsyncConnection.connect(live_server.database_url) as conn:
            for setting in (
                "SET debug_parallel_query = on",
                "SET parallel_setup_cost = 0",
                "SET parallel_tuple_cost = 0",
                "SET min_parallel_table_scan_size = 0",
            ):
                await conn.execute(setting)
            scope = Scope(project_id(live_server.database_url), "fay")
            question = "When is the violin lesson in the garden?"
            return await question_terms(conn, scope, question, -1, CommonWords())

    weights = dict(asyncio.run(terms()).weights)
    assert weights["'violin'"] > weights["'lesson'"] * 0.99 > weights["'garden'"] * 5
    assert weights["'violin'"] == pytest.approx(math.log(1 + (31 - 1 + 0.5) / 1.5))


REPLY = "Noted, I will keep that in mind."
TOLD = [
    f"Remember for me that {who} {doing} {where}."
    for who in ("my brother", "my aunt", "our neighbour", "a colleague")
    for doing in ("moved to", "bought a flat in", "ran a marathon in", "studies music in")
    for where in ("Lisbon", "Oslo")
]


async def walked(url: str, scope: Scope, question: str, embedder: Any) -> list[str]:
    """The approximate search's messages, planned as over a large index: a table this small
    would be scanned whole, and the graphs never walked."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            await conn.execute(f"SET {setting} = off")
        found = await search_passages(
            conn,
            scope,
            question,
            limit=10,
            candidates=200,
            embedder=embedder,
            caches=SearchCaches(),
        )
    return [hit.content for hit in found.hits]


def test_replies_said_word_for_word_do_not_hide_what_users_said(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    # An assistant that answers alike again and again leaves equal vectors, which HNSW links
    # only to one another. Nearest the question, they once swallowed a search for users' words
    # whole: the walk met nothing else, and roles were filtered after it.
    for told in TOLD:
        messages = [{"role": "user", "content": told}]
        messages += [{"role": "assistant", "content": REPLY}] * 63
        body = {"data_subject_id": "cal", "messages": messages}
        assert alpha.post("/v1/observations", json=body).status_code == 201
    url = live_server.database_url
    index(url, minilm, limit=1024)
    question = "Will you keep this in mind for me?"
    exact = search(alpha, question, data_subject_id="cal", source_role="user", limit=10)
    assert len(exact["passages"]) == 10 and set(previews(exact)) <= set(TOLD)
    scope = Scope(project_id(url), "cal", ("user",))
    assert asyncio.run(walked(url, scope, question, minilm)) == previews(exact)
    # replies are found where they are asked for
    scope = Scope(project_id(url), "cal", ("assistant",))
    assert asyncio.run(walked(url, scope, question, minilm))[0] == REPLY


class Counted(Letters):
    """Letters, keeping every text it was given."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.given.extend(texts)
        return super().embed(texts)


def test_a_text_said_again_is_embedded_once_a_pass(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    for told in TOLD[:4]:
        body = {
            "data_subject_id": "cal",
            "messages": [
                {"role": "user", "content": told},
                {"role": "assistant", "content": REPLY},
            ],
        }
        assert alpha.post("/v1/observations", json=body).status_code == 201
    url = live_server.database_url
    counted = Counted()
    assert sum(index(url, counted)) == 7 + 8  # alpha's seven messages, then these eight
    assert counted.given.count(REPLY) == 1 and sorted(set(counted.given)) == sorted(counted.given)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT v.embedding::text) FROM message_vectors v"
            " JOIN messages m ON m.id = v.message_id WHERE m.content = %s",
            (REPLY,),
        ).fetchone()
    assert rows == (4, 1)


def test_a_spare_connection_ranks_by_vector_beside_full_text_alike(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    for told in TOLD:
        turn = [{"role": "user", "content": told}, {"role": "assistant", "content": REPLY}]
        assert alpha.post("/v1/observations", json={"messages": turn}).status_code == 201
    url = live_server.database_url
    index(url, minilm)
    scope = Scope(project_id(url))

    async def found(question: str, candidates: int, beside: bool) -> list[tuple[str, float]]:
        async with (
            await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
            await psycopg.AsyncConnection.connect(url, autocommit=True) as spare,
        ):
            page = await search_passages(
                conn,
                scope,
                question,
                limit=10,
                candidates=candidates,
                exact=candidates == 0,
                embedder=minilm,
                caches=SearchCaches(),
                spare=spare if beside else None,
            )
        return [(hit.content, round(hit.similarity, 6)) for hit in page.hits]

    for question in ("Who moved to Lisbon?", "a marathon in Oslo", "music"):
        for candidates in (0, 65, 200):  # exact, and past what is read whole
            alone = asyncio.run(found(question, candidates, beside=False))
            assert len(alone) == 10
            assert asyncio.run(found(question, candidates, beside=True)) == alone


def test_a_failing_spare_connection_fails_the_search_and_frees_the_other(
    live_server: LiveServer, alpha: httpx.Client, minilm: Any
) -> None:
    for told in TOLD[:4]:
        body = {"messages": [{"role": "user", "content": told}]}
        assert alpha.post("/v1/observations", json=body).status_code == 201
    url = live_server.database_url
    index(url, minilm)

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            spare = await psycopg.AsyncConnection.connect(url, autocommit=True)
            await spare.close()
            with pytest.raises(psycopg.OperationalError):
                await search_passages(
                    conn,
                    Scope(project_id(url)),
                    "Lisbon",
                    limit=3,
                    candidates=100,
                    embedder=minilm,
                    caches=SearchCaches(),
                    spare=spare,
                )
            cursor = await conn.execute("SELECT 1")  # nothing of the search is left running
            assert await cursor.fetchone() == (1,)

    asyncio.run(run())
