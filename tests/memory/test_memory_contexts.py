"""POST /v1/contexts: formed turns of one subject, segments over older history, the budget."""

from __future__ import annotations

import random
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from memory_kit import LiveServer

from satchel.memory.domain import VERBATIM
from satchel.memory.service.contexts import choose, gaps
from satchel.memory.store.contexts import Segment


def observe(client: httpx.Client, subject: str | None, *contents: str) -> int:
    body: dict[str, object] = {
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(contents)
        ]
    }
    if subject is not None:
        body["data_subject_id"] = subject
    answer = client.post("/v1/observations", json=body)
    assert answer.status_code == 201, answer.text
    offset: int = answer.json()["log_offset"]
    return offset


def context(client: httpx.Client, **body: object) -> dict[str, Any]:
    answer = client.post("/v1/contexts", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def offsets(result: dict[str, Any]) -> list[int]:
    return [turn["log_offset"] for turn in result["turns"]]


def size(*contents: str) -> int:
    """A turn's cost: the characters of each message's role and content."""
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(len(contents))]
    return sum(len(role) + len(text) for role, text in zip(roles, contents, strict=True))


def add_segment(
    url: str, project: str, subject: str, level: int, start: int, end: int, summary: str
) -> str:
    segment = uuid.uuid4()
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO segments (id, project_id, data_subject_id, level, from_offset, to_offset,"
            " covered, summary) SELECT %s, id, %s, %s, %s, %s, %s, %s FROM projects"
            " WHERE name = %s",
            (segment, subject, level, start, end, end - start + 1, summary, project),
        )
    return str(segment)


def test_unknown_subject_is_an_empty_context_with_the_watermark(alpha: httpx.Client) -> None:
    assert context(alpha, data_subject_id="nobody") == {
        "segments": [],
        "turns": [],
        "watermark": {"scope": "alpha", "stored": None, "formed": None, "parked": 0},
        "characters": 0,
        "truncated": False,
    }
    observe(alpha, "someone", "hello")
    assert context(alpha, data_subject_id="nobody")["watermark"] == {
        "scope": "alpha",
        "stored": 0,
        "formed": 0,
        "parked": 0,
    }


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"data_subject_id": ""},
        {"data_subject_id": "   "},
        {"data_subject_id": None},
        {"data_subject_id": "ana", "max_characters": 0},
        {"data_subject_id": "ana", "max_characters": -5},
        {"data_subject_id": "ana", "max_characters": 16_001},
    ],
)
def test_bad_requests_are_invalid_context(alpha: httpx.Client, body: dict[str, object]) -> None:
    answer = alpha.post("/v1/contexts", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_context"


def test_body_rules_apply(alpha: httpx.Client) -> None:
    for body in ({"data_subject_id": "ana", "extra": 1}, {"data_subject_id": 5}):
        answer = alpha.post("/v1/contexts", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_body"


def test_a_subjects_turns_verbatim_oldest_first(live_server: LiveServer) -> None:
    token = live_server.token("alpha", read_only=True)
    writer = live_server.token("alpha")
    with (
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {writer}"}
        ) as write,
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as read,
    ):
        first = observe(write, "ana", "I moved to Lisbon.", "Noted, Lisbon.")
        observe(write, "ben", "Ben's own turn")
        observe(write, None, "a project-wide turn")
        second = observe(write, "ana", "I like café au lait ☕")
        result = context(read, data_subject_id="ana")
    assert result["segments"] == []
    assert result["turns"] == [
        {
            "log_offset": first,
            "occurred_at": result["turns"][0]["occurred_at"],
            "messages": [
                {"role": "user", "content": "I moved to Lisbon."},
                {"role": "assistant", "content": "Noted, Lisbon."},
            ],
        },
        {
            "log_offset": second,
            "occurred_at": result["turns"][1]["occurred_at"],
            "messages": [{"role": "user", "content": "I like café au lait ☕"}],
        },
    ]
    assert str(result["turns"][0]["occurred_at"]).endswith("Z")
    assert result["characters"] == size("I moved to Lisbon.", "Noted, Lisbon.") + size(
        "I like café au lait ☕"
    )
    assert result["truncated"] is False
    assert result["watermark"] == {"scope": "alpha", "stored": 3, "formed": 3, "parked": 0}


def test_the_budget_keeps_the_newest_and_says_it_cut(alpha: httpx.Client) -> None:
    texts = [f"turn number {i:02d}" for i in range(5)]
    for text in texts:
        observe(alpha, "ana", text)
    one = size(texts[0])
    whole = context(alpha, data_subject_id="ana")
    assert offsets(whole) == [0, 1, 2, 3, 4]
    assert (whole["characters"], whole["truncated"]) == (5 * one, False)
    exact = context(alpha, data_subject_id="ana", max_characters=5 * one)
    assert (offsets(exact), exact["truncated"]) == ([0, 1, 2, 3, 4], False)
    cut = context(alpha, data_subject_id="ana", max_characters=3 * one + one - 1)
    assert offsets(cut) == [2, 3, 4]
    assert (cut["characters"], cut["truncated"]) == (3 * one, True)
    nothing = context(alpha, data_subject_id="ana", max_characters=one - 1)
    assert (offsets(nothing), nothing["characters"], nothing["truncated"]) == ([], 0, True)


def test_only_formed_turns_of_this_project_count(live_server: LiveServer) -> None:
    alpha_token, beta_token = live_server.token("alpha"), live_server.token("beta")
    with (
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {alpha_token}"}
        ) as alpha,
        httpx.Client(
            base_url=live_server.base_url, headers={"Authorization": f"Bearer {beta_token}"}
        ) as beta,
    ):
        for text in ("one", "two", "three"):
            observe(alpha, "ana", text)
        observe(beta, "ana", "beta's ana")
        with psycopg.connect(live_server.database_url) as conn:
            conn.execute("UPDATE observations SET formed_at = NULL WHERE log_offset = 1")
            conn.execute(
                "UPDATE observations SET parked_at = now() WHERE log_offset = 2"
                " AND project_id = (SELECT id FROM projects WHERE name = 'alpha')"
            )
        assert offsets(context(alpha, data_subject_id="ana")) == [0]
        beta_context = context(beta, data_subject_id="ana")
        assert [t["messages"] for t in beta_context["turns"]] == [
            [{"role": "user", "content": "beta's ana"}]
        ]
        assert beta_context["watermark"]["scope"] == "beta"


def test_older_turns_give_way_to_the_highest_segment_covering_them(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    url = live_server.database_url
    texts = [f"ana says thing {i:02d}" for i in range(26)]
    for i, text in enumerate(texts):
        observe(alpha, "ana", text)
        if i == 3:
            observe(alpha, "ben", "ben interleaves")  # offset 4, inside ana's segments
    ana = [o for o in range(27) if o != 4]  # ana's offsets
    older, newest = ana[:-VERBATIM], ana[-VERBATIM:]
    assert len(older) == 18
    low_a = add_segment(url, "alpha", "ana", 1, ana[0], ana[7], "first eight")
    low_b = add_segment(url, "alpha", "ana", 1, ana[8], ana[15], "second eight")
    add_segment(url, "alpha", "ben", 3, 0, 100, "ben's roll-up covers everything")

    lows = context(alpha, data_subject_id="ana")
    assert [s["segment_id"] for s in lows["segments"]] == [low_a, low_b]
    assert lows["segments"][0] == {
        "segment_id": low_a,
        "level": 1,
        "from_offset": ana[0],
        "to_offset": ana[7],
        "covered": ana[7] - ana[0] + 1,
        "summary": "first eight",
    }
    assert offsets(lows) == [*older[16:], *newest]
    loose = size(texts[0]) * (2 + VERBATIM)
    assert lows["characters"] == len("first eight") + len("second eight") + loose
    assert lows["truncated"] is False

    high = add_segment(url, "alpha", "ana", 2, ana[0], ana[15], "sixteen in one")
    rolled = context(alpha, data_subject_id="ana")
    assert [s["segment_id"] for s in rolled["segments"]] == [high]
    assert offsets(rolled) == [*older[16:], *newest]
    assert rolled["characters"] == len("sixteen in one") + loose

    cut = context(alpha, data_subject_id="ana", max_characters=loose + len("sixteen in one") - 1)
    assert (cut["segments"], offsets(cut)) == ([], [*older[16:], *newest])
    assert (cut["characters"], cut["truncated"]) == (loose, True)

    straddle = add_segment(url, "alpha", "ana", 1, ana[14], ana[17], "straddles")
    both = context(alpha, data_subject_id="ana")
    assert [s["segment_id"] for s in both["segments"]] == [high, straddle]
    assert offsets(both) == newest

    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM segments WHERE summary IN ('sixteen in one', 'straddles')")
        conn.execute(
            "UPDATE observations SET formed_at = NULL WHERE data_subject_id = 'ana'"
            " AND log_offset BETWEEN %s AND %s",
            (ana[8], ana[15]),
        )
    # The second segment covers no formed turn any more, and the formed tail moved back.
    gap = context(alpha, data_subject_id="ana")
    assert [s["segment_id"] for s in gap["segments"]] == [low_a]
    assert offsets(gap) == [*older[16:], *newest]


def test_a_long_history_is_walked_from_the_newest_end(alpha: httpx.Client) -> None:
    for i in range(80):
        observe(alpha, "ana", f"line {i:03d}")
    one = size("line 000")
    result = context(alpha, data_subject_id="ana", max_characters=75 * one)
    assert offsets(result) == list(range(5, 80))
    assert (result["characters"], result["truncated"]) == (75 * one, True)
    whole = context(alpha, data_subject_id="ana")
    assert (offsets(whole), whole["truncated"]) == (list(range(80)), False)


def test_each_older_offset_belongs_to_its_highest_cover_or_to_no_segment() -> None:
    """The planner against the rule stated plainly, on random (also overlapping) segments."""
    shuffle = random.Random(7)
    for _ in range(400):
        segments = []
        for _ in range(shuffle.randint(0, 8)):
            start = shuffle.randint(0, 40)
            end = start + shuffle.randint(0, 12)
            level = shuffle.randint(1, 4)
            segments.append(Segment(uuid.uuid4(), level, start, end, end - start + 1, 1))
        limit = shuffle.randint(1, 50)
        ruling = sorted(segments, key=lambda s: (-s.level, s.start))
        owner = {
            offset: next(s.id for s in ruling if s.start <= offset <= s.end)
            for offset in range(limit)
            if any(s.start <= offset <= s.end for s in segments)
        }
        planned = {
            offset: segment.id
            for segment, parts in choose(segments, limit)
            for low, high in parts
            for offset in range(low, high + 1)
        }
        assert planned == owner
        loose = [o for gap in gaps(segments, limit) for o in range(gap.end, gap.start - 1, -1)]
        assert loose == [o for o in range(limit - 1, -1, -1) if o not in owner]
