"""The rows derived from one data subject or from chosen observations, kind by kind."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from satchel.memory.store.database import Conn

SOURCES = "(SELECT id FROM scope_sources)"
FACTS = "(SELECT id FROM scope_facts)"
SUBJECT_ENTITIES = (
    "(SELECT e.id FROM entities e WHERE e.project_id = %(p)s AND e.data_subject_id = %(s)s)"
)


@dataclass(frozen=True, slots=True)
class Scope:
    """One project's data subject (`subject`) or a set of its observations (`sources`)."""

    project_id: int
    subject: str | None
    sources: tuple[uuid.UUID, ...] = ()

    def params(self) -> dict[str, Any]:
        return {"p": self.project_id, "s": self.subject, "ids": list(self.sources)}


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of derived row: its receipt and section name, table, and predicate over `t`.

    `where` finds every row of the scope (exported, and counted again as the residual after an
    erasure). An erasure deletes the rows matching `erase` (default: `where`), then runs
    `detach`, which cuts the references surviving rows (shared with other subjects) hold into
    the scope.
    """

    name: str
    table: str
    where: str
    order: str
    erase: str | None = None
    detach: str | None = None
    subject_only: bool = False

    def select(self, what: str) -> str:
        return f"SELECT {what} FROM {self.table} t WHERE {self.where}"

    def delete(self) -> str:
        return f"DELETE FROM {self.table} t WHERE {self.erase or self.where}"


FACT_WHERE = (
    "t.project_id = %(p)s AND (t.data_subject_id = %(s)s"
    f" OR t.source_observation_id IN {SOURCES}"
    f" OR t.subject_entity_id IN {SUBJECT_ENTITIES}"
    f" OR t.id IN (SELECT e.fact_id FROM fact_evidence e WHERE e.observation_id IN {SOURCES}))"
)
ENTITY_WHERE = (
    "t.project_id = %(p)s AND (t.data_subject_id = %(s)s"
    f" OR t.source_observation_id IN {SOURCES}"
    f" OR t.id IN (SELECT n.entity_id FROM entity_sources n WHERE n.observation_id IN {SOURCES}))"
)
# A subject's own entities go with it; an entity named elsewhere too survives while a fact
# names it or an observation outside the scope does.
ENTITY_ERASE = (
    f"({ENTITY_WHERE}) AND (t.data_subject_id = %(s)s OR ("
    " NOT EXISTS (SELECT 1 FROM facts f WHERE f.subject_entity_id = t.id"
    "  OR f.object_entity_id = t.id)"
    " AND NOT EXISTS (SELECT 1 FROM entity_sources n WHERE n.entity_id = t.id"
    f"  AND n.observation_id NOT IN {SOURCES})))"
)

KINDS: tuple[Kind, ...] = (
    Kind(
        "report",
        "reports",
        "t.project_id = %(p)s AND t.id IN"
        f" (SELECT r.report_id FROM report_sources r WHERE r.observation_id IN {SOURCES})",
        "t.level, t.community_id",
    ),
    Kind("observation", "observations", f"t.id IN {SOURCES}", "t.log_offset"),
    Kind(
        "message",
        "messages",
        f"t.observation_id IN {SOURCES} OR (t.project_id = %(p)s AND t.data_subject_id = %(s)s)",
        "(SELECT o.log_offset FROM observations o WHERE o.id = t.observation_id), t.ordinal",
    ),
    Kind(
        "fact",
        "facts",
        FACT_WHERE,
        "t.id",
        erase=f"t.id IN {FACTS}",
        detach=f"UPDATE facts SET superseded_by = NULL WHERE superseded_by IN {FACTS}",
    ),
    Kind(
        "feedback",
        "feedback",
        f"t.project_id = %(p)s AND t.fact_id IN {FACTS}",
        "t.recorded_at, t.id",
    ),
    Kind(
        "fact_evidence",
        "fact_evidence",
        f"t.fact_id IN {FACTS} OR t.observation_id IN {SOURCES}",
        "t.fact_id, t.observation_id, t.source_ordinal",
    ),
    Kind(
        "fact_history",
        "fact_history",
        f"t.fact_id IN {FACTS} OR t.ended_by_observation_id IN {SOURCES}",
        "t.fact_id, t.id",
        erase=f"t.fact_id IN {FACTS}",
        detach="UPDATE fact_history SET ended_by_observation_id = NULL"
        f" WHERE ended_by_observation_id IN {SOURCES}",
    ),
    Kind(
        "record_retraction",
        "fact_retractions",
        f"t.fact_id IN {FACTS} OR t.replacement_record_id IN {FACTS}"
        f" OR t.replacement_source_observation_id IN {SOURCES}",
        "t.fact_id",
        erase=f"t.fact_id IN {FACTS}",
        detach="UPDATE fact_retractions SET replacement_record_id = NULL,"
        " replacement_source_observation_id = NULL"
        f" WHERE replacement_record_id IN {FACTS}"
        f" OR replacement_source_observation_id IN {SOURCES}",
    ),
    Kind(
        "entity",
        "entities",
        ENTITY_WHERE,
        "t.id",
        erase=ENTITY_ERASE,
        detach="UPDATE entities SET source_observation_id = NULL"
        f" WHERE source_observation_id IN {SOURCES}",
    ),
    Kind(
        "segment",
        "segments",
        "t.project_id = %(p)s AND (t.data_subject_id = %(s)s OR t.id IN"
        f" (SELECT g.segment_id FROM segment_sources g WHERE g.observation_id IN {SOURCES}))",
        "t.from_offset, t.id",
    ),
    Kind(
        "rejected_claim",
        "rejected_claims",
        f"t.project_id = %(p)s AND (t.data_subject_id = %(s)s OR t.observation_id IN {SOURCES})",
        "t.created_at, t.id",
    ),
    Kind(
        "fact_receipt",
        "fact_receipts",
        f"t.project_id = %(p)s AND (t.data_subject_id = %(s)s OR t.observation_id IN {SOURCES})",
        "t.formed_at, t.id",
    ),
    Kind(
        "agent_artifact",
        "artifacts",
        "t.project_id = %(p)s AND (t.data_subject_id = %(s)s"
        f" OR t.source_observation_id IN {SOURCES})",
        "t.id",
    ),
    Kind(
        "data_subject",
        "subjects",
        "t.project_id = %(p)s AND (t.id::text = %(s)s OR t.external_reference = %(s)s)",
        "t.id",
        subject_only=True,
    ),
)


def kinds_for(scope: Scope) -> tuple[Kind, ...]:
    """The kinds a scope covers: the registry entry only for a subject."""
    return tuple(k for k in KINDS if scope.subject is not None or not k.subject_only)


async def mark(conn: Conn, scope: Scope) -> None:
    """Inside a transaction: note the scope's source observations and facts in temp tables.

    The sources are the project's observations of the subject (artifact sources included) or
    the chosen ids that belong to the project; ids of other projects match nothing.
    """
    await conn.execute(  # two commands in one string: never a prepared statement
        "CREATE TEMP TABLE scope_sources (id uuid PRIMARY KEY) ON COMMIT DROP;"
        "CREATE TEMP TABLE scope_facts (id uuid PRIMARY KEY) ON COMMIT DROP",
        prepare=False,
    )
    await conn.execute(
        "INSERT INTO scope_sources SELECT o.id FROM observations o WHERE o.project_id = %(p)s"
        " AND (o.data_subject_id = %(s)s OR o.id = ANY(%(ids)s::uuid[]) OR o.id IN"
        "  (SELECT a.source_observation_id FROM artifacts a"
        "   WHERE a.project_id = %(p)s AND a.data_subject_id = %(s)s))",
        scope.params(),
    )
    await conn.execute(
        f"INSERT INTO scope_facts SELECT t.id FROM facts t WHERE {FACT_WHERE}", scope.params()
    )
