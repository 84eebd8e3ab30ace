"""The report pass: partition the project's fact graph into communities, drop the reports of
communities that changed, and write (by the formation model, else extractively) and embed the
missing ones, a bounded number per pass."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from satchel.memory.config import ModelClientSettings
from satchel.memory.formation.communities import MAX_MEMBERS, Community, communities
from satchel.memory.formation.extraction import SPEAKER
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.passages.embedder import Embedder, EmbedderUnavailable, load_embedder
from satchel.memory.store import formation
from satchel.memory.store import reports as store
from satchel.memory.store import retention as projects
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import normalize
from satchel.memory.store.log import TurnState, turn_state
from satchel.memory.store.vectors import Packed, packed

log = logging.getLogger("satchel.memory.worker")

REPORTS_PER_PASS = 4  # model-written reports one pass writes per project
EXTRACTIVE_PER_PASS = 64  # extractive reports one pass writes per project (one embedding call)
EXTRACTIVE = "extractive/1"
TITLE_NAMES = 3  # entity names an extractive title is made of
MAX_TITLE_CHARS = 200
MAX_SUMMARY_CHARS = 2_000
MAX_INPUT_CHARS = 8_000  # fact statements the model reads, whole ones only
REPORT_TOKENS = 800
IMPORTANCE_HALF = 8  # a community of this many facts has importance 0.5
WAITING = 0.5  # seconds between two looks for new turns while a project's graph is partitioned

Waiting = Callable[[], Awaitable[bool]]  # whether new turns wait: a report pass stops for them

REPORT_PROMPT = """\
You write a short report on one theme of a person's memory, from the facts listed (one per \
line). Answer with one JSON object: {"title": "...", "summary": "..."} and nothing else. The \
title names the theme in a few words; the summary says in a few sentences what the facts hold \
together. Use only what the facts state; invent nothing."""
PROMPT_ID = "report/1:" + hashlib.sha256(REPORT_PROMPT.encode()).hexdigest()[:12]
SCHEMA_NAME = "report"
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
        "summary": {"type": "string", "maxLength": MAX_SUMMARY_CHARS},
    },
    "required": ["title", "summary"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Written:
    """A report a pass wrote: its community, title, author and whether it has a vector."""

    community_id: str
    level: int
    title: str
    written_by: str
    facts: int
    embedded: bool


@dataclass(frozen=True, slots=True)
class Theme:
    """A community and the facts (id: version) joining its members."""

    community: Community
    facts: dict[uuid.UUID, uuid.UUID]

    @property
    def importance(self) -> float:
        """Grows with the facts the community holds, towards 1; its own, never another's."""
        return len(self.facts) / (len(self.facts) + IMPORTANCE_HALF)


def whole(texts: list[str], limit: int, separator: str) -> str:
    """As many of `texts` as fit in `limit` characters, joined, none cut."""
    kept: list[str] = []
    used = 0
    for text in texts:
        cost = len(text) + (len(separator) if kept else 0)
        if used + cost > limit:
            break
        kept.append(text)
        used += cost
    return separator.join(kept)


def extractive_report(facts: list[store.CommunityFact]) -> tuple[str, str]:
    """A title of the most connected entities' names, a summary of the facts' statements."""
    degree = Counter(name for fact in facts for name in (fact.subject, fact.object))
    names = [name for name, _ in sorted(degree.items(), key=lambda kv: (-kv[1], kv[0]))]
    title = whole(names[:TITLE_NAMES], MAX_TITLE_CHARS, ", ")
    summary = whole([fact.statement.strip() for fact in facts], MAX_SUMMARY_CHARS, " ")
    return title, summary


async def model_report(model: ChatModel, facts: list[store.CommunityFact]) -> tuple[str, str]:
    """Title and summary written by the model from the facts' statements (as many whole ones as
    fit `MAX_INPUT_CHARS`); a failed call or a reply without both is a `ModelError`."""
    lines = whole([fact.statement.strip() for fact in facts], MAX_INPUT_CHARS, "\n")
    reply = await model.complete_json(
        [{"role": "system", "content": REPORT_PROMPT}, {"role": "user", "content": lines}],
        schema=REPORT_SCHEMA,
        name=SCHEMA_NAME,
        max_tokens=REPORT_TOKENS,
    )
    title, summary = reply.get("title"), reply.get("summary")
    if not isinstance(title, str) or not isinstance(summary, str):
        raise ModelError("report reply lacks a title or a summary")
    title, summary = title.strip(), summary.strip()
    if not title or not summary:
        raise ModelError("report reply has an empty title or summary")
    if len(title) > MAX_TITLE_CHARS or len(summary) > MAX_SUMMARY_CHARS:
        raise ModelError("report reply is longer than its schema allows")
    return title, summary


@dataclass(frozen=True, slots=True)
class Draft:
    """A report written but not yet stored: its theme, facts, text and author."""

    theme: Theme
    facts: list[store.CommunityFact]
    title: str
    summary: str
    written_by: str


def themes_of(found: list[store.GraphFact]) -> list[Theme]:
    """The communities of the facts' graph small enough to report, each with the facts joining
    two of its members, coarsest level first, then most facts first."""
    pairs = Counter((f.subject_entity_id, f.object_entity_id) for f in found)
    edges = tuple(sorted((one, other, weight) for (one, other), weight in pairs.items()))
    reported = [c for c in communities(edges) if len(c.members) <= MAX_MEMBERS]
    holding: dict[tuple[int, uuid.UUID], str] = {}  # (level, entity): its community there
    for community in reported:
        holding.update(((community.level, member), community.id) for member in community.members)
    levels = sorted({community.level for community in reported})
    facts: dict[str, dict[uuid.UUID, uuid.UUID]] = {c.id: {} for c in reported}
    for fact in found:
        for level in levels:
            one = holding.get((level, fact.subject_entity_id))
            if one is not None and one == holding.get((level, fact.object_entity_id)):
                facts[one][fact.id] = fact.version
    themes = [Theme(community, facts[community.id]) for community in reported]
    themes.sort(key=lambda t: (t.community.level, -len(t.facts), t.community.id))
    return themes


class Reporter:
    """Writes a project's missing reports with the formation model (None: extractive) and the
    embedder (None: reports without vectors); remembers each project's themes at its turns'
    state, and the state at which it last had nothing to do."""

    def __init__(self, model: ChatModel | None, embedder: Embedder | None) -> None:
        self.model = model
        self.embedder = embedder
        self.known: dict[int, tuple[TurnState, list[Theme]]] = {}
        self.settled: dict[int, tuple[TurnState, int]] = {}  # each project's, at its last
        # pass that left nothing to write or embed
        self.partitions: dict[int, tuple[TurnState, asyncio.Task[list[Theme]]]] = {}  # each
        # project's graph being partitioned, and the turns' state it was read at

    @property
    def per_pass(self) -> int:
        """Reports one pass writes: a few when each is a model call, more when extractive."""
        return REPORTS_PER_PASS if self.model is not None else EXTRACTIVE_PER_PASS

    async def themes(
        self, conn: Conn, project_id: int, turns: TurnState, waiting: Waiting | None = None
    ) -> list[Theme] | None:
        """The project's communities small enough to report, with their facts, coarsest level
        first, then most facts first; read again only when its turns changed (or a report
        could not be stored, `forget`). The graph is partitioned in a thread, one project's at
        a time; None when `waiting` says new turns wait first (the partition goes on, and a
        later pass takes it)."""
        known = self.known.get(project_id)
        if known is not None and known[0] == turns:
            return known[1]
        while True:
            partition = self.partitions.get(project_id)
            if partition is None:
                found = await store.graph_facts(conn, project_id, normalize(SPEAKER))
                partition = (turns, asyncio.create_task(asyncio.to_thread(themes_of, found)))
                self.partitions[project_id] = partition
            if not await _finished(partition[1], waiting):
                return None
            del self.partitions[project_id]
            if partition[0] == turns:  # else partitioned before its turns changed: again
                self.known[project_id] = (turns, partition[1].result())
                return self.known[project_id][1]

    def forget(self, project_id: int) -> None:
        """Read the project's facts again on its next pass."""
        self.known.pop(project_id, None)
        self.settled.pop(project_id, None)

    async def _state(self, conn: Conn, project_id: int) -> tuple[TurnState, int]:
        """What a pass depends on: the project's turns, and its reports (a fact change removes
        the reports drawn on it)."""
        return await turn_state(conn, project_id), await store.count(conn, project_id)

    async def run(
        self,
        conn: Conn,
        project_id: int,
        limit: int | None = None,
        waiting: Waiting | None = None,
    ) -> list[Written]:
        """Drop the reports whose community is gone or whose facts changed, then write up to
        `limit` (default `per_pass`) missing ones and embed the reports that lack a vector of
        the embedder. A project whose turns and reports are as they were at its last settled
        pass is not read again. `waiting` is asked while the graph is partitioned and before
        each report: once it says new turns wait, the pass stops with what it wrote."""
        state = await self._state(conn, project_id)
        if self.settled.get(project_id) == state:
            return []
        themes = await self.themes(conn, project_id, state[0], waiting)
        if themes is None:
            return []
        current = {theme.community.id: theme.facts for theme in themes}
        stored = await store.written(conn, project_id)
        stale = [cid for cid, facts in stored.items() if current.get(cid) != facts]
        if stale:
            await store.drop(conn, project_id, stale)
        missing = [t for t in themes if t.community.id not in stored or t.community.id in stale]
        limit = self.per_pass if limit is None else limit
        done, complete = await self._write(conn, project_id, missing[:limit], waiting)
        if not complete:
            self.forget(project_id)  # a fact changed meanwhile: read them again next pass
            return done
        if len(done) < len(missing[:limit]):  # stopped for new turns
            return done
        if len(missing) <= limit and await self._embed_missing(conn, project_id):
            self.settled[project_id] = await self._state(conn, project_id)
        return done

    async def _write(
        self, conn: Conn, project_id: int, themes: list[Theme], waiting: Waiting | None
    ) -> tuple[list[Written], bool]:
        """Write, embed (one batch) and store the reports of `themes`, up to the first before
        which `waiting` says new turns wait: those stored, and whether all drafted were
        (storing stops at one whose facts changed since they were read)."""
        drafts: list[Draft] = []
        for theme in themes:
            if waiting is not None and await waiting():
                break
            drafts.append(await self._draft(conn, project_id, theme))
        vectors = await self._embed([f"{d.title}\n{d.summary}" for d in drafts])
        done: list[Written] = []
        for draft, vector in zip(drafts, vectors, strict=True):
            community = draft.theme.community
            report = store.NewReport(
                project_id=project_id,
                community_id=community.id,
                level=community.level,
                parent=community.parent,
                title=draft.title,
                summary=draft.summary,
                importance=draft.theme.importance,
                written_by=draft.written_by,
                members=community.members,
                facts=draft.theme.facts,
                sources=tuple(sorted({s for fact in draft.facts for s in fact.sources})),
                embedder=self.embedder.identity if vector is not None and self.embedder else None,
                embedding=vector,
            )
            if not await store.write(conn, report):
                return done, False
            done.append(
                Written(
                    community.id,
                    community.level,
                    draft.title,
                    draft.written_by,
                    len(draft.facts),
                    vector is not None,
                )
            )
        return done, True

    async def _draft(self, conn: Conn, project_id: int, theme: Theme) -> Draft:
        """The theme's report as the model writes it, else extractive."""
        facts = await store.community_facts(conn, list(theme.facts))
        if self.model is not None:
            try:
                title, summary = await model_report(self.model, facts)
                return Draft(theme, facts, title, summary, f"{self.model.model} {PROMPT_ID}")
            except ModelError as exc:
                log.warning(
                    "report of %s in project %d written extractively: %s",
                    theme.community.id,
                    project_id,
                    exc,
                )
        title, summary = extractive_report(facts)
        return Draft(theme, facts, title, summary, EXTRACTIVE)

    async def _embed_missing(self, conn: Conn, project_id: int) -> bool:
        """Give the project's reports without a vector of the embedder one (written before the
        embedder was there, or under another); whether none is left."""
        if self.embedder is None:
            return True
        found = await store.unembedded(conn, project_id, self.embedder.identity)
        vectors = await self._embed([text for _, text in found])
        if any(vector is None for vector in vectors):
            return False
        for (report_id, _), vector in zip(found, vectors, strict=True):
            assert vector is not None
            await store.embedded(conn, report_id, self.embedder.identity, vector)
        return True

    async def _embed(self, texts: list[str]) -> list[Packed | None]:
        """The texts' vectors in one call (each None without a working embedder)."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        try:
            rows = await asyncio.to_thread(self.embedder.embed, texts)
        except EmbedderUnavailable as exc:
            log.warning("reports were written without vectors: %s", exc)
            return [None] * len(texts)
        return [packed(row) for row in rows]


async def _finished(task: asyncio.Task[list[Theme]], waiting: Waiting | None) -> bool:
    """Wait for `task`; False as soon as `waiting` says new turns wait (the task goes on)."""
    while waiting is not None and not task.done():
        await asyncio.wait([task], timeout=WAITING)
        if not task.done() and await waiting():
            return False
    await asyncio.wait([task])
    return True


async def rebuild_reports(
    url: str, settings: ModelClientSettings | None, project: str, limit: int
) -> list[Written]:
    """Write up to `limit` missing reports of `project` now, under the project's worker lock, with
    the formation model of `settings` (None: extractive) and the environment's embedder."""
    try:
        embedder: Embedder | None = await asyncio.to_thread(load_embedder)
    except EmbedderUnavailable as exc:
        log.warning("reports will be written without vectors: %s", exc)
        embedder = None
    model = ChatModel(settings) if settings else None
    reporter = Reporter(model, embedder)
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            project_id = await projects.project_id(conn, project)
            if project_id is None:
                raise LookupError(f"no project is named {project!r}: see satchel tokens list")
            if not await formation.try_lock(conn, project_id):
                raise LookupError(
                    f"a worker is working on project {project!r} now: run this again shortly"
                )
            try:
                return await reporter.run(conn, project_id, limit)
            finally:
                await formation.unlock(conn, project_id)
    finally:
        if model is not None:
            await model.aclose()
