"""An upgrade that changes the embedding: the worker embeds every message again in the
background, and passage search answers throughout, by full text where a message has no vector
of the new model yet."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from memory_kit import Letters, LiveServer

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Worker
from satchel.memory.passages.embedder import EmbeddingSettings, Vectors, load_embedder

TURNS = 300  # more messages than one batch of the worker's
FIRST = "My sister Orla keeps bees on the roof of her flat in Galway."
LAST = "The ferry to the Aran islands was cancelled because of the storm."
WAIT = 60.0


class Gated:
    """The deployment's embedder after the upgrade, holding its second batch until released."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.identity: str = model.identity
        self.calls = 0
        self.held = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        if self.calls == 2:
            self.held.set()
            assert self.release.wait(WAIT), "the test never released the embedder"
        vectors: Vectors = self.model.embed(texts)
        return vectors


def work_through(url: str, embedder: Any) -> None:
    """Worker passes with `embedder` until one finds nothing to do."""

    async def run() -> None:
        worker = Worker(url, MemorySettings(), embedder=embedder)
        try:
            while (await worker.run_once()).work:
                pass
        finally:
            await worker.close()

    asyncio.run(run())


def search(client: httpx.Client, question: str) -> dict[str, Any]:
    answer = client.post(
        "/v1/passages/search", json={"question": question, "data_subject_id": "ana", "limit": 3}
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def quotes(page: dict[str, Any]) -> list[str]:
    return [passage["preview"] for passage in page["passages"]]


@pytest.fixture
def ana(live_server: LiveServer) -> Any:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        said = [FIRST, *(f"Note {n}: nothing much happened today." for n in range(TURNS)), LAST]
        for text in said:
            body = {"data_subject_id": "ana", "messages": [{"role": "user", "content": text}]}
            assert client.post("/v1/observations", json=body).status_code == 201
        yield client


def test_a_new_embedder_reembeds_in_the_background_while_search_answers(
    live_server: LiveServer, ana: httpx.Client
) -> None:
    url = live_server.database_url
    work_through(url, Letters())  # vectors of the model before the upgrade
    before = search(ana, "Who keeps bees?")
    assert before["build_state"] == "building" and before["generation_id"] == ""
    assert quotes(before)[0] == FIRST  # another model's vectors are not compared: full text

    upgraded = Gated(load_embedder(EmbeddingSettings()))
    worker = threading.Thread(target=work_through, args=(url, upgraded))
    worker.start()
    try:
        assert upgraded.held.wait(WAIT)
        # The first batch is stored while the second is embedded: search answers meanwhile,
        # by vectors where the new model's are stored, by full text where they are not yet.
        deadline = time.monotonic() + WAIT
        while (during := search(ana, "Who keeps bees?"))["covered_through_offset"] < 0:
            assert time.monotonic() < deadline, during
            time.sleep(0.1)
        assert during["build_state"] == "building" and during["generation_id"]
        assert during["covered_through_offset"] < during["through_offset"]
        assert quotes(during)[0] == FIRST
        assert during["passages"][0]["similarity"] > 0.3  # a cosine of the new model's
        late = search(ana, "Why was the ferry cancelled?")
        assert quotes(late)[0] == LAST  # not embedded yet: found by its words
        assert late["passages"][0]["similarity"] <= 1.0
    finally:
        upgraded.release.set()
        worker.join(WAIT)
    after = search(ana, "Why was the ferry cancelled?")
    assert after["build_state"] == "ready"
    assert after["covered_through_offset"] == after["through_offset"]
    assert after["generation_id"] == during["generation_id"]
    assert quotes(after)[0] == LAST
    assert quotes(search(ana, "What insects does her sibling look after?"))[0] == FIRST
