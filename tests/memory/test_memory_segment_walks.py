"""When the worker walks a project's segments: not in the middle of a backlog of turns to form
(the walk after it would read the same turns again), unless the backlog has made it wait too
many passes; the segments written in the end are the same."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
import pytest
from formation_kit import rows
from memory_kit import LiveServer

from satchel.memory.config import MemorySettings
from satchel.memory.formation import worker as worker_module
from satchel.memory.formation.worker import Worker
from satchel.memory.passages.embedder import EmbedderUnavailable, Vectors

A_PASS = 4 * 4  # turns a pass forms with no model: four batches of `formation_batch` 4


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False, formation_batch=4)


class Unembedding:
    """An embedder that cannot run: the passes leave the passages unindexed."""

    identity = "test/unavailable"

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise EmbedderUnavailable("no embedder in this test")


def observe(live_server: LiveServer, count: int) -> None:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        for n in range(count):
            body = {
                "data_subject_id": "ana",
                "messages": [{"role": "user", "content": f"Ana's note number {n}."}],
            }
            assert client.post("/v1/observations", json=body).status_code == 201


def passes(url: str, settings: MemorySettings) -> list[tuple[int, int]]:
    """Worker passes until one does nothing: each pass's turns formed and segments written."""

    async def run() -> list[tuple[int, int]]:
        worker = Worker(url, settings, embedder=Unembedding())
        done = []
        try:
            while (tally := await worker.run_once()).work:
                done.append((tally.formed, tally.segments))
        finally:
            await worker.close()
        return done

    return asyncio.run(run())


def level_one(url: str) -> list[tuple[int, int]]:
    return [
        (row[0], row[1])
        for row in rows(
            url, "SELECT from_offset, to_offset FROM segments WHERE level = 1 ORDER BY from_offset"
        )
    ]


def test_segments_wait_for_the_backlog_to_drain(
    live_server: LiveServer, memory_settings: MemorySettings
) -> None:
    observe(live_server, 3 * A_PASS)
    url = live_server.database_url
    # The first pass leaves two passes' turns to form: no walk. The second leaves one: it walks
    # the 32 formed turns (all but the newest eight under segments of eight), the third the rest.
    assert passes(url, memory_settings) == [(16, 0), (16, 3), (16, 2)]
    assert level_one(url) == [(n, n + 7) for n in range(0, 40, 8)]


def test_a_long_backlog_still_gets_its_segments_every_so_many_passes(
    live_server: LiveServer, memory_settings: MemorySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "WALK_WAITS", 2)
    observe(live_server, 5 * A_PASS)
    url = live_server.database_url
    # Two passes wait; the third walks though turns still wait, and the walk waits no more
    # while the backlog is a pass's or less (the last pass also rolls eight segments up).
    assert passes(url, memory_settings) == [(16, 0), (16, 0), (16, 5), (16, 2), (16, 3)]
    assert level_one(url) == [(n, n + 7) for n in range(0, 72, 8)]
