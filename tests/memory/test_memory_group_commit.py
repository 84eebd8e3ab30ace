"""Group commit: a project's concurrent turns are written by one statement and committed together,
in arrival order, never two with one retry key in a group, and one turn's failure stays its own."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from hypothesis import given
from hypothesis import strategies as st
from memory_kit import LiveServer, post_with_backoff

from satchel.memory.store.appends import MAX_GROUP, MAX_GROUP_BYTES, next_group
from satchel.memory.store.log import NewMessage, NewTurn

AT = datetime(2026, 1, 1, tzinfo=UTC)


def new_turn(digest: bytes | None, size: int) -> NewTurn:
    return NewTurn(uuid.uuid4(), None, AT, [NewMessage("user", "x" * size, 0, AT)], digest, b"")


turns = st.lists(
    st.builds(
        new_turn,
        st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c"])),
        st.sampled_from([1, 10, MAX_GROUP_BYTES // 3, MAX_GROUP_BYTES + 1]),
    ),
    max_size=3 * MAX_GROUP,
)


@given(turns)
def test_groups_keep_arrival_order_bounds_and_one_turn_per_key(waiting: list[NewTurn]) -> None:
    groups = []
    rest = waiting
    while rest:
        group, rest = next_group(rest, key=lambda turn: turn)
        assert group, "every split takes at least one turn"
        groups.append(group)
    assert [turn for group in groups for turn in group] == waiting
    for index, group in enumerate(groups):
        digests = [turn.digest for turn in group if turn.digest is not None]
        assert len(digests) == len(set(digests))
        assert len(group) <= MAX_GROUP
        size = sum(turn.size for turn in group)
        assert len(group) == 1 or size <= MAX_GROUP_BYTES
        if index + 1 < len(groups):  # a group ends only where the next turn could not join it
            following = groups[index + 1][0]
            assert (
                len(group) == MAX_GROUP
                or size + following.size > MAX_GROUP_BYTES
                or following.digest in digests
            )


def concurrently(server: LiveServer, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    start = threading.Barrier(len(bodies))
    headers = {"Authorization": f"Bearer {server.token('alpha')}"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:

        def post(body: dict[str, Any]) -> httpx.Response:
            start.wait()
            return post_with_backoff(client, body)

        with ThreadPoolExecutor(len(bodies)) as pool:
            return list(pool.map(post, bodies))


def said(content: str) -> dict[str, Any]:
    return {
        "idempotency_key": str(uuid.uuid4()),
        "messages": [{"role": "user", "content": content}],
    }


def test_concurrent_turns_commit_together_with_contiguous_offsets(
    live_server: LiveServer,
) -> None:
    answers = concurrently(live_server, [said(f"turn {n}") for n in range(32)])
    assert {answer.status_code for answer in answers} == {201}
    assert sorted(answer.json()["log_offset"] for answer in answers) == list(range(32))
    with psycopg.connect(live_server.database_url) as conn:
        rows = conn.execute(
            "SELECT o.log_offset, m.content, o.xmin::text FROM observations o"
            " JOIN messages m ON m.observation_id = o.id ORDER BY o.log_offset"
        ).fetchall()
    by_offset = {answer.json()["log_offset"]: answer for answer in answers}
    assert [content for _, content, _ in rows] == [
        f"turn {answers.index(by_offset[offset])}" for offset in range(32)
    ]
    assert len({commit for _, _, commit in rows}) < 32  # some turns shared one transaction


def test_a_failing_turn_fails_alone_and_claims_no_offset(live_server: LiveServer) -> None:
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute(
            "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN IF NEW.content = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF;"
            " RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON messages FOR EACH ROW"
            " EXECUTE FUNCTION refuse_poison()"
        )
    bodies = [said(f"turn {n}") for n in range(15)]
    bodies[7] = said("poison")
    answers = concurrently(live_server, bodies)
    assert answers[7].status_code == 500
    good = [answer for index, answer in enumerate(answers) if index != 7]
    assert {answer.status_code for answer in good} == {201}
    assert sorted(answer.json()["log_offset"] for answer in good) == list(range(14))
