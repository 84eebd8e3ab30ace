"""How a worker pass spends its time: the model embeds passages while the turns are formed, and
turns no model reads are formed a batch at a time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import httpx
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
