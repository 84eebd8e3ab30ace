"""The worker racing an erasure: work read before the erasure and written after it skips what
was erased, with no warning, and nothing erased comes back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import httpx
import numpy as np
import pytest
from formation_kit import observe, rows
from memory_kit import LiveServer

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Tally, Worker
from satchel.memory.passages.embedder import DIMENSIONS, Vectors


class ErasingMidway:
    """An embedder that runs `erase` once, on its first call, before answering: the worker has
    read the messages it embeds, and writes their vectors after the erasure has committed."""

    identity = "test/erasing-midway"

    def __init__(self, erase: Callable[[], None]) -> None:
        self.erase: Callable[[], None] | None = erase
        self.given: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.erase is not None:
            erase, self.erase = self.erase, None
            erase()
        self.given.extend(texts)
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def one_pass(url: str, embedder: ErasingMidway) -> Tally:
    async def run() -> Tally:
        worker = Worker(url, MemorySettings(form_on_store=False), embedder=embedder)
        try:
            return await worker.run_once()
        finally:
            await worker.close()

    return asyncio.run(run())


def test_vectors_of_messages_erased_while_embedding_are_skipped(
    live_server: LiveServer, http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    url = live_server.database_url
    observe(http, "ann", ("user", "Ann keeps bees on the roof."))
    observe(http, "ben", ("user", "Ben repairs clocks on Saturdays."))
    observe(http, "ann", ("user", "Ann sells the honey at the market."))

    def erase_ben() -> None:
        answer = http.post("/v1/erasures", json={"data_subject_id": "ben"})
        assert answer.status_code == 200, answer.text

    embedder = ErasingMidway(erase_ben)
    with caplog.at_level(logging.WARNING, logger="satchel.memory"):
        tally = one_pass(url, embedder)
    assert any("Ben" in text for text in embedder.given)  # read before the erasure
    assert tally.passages == 3  # the whole batch is passed, the erased message skipped
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert rows(url, "SELECT count(*) FROM messages WHERE data_subject_id = 'ben'") == [(0,)]
    assert rows(url, "SELECT data_subject_id FROM message_vectors ORDER BY 1") == [
        ("ann",),
        ("ann",),
    ]
    stored, vectors_through = rows(
        url,
        "SELECT p.stored, g.vectors_through FROM projects p JOIN passage_progress g"
        " ON g.project_id = p.id",
    )[0]
    assert vectors_through == stored == 2
    again = one_pass(url, ErasingMidway(lambda: None))
    assert again.passages == 0
    assert rows(url, "SELECT count(*) FROM message_vectors WHERE data_subject_id = 'ben'") == [(0,)]
