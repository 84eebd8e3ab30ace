"""The ranking maths of passage search, pure: term weights (IDF), which lexemes full text reads,
the fusion of the rankings, the period windows, and the shares a message takes of its neighbours'
and its stretch's scores."""

from __future__ import annotations

import bisect
import heapq
import math
import uuid
from datetime import timedelta

from satchel.memory.passages.periods import Period, shifted
from satchel.memory.store.passage_rankings import WINDOW_TURNS, MessagePlace, Ranking

TEXT_WEIGHT = 0.35  # share of the best-normalized BM25 score; the rest is cosine similarity
COSINE_FLOOR = 0.1  # cosine similarity below this counts as unrelated
NEIGHBOUR_WEIGHT = 0.3  # share of the previous and next messages' scores a message inherits
STRETCH_WEIGHT = 1.0  # share of its stretch's score (the best said around it by its subject)
STRETCH_TOP = 4  # how many of a stretch's best messages its score averages
COMMON_SHARE = 0.2  # a word in more of the scope's messages than this is not embedded
MAX_TEXT_MATCHES = 5_000  # messages full text reads for a question (see `lexemes_to_read`)
PERIOD_WEIGHT = 0.2  # what being said in a period the question names adds
PERIOD_SLACK = timedelta(days=3)  # how far around a named period still counts

# For each message, the message said just before (or after) it, among the candidates.
Links = dict[uuid.UUID, uuid.UUID]


def idf(total: int, frequency: int) -> float:
    """BM25's inverse document frequency of a lexeme held by `frequency` of `total` messages."""
    return math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))


def common_lexemes(lexemes: list[str], frequencies: list[int], total: int) -> set[str]:
    """The `lexemes` (each held by `frequencies` of `total` messages) too common to embed: held
    by more than `COMMON_SHARE` of the messages."""
    return {x for x, f in zip(lexemes, frequencies, strict=True) if f > COMMON_SHARE * total}


def lexemes_to_read(
    weights: list[tuple[str, float]], matches: list[int], vectored: bool, cap: int
) -> list[str]:
    """The lexemes (of `weights`, each held by `matches` messages) whose messages full text
    reads: the rarest first, while they hold at most `cap` messages together. A message holding
    only the commoner ones scores too little to rank, and reading them all would cost a scan of
    the scope. Without vectors (`vectored` false) the rarest is read whatever it holds (full text
    is all there is); with them, a lexeme held by more messages than that adds too little to be
    worth reading."""
    order = sorted(range(len(weights)), key=lambda i: (matches[i], i))
    chosen: list[str] = []
    seen = 0
    for index in order:
        if (chosen or vectored) and seen + matches[index] > cap:
            break
        chosen.append(weights[index][0])
        seen += matches[index]
    return chosen


def period_window(period: Period) -> Period:
    """The stretch of time a named period draws messages from: `PERIOD_SLACK` either side."""
    start, end = period
    return shifted(start, -PERIOD_SLACK), shifted(end, PERIOD_SLACK)


def relatedness(similarity: float) -> float:
    """How related a cosine similarity counts: its excess over `COSINE_FLOOR`, never below 0."""
    return max(0.0, similarity - COSINE_FLOOR)


def fuse(text: Ranking, vector: Ranking, dated: Ranking | None = None) -> dict[uuid.UUID, float]:
    """A weighted sum: BM25 over its best score, cosine similarity above the floor, and a bonus
    for being said in a period the question names (a message found only that way is scored by
    its similarity)."""
    scores: dict[uuid.UUID, float] = {}
    best = max((score for _, score in text), default=0.0) or 1.0
    for placed, score in text:
        scores[placed.id] = scores.get(placed.id, 0.0) + TEXT_WEIGHT * score / best
    for placed, similarity in vector:
        if similarity > COSINE_FLOOR:
            chunk = placed.id
            scores[chunk] = scores.get(chunk, 0.0) + (1 - TEXT_WEIGHT) * relatedness(similarity)
    for placed, similarity in dated or []:
        chunk = placed.id
        if chunk not in scores:
            scores[chunk] = (1 - TEXT_WEIGHT) * relatedness(similarity)
        scores[chunk] += PERIOD_WEIGHT
    return scores


def places(*rankings: Ranking) -> dict[uuid.UUID, MessagePlace]:
    """Where each ranked message is."""
    return {placed.id: placed for ranking in rankings for placed, _ in ranking}


def with_shares(
    scores: dict[uuid.UUID, float],
    found: list[MessagePlace],
    before: Links,
    after: Links,
    turn_of: list[int | None],
) -> list[tuple[uuid.UUID, float]]:
    """Each message's score (`found`: each scored message's place, in the order of `scores`)
    plus `NEIGHBOUR_WEIGHT` of the scores of the messages said just `before` and `after` it, and
    `STRETCH_WEIGHT` of its stretch's score: the mean of the `STRETCH_TOP` best scores said by
    its data subject within `WINDOW_TURNS` turns of it (`turn_of`: each message's turn number in
    its subject's conversation; without a subject, the stretch is its own turn); best first,
    ties in the order of the ids."""
    # Hundreds of candidates in a passage search: each id is looked up as few times as can be
    # (a UUID hashes in Python), the rest goes by position.
    smoothed: list[float] = []
    lines: dict[object, list[tuple[int, float]]] = {}
    line_of: list[tuple[object, int]] = []
    for placed, score, turn in zip(found, scores.values(), turn_of, strict=True):
        chunk = placed.id
        around = 0.0
        if (earlier := before.get(chunk)) is not None:
            around += scores[earlier]
        if (later := after.get(chunk)) is not None:
            around += scores[later]
        smoothed.append(score + NEIGHBOUR_WEIGHT * around)
        key: object = placed.observation_id if turn is None else placed.subject
        at = 0 if turn is None else turn
        line_of.append((key, at))
        lines.setdefault(key, []).append((at, score))
    for line in lines.values():
        line.sort()
    stretch: dict[tuple[object, int], float] = {}
    for n, (key, at) in enumerate(line_of):
        if (key, at) not in stretch:
            line = lines[key]
            low = bisect.bisect_left(line, (at - WINDOW_TURNS, -math.inf))
            high = bisect.bisect_right(line, (at + WINDOW_TURNS, math.inf))
            best = heapq.nlargest(STRETCH_TOP, (score for _, score in line[low:high]))
            stretch[(key, at)] = sum(best) / STRETCH_TOP
        smoothed[n] += STRETCH_WEIGHT * stretch[(key, at)]
    # Ties in the order of the ids' text, which is the order of their 128-bit values.
    return sorted(zip(scores, smoothed, strict=True), key=lambda item: (-item[1], item[0].int))
