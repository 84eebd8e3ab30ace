"""Recall: anchor a question on known entities (exact names, else similar spellings), walk facts
1..2 hops, add theme reports and passages of observed turns, charge a character budget."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Invalid
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.passages.embedder import Embedder
from satchel.memory.service.questions import QuestionRefused, terms, written
from satchel.memory.service.recall_passages import RecalledPassage, Searched, passages_of
from satchel.memory.service.reports import RecalledReport, charged, embed_for_reports, recalled
from satchel.memory.spelling import offered, ranked
from satchel.memory.store.citations import Evidence, facts_touching
from satchel.memory.store.database import Conn, autocommitting, spare_connection
from satchel.memory.store.entities import Entity, entities_named, entities_spelled_like, normalize
from satchel.memory.store.formation import formed_without_model
from satchel.memory.store.hops import HopRow
from satchel.memory.store.passage_scope import Scope
from satchel.memory.store.vectors import Packed

SURFACES = ("facts", "reports", "passages")
FACTS_NOT_FORMED = "facts_not_formed"  # turns formed with no extraction model: no facts of theirs
MAX_ANCHORS = 256
FANOUT = 64  # facts per entity and side (subject, object) a walk looks at
MAX_SIMILAR = 4  # anchors found by a similar spelling, when no name matched exactly
SIMILAR_PER_WINDOW = 64  # entities sharing a window's spelling key that are scored


@dataclass(frozen=True, slots=True)
class Controls:
    """The effective controls of one recall (echoed in its answer)."""

    max_characters: int
    max_rows: int
    source_roles: list[str]
    hops: int
    surfaces: list[str]
    themes: bool


@dataclass(frozen=True, slots=True)
class Ask:
    """One recall: the question, the person it narrows to, the two times, the controls."""

    question: str
    data_subject_id: str | None
    as_of: datetime
    as_known_at: datetime | None
    controls: Controls
    surfaces_named: bool


def controls_of(
    max_characters: int | None,
    source_roles: Sequence[str] | None,
    hops: int | None,
    surfaces: Sequence[str] | None,
    themes: bool | None,
    *,
    budget: int,
    max_rows: int,
) -> Controls:
    """The effective controls: defaults filled in, the budget checked, hops clamped to 1..2."""
    if max_characters is not None and max_characters > budget:
        raise Invalid(
            f"max_characters: must be at most the server's budget, {budget}",
            "invalid_recall_controls",
        )
    return Controls(
        max_characters=budget if max_characters is None else max_characters,
        max_rows=max_rows,
        source_roles=list(source_roles or ["user"]),
        hops=min(2, max(1, hops or 1)),
        surfaces=list(surfaces or SURFACES),
        themes=bool(themes),
    )


def ask_of(
    question: str,
    data_subject_id: str | None,
    as_of: datetime | None,
    as_known_at: datetime | None,
    controls: Controls,
    *,
    surfaces_named: bool,
) -> Ask:
    """One recall of `question`: of one person when a subject is given, true `as_of` (default
    now) as known `as_known_at` (default now)."""
    return Ask(
        question=question,
        data_subject_id=data_subject_id or None,
        as_of=as_of or datetime.now(UTC),
        as_known_at=as_known_at,
        controls=controls,
        surfaces_named=surfaces_named,
    )


@dataclass(frozen=True, slots=True)
class Anchor:
    entity_id: str
    name: str
    type: str
    matched: str


@dataclass(frozen=True, slots=True)
class Cite:
    observation_id: str
    source_ordinal: int
    quote: str
    byte_start: int
    byte_end: int
    context: str
    context_start: int
    context_complete: bool


@dataclass(slots=True)
class RecalledFact:
    fact_id: str
    subject: str
    predicate: str
    object: str
    statement: str
    confidence: float
    valid_from: datetime
    valid_until: datetime | None
    anchored_on: str
    source_role: str
    hops: int
    path: list[str]
    via: list[str]
    evidence: Cite
    co_derived_with: list[str] = field(default_factory=list)

    def charge(self) -> int:
        """Characters (code points) the fact takes from the budget."""
        texts = [self.subject, self.predicate, self.object, self.statement, self.source_role]
        texts += [self.evidence.quote, self.evidence.context, *self.path, *self.via]
        return sum(len(text) for text in texts)


@dataclass(frozen=True, slots=True)
class Reach:
    terms: int
    anchored: int
    named_nothing_known: bool
    facts_per_anchor: dict[str, int]


@dataclass(frozen=True, slots=True)
class Bundle:
    controls: Controls
    anchors: list[Anchor]
    facts: list[RecalledFact]
    reports: list[RecalledReport]
    passages: list[RecalledPassage]
    truncated: bool
    characters: int
    degraded: list[str]
    reach: Reach


@dataclass(frozen=True, slots=True)
class _Step:
    """A fact the walk reached: from which anchor, through which entity and fact."""

    row: HopRow
    evidence: Evidence | None
    hops: int
    anchor: uuid.UUID
    path: list[str]
    via: list[str]


@dataclass(frozen=True, slots=True)
class _Link:
    anchor: uuid.UUID
    path: list[str]
    via: list[str]


class _Walk:
    """Facts gathered hop by hop, each once, under the per-entity fanout and the row cap."""

    def __init__(self, conn: Conn, project_id: int, ask: Ask) -> None:
        self.conn = conn
        self.project_id = project_id
        self.ask = ask
        self.steps: dict[uuid.UUID, _Step] = {}
        self.cut = False

    async def hop(self, ends: dict[uuid.UUID, _Link], hops: int) -> None:
        cap = self.ask.controls.max_rows + 1
        limit = 2 * cap + 2 * len(ends)
        rows = await facts_touching(
            self.conn,
            self.project_id,
            list(ends),
            data_subject_id=self.ask.data_subject_id,
            roles=self.ask.controls.source_roles,
            as_of=self.ask.as_of,
            as_known_at=self.ask.as_known_at,
            fanout=FANOUT + 1,
            limit=limit,
        )
        self.cut |= len(rows) == limit
        per_side: Counter[tuple[uuid.UUID, bool]] = Counter()
        for row, evidence in rows:
            per_side[row.reached, row.on_subject] += 1
            if per_side[row.reached, row.on_subject] > FANOUT:
                self.cut = True
            elif row.id not in self.steps and len(self.steps) < cap:
                link = ends[row.reached]
                self.steps[row.id] = _Step(row, evidence, hops, link.anchor, link.path, link.via)

    def frontier(self, anchors: set[uuid.UUID]) -> dict[uuid.UUID, _Link]:
        """The entities one hop beyond the anchors, each with the first fact that reached it."""
        ends: dict[uuid.UUID, _Link] = {}
        for step in list(self.steps.values()):
            row = step.row
            object_name = row.object_entity_name or row.object
            if row.on_subject:
                other, names = row.object_entity_id, [row.subject, object_name]
            else:
                other, names = row.subject_entity_id, [object_name, row.subject]
            if other is None or other in anchors or other in ends:
                continue
            ends[other] = _Link(step.anchor, names, [str(row.id)])
        return ends


def _cite(evidence: Evidence | None) -> Cite:
    if evidence is None:
        return Cite("", 0, "", 0, 0, "", 0, False)
    window = evidence.window()
    return Cite(
        str(evidence.observation_id),
        evidence.source_ordinal,
        evidence.quote,
        evidence.byte_start,
        evidence.byte_end,
        window.text,
        window.start,
        window.complete,
    )


def _fact(step: _Step, cite: Cite) -> RecalledFact:
    row = step.row
    return RecalledFact(
        fact_id=str(row.id),
        subject=row.subject,
        predicate=row.predicate,
        object=row.object,
        statement=row.statement,
        confidence=row.confidence,
        valid_from=row.valid_from,
        valid_until=row.valid_until,
        anchored_on=str(step.anchor),
        source_role=row.source_role,
        hops=step.hops,
        path=step.path,
        via=step.via,
        evidence=cite,
    )


def _co_derive(facts: list[RecalledFact]) -> None:
    """Link facts drawn from the same message of a source about the same subject."""
    groups: dict[tuple[str, int, str], list[RecalledFact]] = {}
    for fact in facts:
        key = (fact.evidence.observation_id, fact.evidence.source_ordinal, normalize(fact.subject))
        groups.setdefault(key, []).append(fact)
    for group in groups.values():
        for fact in group:
            fact.co_derived_with = [other.fact_id for other in group if other is not fact]


def _anchors(found_terms: list[str], matched: list[Entity]) -> list[Anchor]:
    order = {term: index for index, term in enumerate(found_terms)}
    exact = sorted(matched, key=lambda entity: (order[entity.normalized], entity.id))
    return [Anchor(str(e.id), e.name, e.kind, e.normalized) for e in exact]


async def _similar(conn: Conn, project_id: int, ask: Ask) -> list[Anchor]:
    """Up to 4 entities the question names under a close spelling ("Jon" for "John"), each
    marked `similar:<similarity>:<window>`."""
    windows = offered(written(ask.question))
    if not windows:
        return []
    found = await entities_spelled_like(
        conn, project_id, ask.data_subject_id, windows, SIMILAR_PER_WINDOW
    )
    return [
        Anchor(
            str(s.entity.id),
            s.entity.name,
            s.entity.kind,
            f"similar:{s.similarity:.2f}:{s.window}",
        )
        for s in ranked(found)[:MAX_SIMILAR]
    ]


def _scope(project_id: int, ask: Ask) -> Scope:
    """Where recall's passages are searched: the person's observed turns, of the chosen roles."""
    roles = tuple(ask.controls.source_roles)
    return Scope(project_id, ask.data_subject_id or "", roles, turns_only=True)


async def answer(
    pool: AsyncConnectionPool, project_id: int, ask: Ask, caches: SearchCaches
) -> Bundle:
    """Answer `ask` in the project, its passages searched beside the facts on a spare connection
    when the pool has one; a question recall cannot read is `invalid_question`."""
    read = {"passages", "reports"} & set(ask.controls.surfaces)
    embedder = await caches.embedders.get() if read else None
    try:
        async with autocommitting(pool) as conn, spare_connection(pool) as spare:
            return await recall(conn, project_id, ask, embedder, spare, caches=caches)
    except QuestionRefused as refused:
        raise Invalid(f"question: {refused}", "invalid_question") from None


def _reports_wanted(ask: Ask) -> bool:
    """Whether reports may answer: asked for, and not withheld (a recall of one person)."""
    return "reports" in ask.controls.surfaces and ask.data_subject_id is None


async def recall(
    conn: Conn,
    project_id: int,
    ask: Ask,
    embedder: Embedder | None = None,
    spare: Conn | None = None,
    *,
    caches: SearchCaches,
) -> Bundle:
    """Answer `ask` from the project's facts, theme reports and passages.

    With a `spare` connection the passage search starts first, at once (its question is in
    the embedder and its first statements sent before the facts are asked for), and runs on
    it beside the facts (in the database too). Without one it runs after the facts on `conn`:
    a connection runs one statement at a time, and the search's pipelines cannot share it with
    statements of another task. The reports' question vector is started at once too when
    `themes` asks for reports whatever is named; otherwise only once no name matched exactly.
    `caches`: what the application's passage searches keep.
    """
    started = None
    themed = None
    if _reports_wanted(ask) and ask.controls.themes:
        themed = embed_for_reports(embedder, ask.question, caches)
    if "passages" in ask.controls.surfaces and spare is not None:
        search = passages_of(spare, _scope(project_id, ask), ask.question, embedder, caches)
        started = asyncio.Task(search, loop=asyncio.get_running_loop(), eager_start=True)
    try:
        return await _recall(conn, project_id, ask, embedder, caches, started, themed)
    finally:
        if themed is not None:
            await asyncio.wait([themed])
        if started is not None:
            await asyncio.wait([started])
            if not started.cancelled():
                started.exception()  # a search whose answer was not needed fails quietly


async def _recall(
    conn: Conn,
    project_id: int,
    ask: Ask,
    embedder: Embedder | None,
    caches: SearchCaches,
    started: asyncio.Future[Searched] | None,
    themed: asyncio.Future[Packed | None] | None,
) -> Bundle:
    controls = ask.controls
    found_terms = terms(ask.question)
    matched: list[Entity] = []
    if found_terms:
        matched = await entities_named(
            conn, project_id, ask.data_subject_id, found_terms, MAX_ANCHORS + 1
        )
    if len(matched) > MAX_ANCHORS:
        raise QuestionRefused("question matches too many names; ask about fewer")
    wants_facts = "facts" in controls.surfaces
    anchors = _anchors(found_terms, matched) if wants_facts else []
    if wants_facts and not matched and found_terms:
        anchors = await _similar(conn, project_id, ask)
    degraded: list[str] = []
    facts: list[RecalledFact] = []
    truncated = spent = False
    characters = 0
    if wants_facts and await formed_without_model(conn, project_id, ask.data_subject_id):
        degraded.append(FACTS_NOT_FORMED)
    if wants_facts and not anchors and ask.surfaces_named:
        degraded.append("semantic_anchors")
    if anchors:
        walk = _Walk(conn, project_id, ask)
        ends = {uuid.UUID(a.entity_id): _Link(uuid.UUID(a.entity_id), [], []) for a in anchors}
        await walk.hop(ends, 1)
        if controls.hops == 2 and len(walk.steps) <= controls.max_rows:
            frontier = walk.frontier(set(ends))
            if frontier:
                await walk.hop(frontier, 2)
        steps = list(walk.steps.values())
        truncated = walk.cut or len(steps) > controls.max_rows
        steps = steps[: controls.max_rows]
        for step in steps:
            fact = _fact(step, _cite(step.evidence))
            cost = fact.charge()
            if characters + cost > controls.max_characters:
                truncated = spent = True
                break
            characters += cost
            facts.append(fact)
        if any(not fact.evidence.context for fact in facts):
            degraded.append("citation_context")
        _co_derive(facts)
    unnamed = not anchors or not matched  # reports answer when no name matched exactly
    reports: list[RecalledReport] = []
    if "reports" in controls.surfaces and (controls.themes or unnamed) and not spent:
        if themed is None and _reports_wanted(ask):
            themed = embed_for_reports(embedder, ask.question, caches)
        surfaced = await recalled(conn, project_id, ask.data_subject_id, embedder, themed)
        if surfaced is None and ask.surfaces_named:
            degraded.append("reports_withheld_for_subject" if ask.data_subject_id else "reports")
        reports, characters, spent = charged(surfaced or [], characters, controls.max_characters)
        truncated |= spent
    passages: list[RecalledPassage] = []
    if "passages" in controls.surfaces and not spent:
        found, vectored = await (
            started or passages_of(conn, _scope(project_id, ask), ask.question, embedder, caches)
        )
        for passage in found:
            if characters + passage.charge() > controls.max_characters:
                truncated = True
                break
            characters += passage.charge()
            passages.append(passage)
        if ask.surfaces_named and not vectored:
            degraded.append("passages")
    per_anchor = Counter(fact.anchored_on for fact in facts)
    anchored = len(matched)  # exact names only: similar spellings are a guess
    return Bundle(
        controls=controls,
        anchors=anchors,
        facts=facts,
        reports=reports,
        passages=passages,
        truncated=truncated,
        characters=characters,
        degraded=degraded,
        reach=Reach(
            terms=len(found_terms),
            anchored=anchored,
            named_nothing_known=bool(found_terms) and anchored == 0,
            facts_per_anchor=dict(per_anchor),
        ),
    )
