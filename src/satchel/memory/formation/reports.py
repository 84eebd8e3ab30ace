"""The report pass: partition the project's fact graph into communities, drop the reports of
communities that changed, and write (by the formation model, else extractively) and embed the
missing ones, a bounded number per pass."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from satchel.memory.config import ModelClientSettings
from satchel.memory.formation.communities import MAX_MEMBERS, Community, Edge, communities
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

REPORTS_PER_PASS = 4  # reports one worker pass writes per project
EXTRACTIVE = "extractive/1"
TITLE_NAMES = 3  # entity names an extractive title is made of
MAX_TITLE_CHARS = 200
MAX_SUMMARY_CHARS = 2_000
MAX_INPUT_CHARS = 8_000  # fact statements the model reads, whole ones only
REPORT_TOKENS = 800
IMPORTANCE_HALF = 8  # a community of this many facts has importance 0.5

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


class Reporter:
    """Writes a project's missing reports with the formation model (None: extractive) and the
    embedder (None: reports without vectors); remembers each project's last partition."""

    def __init__(self, model: ChatModel | None, embedder: Embedder | None) -> None:
        self.model = model
        self.embedder = embedder
        self.partitions: dict[int, tuple[tuple[Edge, ...], list[Community]]] = {}
        self.settled: dict[int, tuple[TurnState, int]] = {}  # each project's, at its last
        # pass that left nothing to write or embed

    async def themes(self, conn: Conn, project_id: int) -> list[Theme]:
        """The project's communities small enough to report, with their facts, coarsest level
        first, then most facts first."""
        found = await store.graph_facts(conn, project_id, normalize(SPEAKER))
        pairs = Counter((f.subject_entity_id, f.object_entity_id) for f in found)
        edges = tuple(sorted((one, other, weight) for (one, other), weight in pairs.items()))
        known = self.partitions.get(project_id)
        if known is None or known[0] != edges:
            known = (edges, await asyncio.to_thread(communities, edges))
            self.partitions[project_id] = known
        themes = []
        for community in known[1]:
            if len(community.members) > MAX_MEMBERS:
                continue
            members = set(community.members)
            facts = {
                f.id: f.version
                for f in found
                if f.subject_entity_id in members and f.object_entity_id in members
            }
            themes.append(Theme(community, facts))
        themes.sort(key=lambda t: (t.community.level, -len(t.facts), t.community.id))
        return themes

    async def _state(self, conn: Conn, project_id: int) -> tuple[TurnState, int]:
        """What a pass depends on: the project's turns, and its reports (a fact change removes
        the reports drawn on it)."""
        return await turn_state(conn, project_id), await store.count(conn, project_id)

    async def run(self, conn: Conn, project_id: int, limit: int) -> list[Written]:
        """Drop the reports whose community is gone or whose facts changed, then write up to
        `limit` missing ones and embed the reports that lack a vector of the embedder. A
        project whose turns and reports are as they were at its last settled pass is not read
        again."""
        if self.settled.get(project_id) == await self._state(conn, project_id):
            return []
        themes = await self.themes(conn, project_id)
        current = {theme.community.id: theme.facts for theme in themes}
        stored = await store.written(conn, project_id)
        stale = [cid for cid, facts in stored.items() if current.get(cid) != facts]
        if stale:
            await store.drop(conn, project_id, stale)
        done: list[Written] = []
        for theme in themes:
            if len(done) >= limit:
                break
            if theme.community.id in stored and theme.community.id not in stale:
                continue
            written = await self._write(conn, project_id, theme)
            if written is None:
                return done  # its facts changed meanwhile: the next pass starts again
            done.append(written)
        if len(done) < limit and await self._embed_missing(conn, project_id):
            self.settled[project_id] = await self._state(conn, project_id)
        return done

    async def _embed_missing(self, conn: Conn, project_id: int) -> bool:
        """Give the project's reports without a vector of the embedder one (written before the
        embedder was there, or under another); whether none is left."""
        if self.embedder is None:
            return True
        for report_id, text in await store.unembedded(conn, project_id, self.embedder.identity):
            vector = await self._embed(text)
            if vector is None:
                return False
            await store.embedded(conn, report_id, self.embedder.identity, vector)
        return True

    async def _write(self, conn: Conn, project_id: int, theme: Theme) -> Written | None:
        facts = await store.community_facts(conn, list(theme.facts))
        title, summary, author = "", "", EXTRACTIVE
        if self.model is not None:
            try:
                title, summary = await model_report(self.model, facts)
                author = f"{self.model.model} {PROMPT_ID}"
            except ModelError as exc:
                log.warning(
                    "report of %s in project %d written extractively: %s",
                    theme.community.id,
                    project_id,
                    exc,
                )
        if author == EXTRACTIVE:
            title, summary = extractive_report(facts)
        vector = await self._embed(f"{title}\n{summary}")
        community = theme.community
        report = store.NewReport(
            project_id=project_id,
            community_id=community.id,
            level=community.level,
            parent=community.parent,
            title=title,
            summary=summary,
            importance=theme.importance,
            written_by=author,
            members=community.members,
            facts=theme.facts,
            sources=tuple(sorted({source for fact in facts for source in fact.sources})),
            embedder=self.embedder.identity if vector is not None and self.embedder else None,
            embedding=vector,
        )
        if not await store.write(conn, report):
            return None
        return Written(community.id, community.level, title, author, len(facts), vector is not None)

    async def _embed(self, text: str) -> Packed | None:
        if self.embedder is None:
            return None
        try:
            vectors = await asyncio.to_thread(self.embedder.embed, [text])
        except EmbedderUnavailable as exc:
            log.warning("a report was written without a vector: %s", exc)
            return None
        return packed(vectors[0])


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
