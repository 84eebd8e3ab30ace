"""Theme reports read by meaning: report candidates (ranked previews) and recall's reports surface
(the best few and the best one's children), both by cosine similarity to the question's vector."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Invalid, Unavailable
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.passages.embedder import Embedder
from satchel.memory.passages.search import embed_question
from satchel.memory.store import reports as store
from satchel.memory.store.database import Conn, autocommitting
from satchel.memory.store.vectors import Packed

DEFAULT_LIMIT = 10
TITLE_PREVIEW_BYTES = 256
SUMMARY_PREVIEW_BYTES = 1_024
BEST = 3  # reports recall answers by similarity
CHILDREN = 5  # reports of the best one's finer communities recall adds


@dataclass(frozen=True, slots=True)
class Preview:
    """A text's first bytes (whole characters only), its size, and whether it was cut."""

    text: str
    size: int
    truncated: bool


def preview(text: str, limit: int) -> Preview:
    encoded = text.encode("utf-8")
    kept = encoded[:limit].decode("utf-8", errors="ignore")
    return Preview(kept, len(encoded), len(encoded) > limit)


@dataclass(frozen=True, slots=True)
class Candidate:
    report: store.RankedReport
    title: Preview
    summary: Preview


@dataclass(frozen=True, slots=True)
class CandidatePage:
    generation_id: str
    target_count: int
    build_state: str
    approximate: bool
    candidates: list[Candidate]


def generation_id(project_id: int, embedder: str) -> str:
    """The name of a project's report vectors under one embedder."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"satchel:reports:{project_id}:{embedder}"))


def checked_limit(limit: int | None, candidates: int | None) -> int:
    """The limit a candidates query answers, or `invalid_report_candidate_query`."""
    limit = DEFAULT_LIMIT if limit is None else limit
    if 0 < (candidates or 0) < limit:
        raise Invalid(
            f"candidates: is {candidates}, must be 0 or at least limit ({limit})",
            "invalid_report_candidate_query",
        )
    return limit


def unavailable() -> Unavailable:
    return Unavailable(
        "report candidates are unavailable: this deployment has no embedding model to read"
        " the question with",
        "report_candidates_unavailable",
    )


async def candidates(
    pool: AsyncConnectionPool, project_id: int, question: str, limit: int, caches: SearchCaches
) -> CandidatePage:
    """The project's `limit` reports nearest `question` (every report compared: exact), or
    `report_candidates_unavailable` when no embedder can read it."""
    embedder = await caches.embedders.get()
    if embedder is None:
        raise unavailable()
    embedding = embed_question(embedder, question, caches.questions)
    try:
        async with autocommitting(pool) as conn:
            total, vectored = await store.counts(conn, project_id, embedder.identity)
            vector = await embedding
            if vector is None:
                raise unavailable()
            found = await store.nearest(conn, project_id, embedder.identity, vector, limit)
    finally:
        await asyncio.wait([embedding])
    return CandidatePage(
        generation_id=generation_id(project_id, embedder.identity),
        target_count=total,
        build_state="ready" if vectored == total else "building",
        approximate=False,
        candidates=[
            Candidate(
                report,
                preview(report.title, TITLE_PREVIEW_BYTES),
                preview(report.summary, SUMMARY_PREVIEW_BYTES),
            )
            for report in found
        ],
    )


@dataclass(frozen=True, slots=True)
class RecalledReport:
    community_id: str
    report_id: str
    title: str
    summary: str
    importance: float
    similarity: float
    level: int
    parent: str | None
    sources: list[str]

    def charge(self) -> int:
        """Characters (code points) the report takes from the budget."""
        return len(self.title) + len(self.summary)


async def themed(
    conn: Conn, project_id: int, embedder: Embedder, vector: Packed
) -> list[RecalledReport]:
    """Recall's reports: the `BEST` nearest the question, then up to `CHILDREN` children of the
    nearest, in one statement."""
    found = await store.themes(conn, project_id, embedder.identity, vector, BEST, CHILDREN)
    return [
        RecalledReport(
            community_id=r.community_id,
            report_id=str(r.id),
            title=r.title,
            summary=r.summary,
            importance=r.importance,
            similarity=r.similarity,
            level=r.level,
            parent=r.parent,
            sources=[str(source) for source in r.sources],
        )
        for r in found
    ]


def embed_for_reports(
    embedder: Embedder | None, question: str, caches: SearchCaches
) -> asyncio.Future[Packed | None] | None:
    """The question's vector for the reports surface, started at once in a thread (None: no
    embedder)."""
    return None if embedder is None else embed_question(embedder, question, caches.questions)


async def recalled(
    conn: Conn,
    project_id: int,
    data_subject_id: str | None,
    embedder: Embedder | None,
    embedding: asyncio.Future[Packed | None] | None,
) -> list[RecalledReport] | None:
    """Recall's reports (see `themed`), or None when they are withheld (a recall of one person:
    a report may draw on others') or no embedder could read the question."""
    vector = None if embedding is None or data_subject_id else await embedding
    if embedder is None or vector is None:
        return None
    return await themed(conn, project_id, embedder, vector)


def charged(
    found: list[RecalledReport], characters: int, budget: int
) -> tuple[list[RecalledReport], int, bool]:
    """The reports that fit the budget in order, the characters spent with them, and whether
    one did not fit."""
    kept: list[RecalledReport] = []
    for report in found:
        if characters + report.charge() > budget:
            return kept, characters, True
        characters += report.charge()
        kept.append(report)
    return kept, characters, False
