"""How a worker pass spends its time: the model embeds passages while the turns are formed, and
turns no model reads are formed a batch at a time."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import psycopg
import pytest
from formation_kit import observe, rows, with_model
from memory_kit import Letters, LiveServer
from model_server import ModelServer, Reply

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Tally, Worker
from satchel.memory.passages.embedder import Vectors

ANN = "person-ann"
WAIT = 10.0  # seconds the model waits to see the embedder at work


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


class Watched(Letters):
    """Letters that says when it was first asked to embed."""

    def __init__(self) -> None:
        self.embedding = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.embedding.set()
        return super().embed(texts)


def one_pass(url: str, settings: MemorySettings, embedder: Letters) -> Tally:
    async def run() -> Tally:
        worker = Worker(url, settings, embedder=embedder)
        try:
            return await worker.run_once()
        finally:
            await worker.close()

    return asyncio.run(run())


def test_the_passages_are_embedded_while_the_model_forms_the_turns(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(http, ANN, ("user", "I live in Cork."), ("assistant", "Noted."))
    watched = Watched()
    seen: list[bool] = []

    def extractor(body: dict[str, Any]) -> Reply:
        seen.append(watched.embedding.wait(WAIT))
        return {"claims": []}

    model.respond = extractor
    settings = with_model(MemorySettings(form_on_store=False), model)
    tally = one_pass(live_server.database_url, settings, watched)
    assert seen == [True]  # the embedder ran while the model was still answering
    assert (tally.formed, tally.passages) == (1, 2)


def test_without_a_model_a_pass_forms_four_batches_in_one_transaction(
    live_server: LiveServer, http: httpx.Client
) -> None:
    for n in range(9):
        observe(http, ANN, ("user", f"Turn {n}: I live in Cork."))
    settings = MemorySettings(form_on_store=False, formation_batch=2)
    first = one_pass(live_server.database_url, settings, Letters())
    assert first.formed == 8
    formed = rows(
        live_server.database_url,
        "SELECT log_offset, formed_at FROM observations WHERE formed_at IS NOT NULL"
        " ORDER BY log_offset",
    )
    assert [offset for offset, _ in formed] == list(range(8))
    assert len({at for _, at in formed}) == 1  # one transaction, one time
    assert one_pass(live_server.database_url, settings, Letters()).formed == 1
    assert http.get("/v1/freshness").json()["formed"] == 8


SLOW_STORE = """
CREATE FUNCTION slow_store() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_sleep(%s); RETURN NULL; END $$;
CREATE TRIGGER slow_store AFTER UPDATE ON passage_progress FOR EACH ROW
WHEN (OLD.vectors_through IS DISTINCT FROM NEW.vectors_through) EXECUTE FUNCTION slow_store();
"""
SLOW = 1.0  # seconds each store of vectors takes before it commits
TURNS = 150  # two messages each: a batch of 256 messages and a second one


class Overlapping(Letters):
    """Letters that notes, as it is asked to embed, how far the stored vectors reach."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.reached: list[int] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.reached.append(rows(self.url, "SELECT vectors_through FROM passage_progress")[0][0])
        return super().embed(texts)


def worker_passes(
    url: str, embedder: Letters, count: int, between: Callable[[int], None] = lambda _: None
) -> list[Tally]:
    """`count` passes of one worker, `between(n)` called after pass n."""

    async def run() -> list[Tally]:
        worker = Worker(url, MemorySettings(form_on_store=False), embedder=embedder)
        tallies = []
        try:
            for n in range(count):
                tallies.append(await worker.run_once())
                between(n)
            return tallies
        finally:
            await worker.close()

    return asyncio.run(run())


def observe_turns(http: httpx.Client) -> None:
    """`TURNS` turns of three people, two messages each."""
    for n in range(TURNS):
        observe(
            http, f"person-{n % 3}", ("user", f"Turn {n}: I live in Cork."), ("assistant", "Ok")
        )


def test_the_next_batch_is_embedded_while_the_last_one_is_stored(
    live_server: LiveServer, http: httpx.Client
) -> None:
    url = live_server.database_url
    observe_turns(http)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SLOW_STORE % SLOW)
    watched = Overlapping(url)
    first, second = worker_passes(url, watched, 2)
    assert (first.passages, first.embedding) == (0, 256)  # handed on, not stored
    assert second.passages == 2 * TURNS
    # The second batch was embedded while the first one's store was still under way.
    assert watched.reached == [-1, -1]
    assert rows(url, "SELECT count(*) FROM message_vectors") == [(2 * TURNS,)]
    vectors = rows(
        url,
        "SELECT m.content, v.embedding::text FROM message_vectors v"
        " JOIN messages m ON m.id = v.message_id ORDER BY m.content LIMIT 5",
    )
    for content, embedding in vectors:  # what the model gives for each text alone
        alone = Letters().embed([content])[0]
        assert json.loads(embedding) == pytest.approx(alone.tolist(), abs=1e-6)


def test_a_message_erased_while_its_batch_is_handed_on_gets_no_vector(
    live_server: LiveServer, http: httpx.Client
) -> None:
    url = live_server.database_url
    observe_turns(http)

    def erase(n: int) -> None:
        if n == 0:
            answer = http.post("/v1/erasures", json={"data_subject_id": "person-1"})
            assert answer.status_code == 200, answer.text

    first = worker_passes(url, Letters(), 2, erase)[0]
    assert first.embedding == 256
    subjects = rows(url, "SELECT DISTINCT data_subject_id FROM message_vectors ORDER BY 1")
    assert subjects == [("person-0",), ("person-2",)]
    assert rows(url, "SELECT count(*) FROM message_vectors") == [(200,)]
    assert rows(url, "SELECT vectors_through FROM passage_progress") == [(TURNS - 1,)]
