"""Similar names: which words of a question may name someone, and how alike two spellings are.

A question names a stored entity under a slightly different spelling ("Jon" for "John"). The
database proposes entities whose spelling key (`entity_name_key` in migration 0009) equals a
window's; this module decides which windows may be offered and scores each proposal.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from satchel.memory.store.entities import Entity, normalize

THRESHOLD = 0.8  # the least similarity a similar name anchors at ("jon", "john": 0.875)
MIN_LETTERS = 3  # shorter windows ("on", "al") are too close to too many names
WINDOW = 4  # words in the longest window (exact names and similar ones)

# Words a question starts with, or capitalizes, without naming anyone: question words,
# auxiliaries, pronouns, determiners, prepositions and the verbs questions are asked with.
_COMMON = """
    a about after again against all also am an and any are as ask at be because been before
    being between both but by can could did do does doing done down during each either else
    ever every few find for from get give go goes going gone got had has have having he her
    here hers him his how i if in into is it its join joined joins just keep know knows like
    live lived lives make many may me meet met might mine more most much must my near need
    never new no nor not now of off often on once one only or other our ours out over own
    please same say says see she should show so some still such take tell than that the their
    them then there these they this those through to told too under until up us use used very
    was we were what when where which while who whom whose why will with work worked works
    would yes yet you your yours
"""
COMMON = frozenset(_COMMON.split())


def similarity(first: str, second: str) -> float:
    """How alike two spellings are, 0..1: one minus their edit distance over the longer one's
    length. Symmetric; 1 only for equal strings."""
    longest = max(len(first), len(second))
    if longest == 0:
        return 1.0
    return 1.0 - _distance(first, second) / longest


def _gap(text: str, at: int) -> float:
    """What leaving out `text[at]` costs: half for a letter that does not change how a name
    sounds (an h, one of a doubled letter, a word's final e), else 1."""
    char = text[at]
    doubled = text[at - 1 : at] == char or text[at + 1 : at + 2] == char
    final_e = char == "e" and text[at + 1 : at + 2] in ("", " ")
    return 0.5 if char == "h" or doubled or final_e else 1.0


def _distance(first: str, second: str) -> float:
    """An edit distance: leaving a letter out or putting one in costs its `_gap`, changing one 1,
    swapping two neighbours 0.5 (a slip of the keys)."""
    before: list[float] = []
    previous = [0.0]
    for j in range(len(second)):
        previous.append(previous[j] + _gap(second, j))
    for i, a in enumerate(first, 1):
        current = [previous[0] + _gap(first, i - 1)]
        for j, b in enumerate(second, 1):
            cost = min(
                previous[j] + _gap(first, i - 1),
                current[j - 1] + _gap(second, j - 1),
                previous[j - 1] + (a != b),
            )
            if i > 1 and j > 1 and a == second[j - 2] and first[i - 2] == b and a != b:
                cost = min(cost, before[j - 2] + 0.5)
            current.append(cost)
        before, previous = previous, current
    return previous[-1]


def offered(words: Sequence[str]) -> list[str]:
    """The normalized windows of 1..4 consecutive `words` (as written) that may name someone.

    Every word of a window is capitalized, as names are written, and not a common word (which
    also refuses a capitalized first word such as "Where" or "Join"); the window has at least
    three letters. A possessive's "'s" is left out ("Martha's" offers "martha"). Distinct, by
    start then length.
    """
    words = [word.removesuffix("'s") for word in words]
    found: dict[str, None] = {}
    for start in range(len(words)):
        for length in range(1, WINDOW + 1):
            window = words[start : start + length]
            if len(window) < length or not all(_name_like(word) for word in window):
                break
            if sum(char.isalpha() for word in window for char in word) >= MIN_LETTERS:
                found.setdefault(normalize(" ".join(window)))
    return list(found)


def _name_like(word: str) -> bool:
    return word[:1].isupper() and normalize(word) not in COMMON


@dataclass(frozen=True, slots=True)
class Similar:
    """An entity a window spells like: how alike, and which window reached it."""

    similarity: float
    window: str
    entity: Entity


def ranked(found: Sequence[tuple[str, Entity]], threshold: float = THRESHOLD) -> list[Similar]:
    """Each proposed entity once, at its best window, if at least `threshold` alike: most alike
    first, then the longer window, the name and the id."""
    best: dict[uuid.UUID, Similar] = {}
    for window, entity in found:
        score = similarity(window, entity.normalized)
        kept = best.get(entity.id)
        if score >= threshold and (kept is None or score > kept.similarity):
            best[entity.id] = Similar(score, window, entity)
    return sorted(
        best.values(),
        key=lambda s: (-s.similarity, -len(s.window), s.entity.normalized, s.entity.id),
    )
