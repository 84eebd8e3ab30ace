"""The ranking maths of passage search, by tables worked out by hand, and a few properties."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from satchel.memory.passages.periods import EARLIEST, LATEST, Period
from satchel.memory.passages.ranking import (
    COSINE_FLOOR,
    common_lexemes,
    fuse,
    idf,
    lexemes_to_read,
    period_window,
    places,
    relatedness,
    with_shares,
)
from satchel.memory.store.passage_rankings import MessagePlace, Ranking

A, B, C, D = (uuid.UUID(int=n) for n in (1, 2, 3, 4))
MORNING = datetime(2026, 3, 8, 9, tzinfo=UTC)


def place(chunk: uuid.UUID, subject: str | None = "ann", at: datetime = MORNING) -> MessagePlace:
    return MessagePlace(chunk, uuid.UUID(int=chunk.int + 100), 0, 1, subject, chunk.int, at)


def ranking(*scored: tuple[uuid.UUID, float]) -> Ranking:
    return [(place(chunk), score) for chunk, score in scored]


@pytest.mark.parametrize(
    ("total", "frequency", "expected"),
    [
        (10, 1, 1.992430),  # ln(1 + 9.5 / 1.5) = ln(22 / 3)
        (10, 10, 0.046520),  # ln(1 + 0.5 / 10.5) = ln(22 / 21)
        (100, 50, 0.693147),  # half the messages: ln 2
        (0, 0, 0.693147),  # an empty scope: ln(1 + 0.5 / 0.5)
        (31, 1, 3.060271),  # ln(1 + 30.5 / 1.5) = ln(64 / 3)
    ],
)
def test_idf(total: int, frequency: int, expected: float) -> None:
    assert idf(total, frequency) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("frequencies", "total", "expected"),
    [
        ([2, 3, 10], 10, {"b", "c"}),  # more than 20% of 10 is 3 or more
        ([0, 1, 2], 10, set()),  # 2 of 10 is not more than 20%
        ([1, 0, 0], 0, {"a"}),  # in an empty count anything held is common
        ([5, 5, 5], 5, {"a", "b", "c"}),
    ],
)
def test_common_lexemes(frequencies: list[int], total: int, expected: set[str]) -> None:
    assert common_lexemes(["a", "b", "c"], frequencies, total) == expected


WEIGHTS = [("'x'", 1.0), ("'y'", 2.0), ("'z'", 3.0)]


@pytest.mark.parametrize(
    ("matches", "vectored", "cap", "expected"),
    [
        ([10, 2, 5], False, 8, ["'y'", "'z'"]),  # rarest first: 2 + 5 fit, 2 + 5 + 10 does not
        ([10, 2, 5], True, 8, ["'y'", "'z'"]),
        ([10, 2, 5], False, 20, ["'y'", "'z'", "'x'"]),
        ([10, 2, 5], False, 1, ["'y'"]),  # without vectors the rarest is read whatever it holds
        ([10, 2, 5], True, 1, []),  # with them, nothing over the cap is read
        ([4, 4, 4], False, 8, ["'x'", "'y'"]),  # equal counts in the order of the weights
        ([], False, 8, []),
    ],
)
def test_lexemes_to_read(matches: list[int], vectored: bool, cap: int, expected: list[str]) -> None:
    weights = WEIGHTS[: len(matches)]
    assert lexemes_to_read(weights, matches, vectored, cap) == expected


@pytest.mark.parametrize(
    ("period", "expected"),
    [
        (
            (datetime(2023, 7, 7, tzinfo=UTC), datetime(2023, 7, 8, tzinfo=UTC)),
            (datetime(2023, 7, 4, tzinfo=UTC), datetime(2023, 7, 11, tzinfo=UTC)),
        ),
        (
            (datetime(2023, 12, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
            (datetime(2023, 11, 28, tzinfo=UTC), datetime(2024, 1, 4, tzinfo=UTC)),
        ),
        ((EARLIEST, datetime(1, 1, 2, tzinfo=UTC)), (EARLIEST, datetime(1, 1, 5, tzinfo=UTC))),
        (
            (datetime(9999, 12, 31, tzinfo=UTC), LATEST),
            (datetime(9999, 12, 28, tzinfo=UTC), LATEST),
        ),
    ],
)
def test_period_window_reaches_three_days_either_side(period: Period, expected: Period) -> None:
    assert period_window(period) == expected


@pytest.mark.parametrize(
    ("similarity", "expected"), [(0.5, 0.4), (1.0, 0.9), (0.1, 0.0), (0.05, 0.0), (-0.3, 0.0)]
)
def test_relatedness(similarity: float, expected: float) -> None:
    assert relatedness(similarity) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "vector", "dated", "expected"),
    [
        # BM25 over the best: 0.35 * 2 / 2 and 0.35 * 1 / 2; b adds 0.65 * (0.6 - 0.1);
        # c's cosine is under the floor, so only its period counts: 0.65 * (0.3 - 0.1) + 0.2;
        # d is found only in the period: 0.65 * (0.5 - 0.1) + 0.2.
        (
            ranking((A, 2.0), (B, 1.0)),
            ranking((B, 0.6), (C, 0.05)),
            ranking((C, 0.3), (D, 0.5)),
            {A: 0.35, B: 0.5, C: 0.33, D: 0.46},
        ),
        # a message in the period already scored gets the bonus on top
        (ranking((A, 4.0)), [], ranking((A, 0.9)), {A: 0.55}),
        # best BM25 of 0: scores over 1 instead, so nothing is divided by 0
        (ranking((A, 0.0)), ranking((A, 1.0)), None, {A: 0.585}),
        ([], ranking((A, 0.1), (B, 0.2)), None, {B: 0.065}),
        ([], [], None, {}),
    ],
)
def test_fuse(
    text: Ranking, vector: Ranking, dated: Ranking | None, expected: dict[uuid.UUID, float]
) -> None:
    fused = fuse(text, vector, dated)
    assert fused == pytest.approx(expected)
    assert list(fused) == list(expected)  # first found first


def test_places_name_each_ranked_message_once() -> None:
    found = places(ranking((A, 1.0), (B, 0.5)), ranking((B, 0.9)), [])
    assert found == {A: place(A), B: place(B)}


@pytest.mark.parametrize(
    ("scores", "found", "turns", "before", "after", "expected"),
    [
        # a and b said one after the other, c seven turns after b: neighbours add 0.3 of each
        # other's score; each stretch (turns within 6) adds the mean of its best four scores.
        (
            {A: 1.0, B: 0.5, C: 0.2},
            [place(A), place(B), place(C)],
            [0, 1, 8],
            {B: A},
            {A: B},
            [(A, 1.0 + 0.3 * 0.5 + 1.5 / 4), (B, 0.5 + 0.3 * 1.0 + 1.5 / 4), (C, 0.2 + 0.2 / 4)],
        ),
        # six turns apart is still one stretch; a stretch is each message's own, not a block
        (
            {A: 0.8, B: 0.4, C: 0.2},
            [place(A), place(B), place(C)],
            [0, 6, 12],
            {},
            {},
            [(A, 0.8 + 1.2 / 4), (B, 0.4 + 1.4 / 4), (C, 0.2 + 0.6 / 4)],
        ),
        # another subject's turns are another conversation; equal scores by id
        (
            {B: 0.4, A: 0.4},
            [place(B, "ben"), place(A, "ann")],
            [0, 0],
            {},
            {},
            [(A, 0.5), (B, 0.5)],
        ),
        # only the best four of a stretch count, over four
        (
            {A: 0.5, B: 0.4, C: 0.3, D: 0.2, uuid.UUID(int=5): 0.1},
            [place(A), place(B), place(C), place(D), place(uuid.UUID(int=5))],
            [0, 1, 2, 3, 4],
            {},
            {},
            [
                (A, 0.5 + 1.4 / 4),
                (B, 0.4 + 1.4 / 4),
                (C, 0.3 + 1.4 / 4),
                (D, 0.2 + 1.4 / 4),
                (uuid.UUID(int=5), 0.1 + 1.4 / 4),
            ],
        ),
        # a message with no subject has a stretch of its own turn
        (
            {A: 0.8, B: 0.4},
            [place(A, None), place(B, None)],
            [None, None],
            {},
            {},
            [(A, 1.0), (B, 0.5)],
        ),
    ],
)
def test_with_shares(
    scores: dict[uuid.UUID, float],
    found: list[MessagePlace],
    turns: list[int | None],
    before: dict[uuid.UUID, uuid.UUID],
    after: dict[uuid.UUID, uuid.UUID],
    expected: list[tuple[uuid.UUID, float]],
) -> None:
    shared = with_shares(scores, found, before, after, turns)
    assert [chunk for chunk, _ in shared] == [chunk for chunk, _ in expected]
    assert [score for _, score in shared] == pytest.approx([score for _, score in expected])


unit = st.floats(0.0, 1.0, allow_nan=False)
similarity = st.floats(-1.0, 1.0, allow_nan=False)
bm25 = st.floats(0.0, 50.0, allow_nan=False)


@given(
    others=st.lists(st.tuples(bm25, similarity), min_size=0, max_size=5),
    mine=st.tuples(bm25, similarity),
    raised=st.tuples(bm25, similarity),
)
def test_fusion_is_monotone_in_each_ranking(
    others: list[tuple[float, float]], mine: tuple[float, float], raised: tuple[float, float]
) -> None:
    """A message that scores no lower in either ranking is fused no lower."""
    chunks = [uuid.UUID(int=n + 10) for n in range(len(others))]
    text = ranking(*zip(chunks, (score for score, _ in others), strict=True))
    vector = ranking(*zip(chunks, (close for _, close in others), strict=True))
    higher = (max(mine[0], raised[0]), max(mine[1], raised[1]))
    before = fuse([*text, (place(A), mine[0])], [*vector, (place(A), mine[1])])
    after = fuse([*text, (place(A), higher[0])], [*vector, (place(A), higher[1])])
    assert after[A] >= before[A] - 1e-9  # rounding of the division by the best
    if higher[0] == mine[0]:  # the text ranking's best unchanged: no other message moves
        assert {k: v for k, v in after.items() if k != A} == {
            k: v for k, v in before.items() if k != A
        }


@given(similarities=st.lists(similarity, min_size=1, max_size=8))
def test_a_message_only_the_vectors_found_counts_only_above_the_floor(
    similarities: list[float],
) -> None:
    chunks = [uuid.UUID(int=n + 1) for n in range(len(similarities))]
    fused = fuse([], ranking(*zip(chunks, similarities, strict=True)))
    assert set(fused) == {c for c, s in zip(chunks, similarities, strict=True) if s > COSINE_FLOOR}
    assert all(0 < score <= 0.65 * 0.9 + 1e-12 for score in fused.values())


@given(scores=st.lists(unit, min_size=1, max_size=6), lift=unit, which=st.integers(0, 5))
def test_a_higher_score_never_lowers_a_message_after_the_shares(
    scores: list[float], lift: float, which: int
) -> None:
    chunks = [uuid.UUID(int=n + 1) for n in range(len(scores))]
    found = [place(chunk) for chunk in chunks]
    turns = [n * 4 for n in range(len(chunks))]  # some within a stretch of each other, some not
    before = {chunks[n + 1]: chunks[n] for n in range(len(chunks) - 1)}
    after = {chunks[n]: chunks[n + 1] for n in range(len(chunks) - 1)}
    chosen = chunks[which % len(chunks)]
    raised = dict(zip(chunks, scores, strict=True))
    raised[chosen] += lift
    old = dict(with_shares(dict(zip(chunks, scores, strict=True)), found, before, after, turns))
    new = dict(with_shares(raised, found, before, after, turns))
    assert all(new[chunk] >= old[chunk] - 1e-12 for chunk in chunks)
