"""Summary segments: level 1 over runs of formed turns, roll-ups, erasure gaps, summarizers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import psycopg
import pytest
from formation_kit import rows
from memory_kit import LiveServer
from model_server import Failure, ModelServer

from satchel.memory.config import MemorySettings, ModelClientSettings
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.formation.segments import (
    SUMMARY_TOKENS,
    ModelSummarizer,
    Summarizer,
    extract,
    extractive_summary,
    write_segments,
)
from satchel.memory.formation.worker import Worker
from satchel.memory.passages.embedder import EmbedderUnavailable, Vectors

Turn = dict[str, Any]  # an observation receipt: id, log_offset


def said(subject: str, index: int) -> str:
    return f"{subject} turn {index}: the {subject} garden needs tomatoes watered at dawn."


def observe(client: httpx.Client, subject: str, count: int, start: int = 0) -> list[Turn]:
    """`count` formed turns of `subject` (a user line and an assistant line each)."""
    receipts = []
    for index in range(start, start + count):
        answer = client.post(
            "/v1/observations",
            json={
                "data_subject_id": subject,
                "messages": [
                    {"role": "user", "content": said(subject, index)},
                    {"role": "assistant", "content": f"Noted {index}."},
                ],
            },
        )
        assert answer.status_code == 201, answer.text
        receipts.append(answer.json())
    return receipts


def context(client: httpx.Client, subject: str) -> dict[str, Any]:
    answer = client.post("/v1/contexts", json={"data_subject_id": subject})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def write(url: str, summarize: Summarizer = extractive_summary) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT id FROM projects WHERE name = 'alpha'")
        row = await cursor.fetchone()
        assert row is not None
        return await write_segments(conn, row[0], summarize)


def stored(url: str, subject: str) -> list[tuple[Any, ...]]:
    """The subject's segments: level, offsets, turns covered, summary and sorted source ids."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.level, s.from_offset, s.to_offset, s.covered, s.summary,"
            " array(SELECT g.observation_id::text FROM segment_sources g"
            "  WHERE g.segment_id = s.id ORDER BY 1)"
            " FROM segments s WHERE s.data_subject_id = %s ORDER BY s.level, s.from_offset",
            (subject,),
        ).fetchall()
    return [tuple(row) for row in rows]


def ids(turns: list[Turn]) -> list[str]:
    return sorted(turn["id"] for turn in turns)


def offsets(turns: list[Turn]) -> list[int]:
    return [turn["log_offset"] for turn in turns]


def test_level_one_covers_runs_of_eight_outside_the_newest_eight(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana: list[Turn] = []
    ben: list[Turn] = []
    for round_ in range(9):  # interleaved, so a subject's offsets are not contiguous
        ana += observe(alpha, "ana", 3, start=3 * round_)
        ben += observe(alpha, "ben", 1, start=round_) if round_ < 5 else []
    url = live_server.database_url

    assert asyncio.run(write(url)) == 2
    assert asyncio.run(write(url)) == 0  # idempotent

    segments = stored(url, "ana")
    assert [(level, low, high, covered) for level, low, high, covered, _, _ in segments] == [
        (1, ana[0]["log_offset"], ana[7]["log_offset"], 8),
        (1, ana[8]["log_offset"], ana[15]["log_offset"], 8),
    ]
    assert segments[0][5] == ids(ana[:8])
    assert segments[1][5] == ids(ana[8:16])
    assert stored(url, "ben") == []  # five turns: all of them are among the newest eight

    shown = context(alpha, "ana")
    assert [(s["level"], s["covered"]) for s in shown["segments"]] == [(1, 8), (1, 8)]
    assert [s["summary"] for s in shown["segments"]] == [segment[4] for segment in segments]
    assert "tomatoes" in shown["segments"][0]["summary"]
    # 27 turns: 16 summarized, 3 older ones waiting for a full run, the newest 8 verbatim.
    assert [t["log_offset"] for t in shown["turns"]] == offsets(ana[16:])
    assert [t["log_offset"] for t in context(alpha, "ben")["turns"]] == offsets(ben)


def test_eight_segments_roll_up_into_the_level_above(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana = observe(alpha, "ana", 8 * 8 + 8)
    url = live_server.database_url

    assert asyncio.run(write(url)) == 9
    assert asyncio.run(write(url)) == 0

    segments = stored(url, "ana")
    assert [level for level, *_ in segments] == [1] * 8 + [2]
    top = segments[-1]
    assert top[1:4] == (ana[0]["log_offset"], ana[63]["log_offset"], 64)
    assert top[5] == ids(ana[:64])  # its sources are every turn beneath it
    shown = context(alpha, "ana")
    assert [(s["level"], s["covered"]) for s in shown["segments"]] == [(2, 64)]
    assert [t["log_offset"] for t in shown["turns"]] == offsets(ana[64:])


def test_an_erasure_takes_the_segments_above_a_turn_and_the_gap_is_closed(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana = observe(alpha, "ana", 8 * 8 + 8)
    url = live_server.database_url
    asyncio.run(write(url))

    answer = alpha.post("/v1/erasures", json={"source_observation_ids": [ana[3]["id"]]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"]["segment"] == 2  # its level-1 segment and the level 2
    assert [level for level, *_ in stored(url, "ana")] == [1] * 7

    # The seven turns left between segments make a short run; then eight roll up again.
    assert asyncio.run(write(url)) == 2
    assert asyncio.run(write(url)) == 0
    segments = stored(url, "ana")
    short = [s for s in segments if s[0] == 1 and s[1] == ana[0]["log_offset"]]
    assert [s[1:4] for s in short] == [(ana[0]["log_offset"], ana[7]["log_offset"], 7)]
    assert short[0][5] == ids(ana[:3] + ana[4:8])
    shown = context(alpha, "ana")
    assert [(s["level"], s["covered"]) for s in shown["segments"]] == [(2, 63)]
    assert shown["segments"][0]["from_offset"] == ana[0]["log_offset"]


def test_a_subject_erasure_leaves_no_segment(live_server: LiveServer, alpha: httpx.Client) -> None:
    observe(alpha, "ana", 24)
    observe(alpha, "ben", 24)
    url = live_server.database_url
    assert asyncio.run(write(url)) == 4
    answer = alpha.post("/v1/erasures", json={"data_subject_id": "ana"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"]["segment"] == 2
    assert stored(url, "ana") == []
    assert len(stored(url, "ben")) == 2
    assert asyncio.run(write(url)) == 0


def test_levels_stop_at_six(live_server: LiveServer, alpha: httpx.Client) -> None:
    ana = observe(alpha, "ana", 8 * 8 + 8)
    url = live_server.database_url
    with psycopg.connect(url) as conn:  # a level-5 segment over each of the 64 older turns
        for turn in ana[:64]:
            segment = uuid.uuid4()
            conn.execute(
                "INSERT INTO segments (id, project_id, data_subject_id, level, from_offset,"
                " to_offset, covered, summary) SELECT %s, id, 'ana', 5, %s, %s, 1, %s"
                " FROM projects WHERE name = 'alpha'",
                (segment, turn["log_offset"], turn["log_offset"], f"Level five {turn['id']}."),
            )
            conn.execute(
                "INSERT INTO segment_sources VALUES (%s, %s)", (segment, uuid.UUID(turn["id"]))
            )

    assert asyncio.run(write(url)) == 8
    assert asyncio.run(write(url)) == 0
    levels = [level for level, *_ in stored(url, "ana")]
    assert (levels.count(5), levels.count(6), len(levels)) == (64, 8, 72)
    shown = context(alpha, "ana")
    assert [(s["level"], s["covered"]) for s in shown["segments"]] == [(6, 8)] * 8


def test_two_writers_at_once_write_each_segment_once(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    observe(alpha, "ana", 8 * 8 + 8)
    url = live_server.database_url

    async def both() -> list[int]:
        return list(await asyncio.gather(write(url), write(url)))

    # Neither duplicates the other's segments; whatever one missed, the next call writes.
    assert sum(asyncio.run(both())) + asyncio.run(write(url)) == 9
    segments = stored(url, "ana")
    assert [level for level, *_ in segments] == [1] * 8 + [2]
    assert len({(level, low) for level, low, *_ in segments}) == 9


def test_a_model_summarizes_and_a_failure_leaves_no_half_written_segment(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana = observe(alpha, "ana", 24)
    url = live_server.database_url

    async def summarize_with(model: ModelServer) -> int:
        settings = ModelClientSettings(
            model="scripted-summarizer", base_url=model.base_url, retries=0
        )
        chat = ChatModel(settings)
        try:
            return await write(url, ModelSummarizer(chat))
        finally:
            await chat.aclose()

    with ModelServer() as model:
        model.reply("  Ana waters tomatoes at dawn.  ", Failure(500))
        with pytest.raises(ModelError):
            asyncio.run(summarize_with(model))
        segments = stored(url, "ana")
        assert [(s[1], s[3], s[4], s[5]) for s in segments] == [
            (ana[0]["log_offset"], 8, "Ana waters tomatoes at dawn.", ids(ana[:8]))
        ]
        first = model.requests[0]
        assert (first["model"], first["temperature"]) == ("scripted-summarizer", 0)
        assert first["max_tokens"] == SUMMARY_TOKENS
        assert said("ana", 0) in first["messages"][-1]["content"]

        model.reply("", "Ana's garden, continued.")  # an empty summary is a failure too
        with pytest.raises(ModelError):
            asyncio.run(summarize_with(model))
        assert len(stored(url, "ana")) == 1
        assert asyncio.run(summarize_with(model)) == 1
        assert asyncio.run(summarize_with(model)) == 0
        assert len(model.requests) == 4

    shown = context(alpha, "ana")
    assert [s["summary"] for s in shown["segments"]] == [
        "Ana waters tomatoes at dawn.",
        "Ana's garden, continued.",
    ]


def test_the_extractive_summary_is_short_stable_and_keeps_what_recurs() -> None:
    texts = [
        "user: My sister Maeve moved to Lisbon in March.\nassistant: Noted.",
        "user: Maeve works at a bakery in Lisbon. The weather was fine.",
        "user: Hi!\nassistant: Hello there, how can I help today?",
        "user: I visit Maeve in Lisbon every summer. " + "Long words " * 60 + ".",
    ]
    summary = extract(texts)
    assert summary == extract(list(texts))
    assert summary == asyncio.run(extractive_summary(texts))
    assert "Maeve moved to Lisbon" in summary and "Maeve works at a bakery" in summary
    assert "Hello there" not in summary
    assert len(summary) <= 480
    assert summary.index("moved") < summary.index("bakery")  # in the order said
    assert extract([]) == "" and extract(["  \n "]) == ""


def worker_passes(
    url: str, *between: Callable[[], object], summarize: Summarizer | None = None
) -> list[int]:
    """The segments each pass of one worker wrote (the default summarizer unless `summarize`):
    a first pass, then one after each of `between` (run in a thread)."""

    async def run() -> list[int]:
        worker = Worker(url, MemorySettings(), embedder=Unembedding())
        if summarize is not None:
            worker.summarizer = summarize
        try:
            written = [(await worker.run_once()).segments]
            for change in between:
                await asyncio.to_thread(change)
                written.append((await worker.run_once()).segments)
            return written
        finally:
            await worker.close()

    return asyncio.run(run())


class Unembedding:
    """An embedder that cannot run: the worker's passes leave the passages unindexed."""

    identity = "test/unavailable"

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise EmbedderUnavailable("no embedder in this test")


def segment_count(url: str) -> int:
    return len(rows(url, "SELECT id FROM segments"))


def test_the_worker_commits_each_segment_as_it_writes_it(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    observe(alpha, "ana", 4 * 8 + 8)  # four level-1 segments are due
    url = live_server.database_url
    seen: list[int] = []

    async def summarize(texts: list[str]) -> str:
        seen.append(segment_count(url))  # as another connection sees the store meanwhile
        if len(seen) == 3:
            raise ModelError("the summarizer is down")
        return await extractive_summary(texts)

    assert worker_passes(url, summarize=summarize) == [0]
    assert seen == [0, 1, 2]
    assert segment_count(url) == 2  # the two written before the failure stay

    assert worker_passes(url) == [2]  # the next pass writes the other two
    assert segment_count(url) == 4


def test_an_unchanged_project_is_not_walked_again_and_a_change_is_seen(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana = observe(alpha, "ana", 2 * 8 + 8)
    url = live_server.database_url

    def behind_the_stores_back() -> None:
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM segments WHERE from_offset = %s", (ana[8]["log_offset"],))

    def newer_turns() -> None:
        observe(alpha, "ana", 8, 2 * 8 + 8)

    # The deletion changes no turn, so the next pass does not walk the project; after the
    # newer turns it does, writing the deleted segment again and one over the turns that are no
    # longer the newest eight.
    assert worker_passes(url, behind_the_stores_back, newer_turns) == [2, 0, 2]
    assert [s[1] for s in stored(url, "ana")] == offsets([ana[0], ana[8], ana[16]])


def test_the_worker_closes_the_gap_an_erasure_leaves(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    ana = observe(alpha, "ana", 2 * 8 + 8)
    url = live_server.database_url

    def erase() -> None:
        answer = alpha.post("/v1/erasures", json={"source_observation_ids": [ana[3]["id"]]})
        assert answer.status_code == 200, answer.text

    # The erasure takes the first segment; the same worker's next pass writes a short run of
    # the seven turns left (the project's turns changed, so it is walked again).
    assert worker_passes(url, erase) == [2, 1]
    short = [s for s in stored(url, "ana") if s[1] == ana[0]["log_offset"]]
    assert [s[1:4] for s in short] == [(ana[0]["log_offset"], ana[7]["log_offset"], 7)]
