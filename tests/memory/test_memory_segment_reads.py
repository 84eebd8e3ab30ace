"""The segment walk's reads of a subject's turns (`loose_turns`, `next_turns`) answer as a model
of the log says, and each reads the subject's turns once (at worst the project's), whatever the
statistics say: a project whose turns all arrived after the last ANALYZE looks empty to the
planner, and a look-up of each turn's next turn then read every turn of the project for each one
(regression)."""

from __future__ import annotations

import asyncio
import bisect

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satchel.memory.store.segments import Loose, loose_turns, next_turns

TURNS = 5_000  # the project's, 100 for each of 50 subjects, stored after the ANALYZE
SUBJECT = "person-7"
ROUNDS = 6
BUILT: dict[str, tuple[int, list[int]]] = {}  # each test database's burst
ONE_DATABASE = HealthCheck.function_scoped_fixture  # a test's examples share its database


def burst(url: str) -> tuple[int, list[int]]:
    """A project analyzed while empty beside another of 60,000 records and 20,000 turns, then
    given its own turns (every tenth of the subject's formed); its id and the subject's
    offsets."""
    with psycopg.connect(url, autocommit=True) as conn:
        ids = [
            conn.execute("INSERT INTO projects (name) VALUES (%s) RETURNING id", (n,)).fetchone()
            for n in ("earlier", "burst")
        ]
        earlier, project_id = (int(row[0]) for row in ids if row is not None)
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, kind, occurred_at, formed_at)"
            " SELECT gen_random_uuid(), %s, n, 'curated', now(), now()"
            " FROM generate_series(0, 59999) n",
            (earlier,),
        )
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
            " occurred_at, formed_at)"
            " SELECT gen_random_uuid(), %s, n, 'person-' || n %% 50, 'turn', now(), now()"
            " FROM generate_series(60000, 79999) n",
            (earlier,),
        )
        conn.execute("ANALYZE observations")
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
            " occurred_at, formed_at)"
            " SELECT gen_random_uuid(), %s, n, 'person-' || n %% 50, 'turn', now(),"
            " CASE WHEN n %% 10 = 7 THEN now() END FROM generate_series(0, %s) n",
            (project_id, TURNS - 1),
        )
    return project_id, [n for n in range(TURNS) if n % 50 == 7]


def following(offsets: list[int], after: int) -> int | None:
    at = bisect.bisect_right(offsets, after)
    return offsets[at] if at < len(offsets) else None


async def read(
    url: str, mode: str, project_id: int, spans: list[tuple[int, int]], ends: list[int]
) -> tuple[list[Loose], list[int | None], int]:
    """Both reads, six times over in one transaction (past the calls PostgreSQL plans for the
    values), with prepared statements planned as `mode` says; and the observations rows read."""
    async with await psycopg.AsyncConnection.connect(url, prepare_threshold=0) as conn:
        await conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (mode,))
        for _ in range(ROUNDS):
            loose = await loose_turns(conn, project_id, SUBJECT, spans)
            nexts = await next_turns(conn, project_id, SUBJECT, ends)
        cursor = await conn.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
            " FROM pg_stat_xact_user_tables WHERE relname = 'observations'"
        )
        row = await cursor.fetchone()
    assert row is not None
    return loose, nexts, int(row[0])


@pytest.mark.parametrize("mode", ["auto", "force_custom_plan", "force_generic_plan"])
def test_a_subjects_turns_are_read_once_and_answer_as_the_log_says(db_url: str, mode: str) -> None:
    project_id, offsets = burst(db_url)
    spans = [(0, 999), (2_500, 3_999)]
    ends = [7, 500, 2_557, 4_957, 4_999, -1]
    loose, nexts, rows_read = asyncio.run(read(db_url, mode, project_id, spans, ends))
    inside = [n for n in offsets if any(low <= n <= high for low, high in spans)]
    assert [(turn.offset, turn.formed, turn.next) for turn in loose] == [
        (n, n % 10 == 7, following(offsets, n)) for n in inside
    ]
    assert nexts == [following(offsets, end) for end in ends]
    assert nexts[3] is None and nexts[-1] == 7
    # Each statement reads the subject's observations once (100 rows), or at worst the project's
    # once; a look-up a turn read the project's turns for each of them (1.68 million rows here).
    assert rows_read <= ROUNDS * 2 * TURNS, rows_read


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cuts=st.lists(st.integers(-5, TURNS + 5), min_size=2, max_size=8, unique=True),
    ends=st.lists(st.integers(-5, TURNS + 5), min_size=1, max_size=6),
)
def test_any_spans_and_ends_answer_as_the_log_says(
    db_url: str, cuts: list[int], ends: list[int]
) -> None:
    if db_url not in BUILT:
        BUILT[db_url] = burst(db_url)
    project_id, offsets = BUILT[db_url]
    cuts.sort()
    spans = list(zip(cuts[::2], cuts[1::2], strict=False))
    loose, nexts, _ = asyncio.run(read(db_url, "auto", project_id, spans, ends))
    inside = [n for n in offsets if any(low <= n <= high for low, high in spans)]
    assert [(turn.offset, turn.next) for turn in loose] == [
        (n, following(offsets, n)) for n in inside
    ]
    assert nexts == [following(offsets, end) for end in ends]
