"""Recall's passages surface: the best few messages of observed turns for the question."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from satchel.memory.passages.caches import SearchCaches
from satchel.memory.passages.embedder import Embedder
from satchel.memory.passages.search import search_passages
from satchel.memory.store.database import Conn
from satchel.memory.store.passage_scope import Scope

MAX_PASSAGES = 8
PASSAGE_CANDIDATES = 40  # per ranking (full text, vectors): enough to choose 8 from


@dataclass(frozen=True, slots=True)
class RecalledPassage:
    chunk_id: str
    source_id: str
    ordinal: int
    role: str
    quote: str
    similarity: float
    occurred_at: datetime
    complete: bool

    def charge(self) -> int:
        return len(self.quote) + len(self.role)


Searched = tuple[list[RecalledPassage], bool]


async def passages_of(
    conn: Conn,
    scope: Scope,
    question: str,
    embedder: Embedder | None,
    caches: SearchCaches,
) -> Searched:
    """Up to 8 passages of observed turns in `scope` (authored records answer as facts), and
    whether an embedder read the question (otherwise they were ranked by full text alone)."""
    found = await search_passages(
        conn,
        scope,
        question,
        limit=MAX_PASSAGES,
        candidates=PASSAGE_CANDIDATES,
        embedder=embedder,
        caches=caches,
    )
    passages = []
    for hit in found.hits:
        quote = hit.preview()
        passages.append(
            RecalledPassage(
                chunk_id=str(hit.chunk_id),
                source_id=str(hit.source_id),
                ordinal=hit.ordinal,
                role=hit.role,
                quote=quote,
                similarity=hit.similarity,
                occurred_at=hit.occurred_at,
                complete=len(quote.encode("utf-8")) == hit.message_bytes,
            )
        )
    return passages, found.embedded
