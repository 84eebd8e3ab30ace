"""The statements a recall's walk reads facts with: the facts touching a set of entities, as
known now or as believed at an earlier time, and the row each gives."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(slots=True)  # not frozen: made for every row a walk reads, where frozen costs more
class HopRow:
    """A fact touching `reached` (an entity of the walk), on the subject or object side."""

    reached: uuid.UUID
    on_subject: bool
    id: uuid.UUID
    subject: str
    subject_entity_id: uuid.UUID
    object_entity_id: uuid.UUID | None
    object_entity_name: str | None
    predicate: str
    object: str
    statement: str
    confidence: float
    valid_from: datetime
    valid_until: datetime | None
    source_role: str


# A fact true at %(a)s (as_of) as known now: its present row, when that is still known.
_NOW = (
    "f.valid_from, f.valid_until FROM facts f WHERE f.known_until IS NULL"
    " AND f.valid_from <= %(a)s AND (f.valid_until IS NULL OR f.valid_until > %(a)s) AND"
)
# A fact true at %(a)s as believed at %(k)s (as_known_at): the version then believed, its
# present row or an earlier one from its history, with that version's validity.
_THEN = (
    "v.valid_from, v.valid_until FROM facts f CROSS JOIN LATERAL (SELECT * FROM"
    " (SELECT f.valid_from, f.valid_until, f.known_from, f.known_until, 0 AS rank"
    "  UNION ALL SELECT h.valid_from, h.valid_until, h.known_from, h.known_until, 1"
    "  FROM fact_history h WHERE h.fact_id = f.id) w"
    " WHERE w.known_from <= %(k)s AND (w.known_until IS NULL OR w.known_until > %(k)s)"
    " AND w.valid_from <= %(a)s AND (w.valid_until IS NULL OR w.valid_until > %(a)s)"
    " ORDER BY w.rank, w.known_until DESC LIMIT 1) v WHERE"
)
_SIDE = (
    "(SELECT f.id, {side} AS on_subject, {version}"
    " f.project_id = %(p)s AND f.{column} = e.entity_id"
    " AND f.source_role = ANY(%(roles)s) AND (%(s)s::text IS NULL OR f.data_subject_id = %(s)s)"
    " ORDER BY f.recorded_at DESC, f.id LIMIT %(fan)s)"
)


def _touching(version: str) -> str:
    subject_side = _SIDE.format(side="true", column="subject_entity_id", version=version)
    object_side = _SIDE.format(side="false", column="object_entity_id", version=version)
    return (
        "SELECT e.entity_id AS reached, x.on_subject, f.id, s.name AS subject,"
        " f.subject_entity_id, f.object_entity_id, o.name AS object_entity_name, f.predicate,"
        " f.object, f.statement, f.confidence, x.valid_from, x.valid_until, f.source_role,"
        " e.n AS place, f.recorded_at"
        " FROM unnest(%(ends)s::uuid[]) WITH ORDINALITY e(entity_id, n)"
        f" CROSS JOIN LATERAL ({subject_side} UNION ALL {object_side}) x"
        " JOIN facts f ON f.id = x.id JOIN entities s ON s.id = f.subject_entity_id"
        " LEFT JOIN entities o ON o.id = f.object_entity_id"
        " ORDER BY e.n, x.on_subject DESC, f.recorded_at DESC, f.id LIMIT %(limit)s"
    )


# A walk's step: the `HopRow` columns, then the anchor's place in the walk's ends and the fact's
# recording time, the order's keys.
TOUCHING_NOW = _touching(_NOW)
TOUCHING_THEN = _touching(_THEN)
