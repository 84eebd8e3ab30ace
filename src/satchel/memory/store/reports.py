"""Theme reports' statements: the fact graph they are drawn from, writing and dropping reports, and
ranking them by a question's vector."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from satchel.memory.store.database import Conn
from satchel.memory.store.erasure import lock_erasures
from satchel.memory.store.vectors import Packed

# A fact joins two entities in a theme while it is current, open-ended, said by the person and
# names an entity on both sides, neither of them the speaker.
_JOINING = (
    " FROM facts f JOIN entities s ON s.id = f.subject_entity_id"
    " JOIN entities o ON o.id = f.object_entity_id"
    " WHERE f.project_id = %(p)s AND f.known_until IS NULL AND f.retracted_at IS NULL"
    " AND f.valid_until IS NULL AND f.source_role = 'user'"
    " AND s.normalized <> %(speaker)s AND o.normalized <> %(speaker)s"
)


@dataclass(frozen=True, slots=True)
class GraphFact:
    """A fact joining two entities, and its version (a change gives a new one)."""

    id: uuid.UUID
    version: uuid.UUID
    subject_entity_id: uuid.UUID
    object_entity_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class CommunityFact:
    """A fact a report draws on: its statement, its ends' names and its source observations."""

    id: uuid.UUID
    statement: str
    subject: str
    object: str
    sources: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class NewReport:
    """A report to write for a community, with what it drew on and its vector (if any)."""

    project_id: int
    community_id: str
    level: int
    parent: str | None
    title: str
    summary: str
    importance: float
    written_by: str
    members: tuple[uuid.UUID, ...]
    facts: dict[uuid.UUID, uuid.UUID]  # fact id: the version it was written from
    sources: tuple[uuid.UUID, ...]
    embedder: str | None
    embedding: Packed | None


@dataclass(frozen=True, slots=True)
class RankedReport:
    """A stored report and its cosine similarity to a question."""

    id: uuid.UUID
    community_id: str
    level: int
    parent: str | None
    title: str
    summary: str
    importance: float
    similarity: float
    sources: list[uuid.UUID]


async def graph_facts(conn: Conn, project_id: int, speaker: str) -> list[GraphFact]:
    """Every fact of the project joining two entities (see `_JOINING`; `speaker`: the person's
    own entity's normalized name), by id."""
    cursor = await conn.execute(
        f"SELECT f.id, f.version, f.subject_entity_id, f.object_entity_id{_JOINING} ORDER BY f.id",
        {"p": project_id, "speaker": speaker},
    )
    return [GraphFact(*row) for row in await cursor.fetchall()]


async def community_facts(conn: Conn, ids: list[uuid.UUID]) -> list[CommunityFact]:
    """The facts of `ids` with their statements, names and sources, oldest first."""
    cursor = await conn.execute(
        "SELECT f.id, f.statement, s.name, o.name, array(SELECT DISTINCT x FROM unnest("
        " array_append(array(SELECT e.observation_id FROM fact_evidence e"
        "  WHERE e.fact_id = f.id), f.source_observation_id)) x ORDER BY x)"
        " FROM facts f JOIN entities s ON s.id = f.subject_entity_id"
        " JOIN entities o ON o.id = f.object_entity_id"
        " WHERE f.id = ANY(%s) ORDER BY f.recorded_at, f.id",
        (ids,),
    )
    return [
        CommunityFact(row[0], row[1], row[2], row[3], tuple(row[4]))
        for row in await cursor.fetchall()
    ]


async def written(conn: Conn, project_id: int) -> dict[str, dict[uuid.UUID, uuid.UUID]]:
    """The project's reports: community id to the facts (and versions) each was written from."""
    cursor = await conn.execute(
        "SELECT r.community_id, coalesce(jsonb_object_agg(x.fact_id, x.version)"
        "  FILTER (WHERE x.fact_id IS NOT NULL), '{}')"
        " FROM reports r LEFT JOIN report_facts x ON x.report_id = r.id"
        " WHERE r.project_id = %s GROUP BY r.community_id",
        (project_id,),
    )
    return {
        community: {uuid.UUID(key): uuid.UUID(value) for key, value in facts.items()}
        for community, facts in await cursor.fetchall()
    }


async def drop(conn: Conn, project_id: int, communities: list[str]) -> int:
    """Remove the reports of `communities`; how many went."""
    cursor = await conn.execute(
        "DELETE FROM reports WHERE project_id = %s AND community_id = ANY(%s)",
        (project_id, communities),
    )
    return cursor.rowcount


async def write(conn: Conn, report: NewReport) -> bool:
    """Store `report` in one transaction, unless a fact it drew on changed or went since it was
    read (its row is locked first, so a change waits and then removes the report) or the
    community has a report already; whether it was stored."""
    async with conn.transaction():
        await lock_erasures(conn, report.project_id, shared=True)
        cursor = await conn.execute(
            "SELECT id, version FROM facts WHERE id = ANY(%s) AND known_until IS NULL FOR SHARE",
            (list(report.facts),),
        )
        if dict(await cursor.fetchall()) != report.facts:
            return False
        report_id = uuid.uuid4()
        cursor = await conn.execute(
            "INSERT INTO reports (id, project_id, community_id, level, parent, title, summary,"
            " importance, written_by, embedder, embedding)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector)"
            " ON CONFLICT (project_id, community_id) DO NOTHING",
            (
                report_id,
                report.project_id,
                report.community_id,
                report.level,
                report.parent,
                report.title,
                report.summary,
                report.importance,
                report.written_by,
                report.embedder,
                report.embedding,
            ),
        )
        if cursor.rowcount == 0:
            return False
        await conn.execute(
            "INSERT INTO report_facts (report_id, fact_id, version)"
            " SELECT %s, unnest(%s::uuid[]), unnest(%s::uuid[])",
            (report_id, list(report.facts), list(report.facts.values())),
        )
        for table, column, ids in (
            ("report_members", "entity_id", list(report.members)),
            ("report_sources", "observation_id", list(report.sources)),
        ):
            await conn.execute(
                f"INSERT INTO {table} (report_id, {column}) SELECT %s, unnest(%s::uuid[])",
                (report_id, ids),
            )
    return True


async def count(conn: Conn, project_id: int) -> int:
    """How many reports the project has."""
    cursor = await conn.execute("SELECT count(*) FROM reports WHERE project_id = %s", (project_id,))
    row = await cursor.fetchone()
    assert row is not None
    total: int = row[0]
    return total


async def counts(conn: Conn, project_id: int, embedder: str) -> tuple[int, int]:
    """The project's reports, and how many of them have a vector of `embedder`."""
    cursor = await conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE embedder = %s AND embedding IS NOT NULL)"
        " FROM reports WHERE project_id = %s",
        (embedder, project_id),
    )
    row = await cursor.fetchone()
    assert row is not None
    return row[0], row[1]


async def unembedded(conn: Conn, project_id: int, embedder: str) -> list[tuple[uuid.UUID, str]]:
    """The project's reports with no vector of `embedder`: (id, the text to embed)."""
    cursor = await conn.execute(
        "SELECT id, title || E'\\n' || summary FROM reports WHERE project_id = %s"
        " AND (embedder IS DISTINCT FROM %s OR embedding IS NULL) ORDER BY id",
        (project_id, embedder),
    )
    return [(row[0], row[1]) for row in await cursor.fetchall()]


async def embedded(conn: Conn, report_id: uuid.UUID, embedder: str, vector: Packed) -> None:
    """Give a report its vector of `embedder` (a report gone meanwhile is left gone)."""
    await conn.execute(
        "UPDATE reports SET embedder = %s, embedding = %s::vector WHERE id = %s",
        (embedder, vector, report_id),
    )


_RANKED = (
    "r.id, r.community_id, r.level, r.parent, r.title, r.summary, r.importance,"
    " 1 - (r.embedding <=> %(q)s::vector) AS similarity,"
    " array(SELECT s.observation_id FROM report_sources s WHERE s.report_id = r.id ORDER BY 1)"
)
_VECTORED = "r.project_id = %(p)s AND r.embedder = %(e)s AND r.embedding IS NOT NULL"


async def nearest(
    conn: Conn, project_id: int, embedder: str, vector: Packed, limit: int
) -> list[RankedReport]:
    """The `limit` reports nearest the question's `vector`, compared with every report's."""
    cursor = await conn.execute(
        f"SELECT {_RANKED} FROM reports r WHERE {_VECTORED}"
        " ORDER BY r.embedding <=> %(q)s::vector, r.id LIMIT %(n)s",
        {"p": project_id, "e": embedder, "q": vector, "n": limit},
    )
    return [RankedReport(*row) for row in await cursor.fetchall()]


async def themes(
    conn: Conn, project_id: int, embedder: str, vector: Packed, best: int, children: int
) -> list[RankedReport]:
    """In one statement: the `best` reports nearest `vector`, then up to `children` reports whose
    parent is the nearest one's community (nearest first, none listed twice)."""
    cursor = await conn.execute(
        f"WITH b AS MATERIALIZED (SELECT {_RANKED} FROM reports r WHERE {_VECTORED}"
        "  ORDER BY r.embedding <=> %(q)s::vector, r.id LIMIT %(b)s),"
        " c AS (SELECT * FROM b ORDER BY similarity DESC, id LIMIT 1)"
        " SELECT * FROM (SELECT *, 0 AS part FROM b UNION ALL"
        f"  (SELECT {_RANKED}, 1 FROM reports r WHERE {_VECTORED}"
        "   AND r.parent = (SELECT community_id FROM c) AND r.id NOT IN (SELECT id FROM b)"
        "   ORDER BY r.embedding <=> %(q)s::vector, r.id LIMIT %(c)s)) t"
        " ORDER BY part, similarity DESC, id",
        {"p": project_id, "e": embedder, "q": vector, "b": best, "c": children},
    )
    return [RankedReport(*row[:9]) for row in await cursor.fetchall()]
