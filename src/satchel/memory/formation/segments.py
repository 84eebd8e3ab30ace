"""Summary segments: runs of formed turns rolled up level by level, with a pluggable summarizer."""

from __future__ import annotations

import math
import re
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from satchel.memory.domain import MAX_LEVEL
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.store import segments as store
from satchel.memory.store.database import Conn

FANOUT = 8  # turns under a level-1 segment, segments of the level below under a higher one
SHORTEST = 2  # the fewest parts of a run that closes a gap left by an erasure


class Summarizer(Protocol):
    """Turns (`role: content` lines, one text per turn) or lower summaries into one summary."""

    async def __call__(self, texts: list[str]) -> str: ...


@dataclass(frozen=True, slots=True)
class Unit:
    """What a segment is built from: a turn (level 0) or a segment, with its offsets."""

    ref: uuid.UUID
    start: int
    end: int
    covered: int


def plan(
    units: list[Unit], nexts: list[int | None], closes: Callable[[int], bool]
) -> list[list[Unit]]:
    """The runs to summarize, oldest first.

    `units` are sorted and uncovered; `nexts[i]` is the subject's next turn after unit i. Units
    are adjacent when the next turn after one is the first of the other, so an unformed turn or
    a leftover of a lower level breaks a stretch. Each stretch gives runs of `FANOUT` from its
    oldest end; what is left (at least `SHORTEST`) becomes a run only when the turn after the
    stretch lies under a segment of this level or higher (`closes`): the gap can never grow.
    """
    runs: list[list[Unit]] = []
    stretch: list[Unit] = []
    for index, unit in enumerate(units):
        stretch.append(unit)
        following = nexts[index]
        if index + 1 < len(units) and following == units[index + 1].start:
            continue
        whole = len(stretch) - len(stretch) % FANOUT
        runs.extend(stretch[i : i + FANOUT] for i in range(0, whole, FANOUT))
        rest = stretch[whole:]
        if len(rest) >= SHORTEST and following is not None and closes(following):
            runs.append(rest)
        stretch = []
    return runs


class Tops:
    """The subject's segments inside no higher one: disjoint, by first offset."""

    def __init__(self, segments: list[store.Stored]) -> None:
        self.segments = sorted(segments, key=lambda s: s.start)

    def level_at(self, offset: int) -> int:
        """The level of the segment covering `offset` (0 when none does)."""
        index = bisect_right([s.start for s in self.segments], offset) - 1
        if index >= 0 and self.segments[index].end >= offset:
            return self.segments[index].level
        return 0

    def closer(self, level: int) -> Callable[[int], bool]:
        """Whether an offset lies under a segment of `level` or higher."""
        return lambda offset: self.level_at(offset) >= level

    def at_level(self, level: int) -> list[store.Stored]:
        return [s for s in self.segments if s.level == level]

    def spans_below(self, limit: int) -> list[tuple[int, int]]:
        """The offsets `0..limit-1` no segment covers, as inclusive spans."""
        spans = []
        cursor = 0
        for segment in self.segments:
            if segment.start > cursor:
                spans.append((cursor, min(segment.start, limit) - 1))
            cursor = max(cursor, segment.end + 1)
        spans.append((cursor, limit - 1))
        return [(low, high) for low, high in spans if low <= high]

    def replace(self, parts: list[uuid.UUID], segment: store.Stored) -> None:
        gone = set(parts)
        self.segments = sorted(
            [s for s in self.segments if s.id not in gone] + [segment], key=lambda s: s.start
        )


async def _subject(conn: Conn, project_id: int, subject: str, summarize: Summarizer) -> int:
    limit = await store.verbatim_start(conn, project_id, subject)
    if limit is None:
        return 0
    tops = Tops(await store.top_segments(conn, project_id, subject))
    written = 0
    stale = False  # another writer wrote a segment meanwhile: read the tops again
    for level in range(1, MAX_LEVEL + 1):
        if stale:
            tops = Tops(await store.top_segments(conn, project_id, subject))
            stale = False
        if level == 1:
            loose = await store.loose_turns(conn, project_id, subject, tops.spans_below(limit))
            units = [Unit(t.id, t.offset, t.offset, 1) for t in loose if t.formed]
            nexts = [t.next for t in loose if t.formed]
        else:
            below = tops.at_level(level - 1)
            units = [Unit(s.id, s.start, s.end, s.covered) for s in below]
            closable = (
                any(s.level >= level and s.start > units[0].end for s in tops.segments)
                if units
                else False
            )
            if len(units) < FANOUT and not (len(units) >= SHORTEST and closable):
                continue
            nexts = await store.next_turns(conn, project_id, subject, [u.end for u in units])
        for run in plan(units, nexts, tops.closer(level)):
            parts = [unit.ref for unit in run]
            if level == 1:
                texts = await store.turn_texts(conn, parts)
            else:
                texts = await store.summaries(conn, parts)
            segment = await store.insert(
                conn,
                store.NewSegment(
                    project_id=project_id,
                    subject=subject,
                    level=level,
                    start=run[0].start,
                    end=run[-1].end,
                    covered=sum(unit.covered for unit in run),
                    summary=await summarize(texts),
                    parts=parts,
                ),
            )
            if segment is None:
                stale = True
            else:
                tops.replace(parts, segment)
                written += 1
    return written


async def write_segments(conn: Conn, project_id: int, summarize: Summarizer) -> int:
    """Write the segments a project's formed turns call for; returns how many were written.

    Per data subject: level 1 over runs of formed turns older than the newest ones kept
    verbatim, then each level over adjacent segments of the level below, up to the top level.
    Calling it again writes nothing new. Each segment is written with its sources atomically
    (its own transaction with `conn` in autocommit mode, else a savepoint in the caller's); a
    summarizer failure propagates and writes nothing of the segment it was summarizing.
    """
    await store.sweep_orphans(conn, project_id)
    written = 0
    for subject in await store.subjects(conn, project_id):
        written += await _subject(conn, project_id, subject, summarize)
    return written


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[^\W_]+")
_COMMON = frozenset(
    re.findall(
        r"\S+",
        "the and for are but not you your yours with this that have has had was were will would"
        " can could should what when where which who why how all any our out its it's they them"
        " their there then than from into about just also very really some more most been being"
        " did does doing don't i'm i've i'll let let's sure okay yes yeah user assistant system"
        " tool",
    )
)
EXTRACT_SENTENCES = 3  # at most this many sentences in an extractive summary
EXTRACT_CHARACTERS = 480  # and at most this many characters
SENTENCE_CHARACTERS = 200  # a longer sentence is clipped


def _words(sentence: str) -> set[str]:
    return {
        w for w in (m.lower() for m in _WORD.findall(sentence)) if len(w) > 2 and w not in _COMMON
    }


def extract(texts: list[str]) -> str:
    """The most central sentences of `texts`, in their order: deterministic, no model.

    A sentence scores the summed frequency (over all the texts) of its distinct content words,
    damped by the square root of their number; ties go to the earlier sentence, repeats count
    once, and the chosen sentences stay within a few hundred characters.
    """
    sentences: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for match in _SENTENCE.finditer(text):
            sentence = " ".join(match.group().split())
            if sentence and sentence.lower() not in seen:
                seen.add(sentence.lower())
                sentences.append(sentence)
    words = [_words(sentence) for sentence in sentences]
    frequency = Counter(word for found in words for word in found)

    def score(index: int) -> float:
        found = words[index]
        return sum(frequency[w] for w in found) / math.sqrt(len(found)) if found else 0.0

    ranked = sorted(range(len(sentences)), key=lambda i: (-score(i), i))
    chosen: list[int] = []
    spent = 0
    for index in ranked:
        if len(chosen) == EXTRACT_SENTENCES:
            break
        sentence = sentences[index]
        if len(sentence) > SENTENCE_CHARACTERS:
            sentence = sentence[: SENTENCE_CHARACTERS - 1].rstrip() + "…"
            sentences[index] = sentence
        if chosen and spent + len(sentence) + 1 > EXTRACT_CHARACTERS:
            continue
        chosen.append(index)
        spent += len(sentence) + 1
    return " ".join(sentences[index] for index in sorted(chosen))


async def extractive_summary(texts: list[str]) -> str:
    """The summarizer used when no model is configured (see `extract`)."""
    return extract(texts)


SUMMARY_PROMPT = (
    "You write the long-term memory of a conversation. Summarize the numbered passages below"
    " in at most five sentences, in the third person. Keep names, dates, numbers, places,"
    " decisions, preferences and commitments; add nothing the passages do not say. Reply with"
    " the summary text only."
)
PASSAGE_CHARACTERS = 4_000  # each passage sent to the model is clipped to this
SUMMARY_TOKENS = 320  # the output limit of a summary: five sentences and some room


class ModelSummarizer:
    """Summaries from an OpenAI-compatible chat model at temperature 0, through a `ChatModel`
    (made from `ModelClientSettings`: base URL, model, key variable, allowed hosts, timeout and
    retries; a host not allowed is refused there), at most `SUMMARY_TOKENS` tokens each (a
    reply cut there is kept as it is). A failed call or an empty reply raises `ModelError`,
    whose message holds no model text. The caller owns and closes the client.
    """

    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat

    async def __call__(self, texts: list[str]) -> str:
        passages = "\n\n".join(
            f"[{number}] {text[:PASSAGE_CHARACTERS]}" for number, text in enumerate(texts, 1)
        )
        reply = await self.chat.complete(
            [
                {"role": "system", "content": SUMMARY_PROMPT},
                {"role": "user", "content": passages},
            ],
            max_tokens=SUMMARY_TOKENS,
        )
        summary = reply.strip()
        if not summary:
            raise ModelError("summary reply is empty")
        return summary
