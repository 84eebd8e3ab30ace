"""What a passage search's statements look in and for: the scope as a SQL condition, the
question's weighed terms, the project's coverage read with the question's lexemes, and the SQL
expressions of a message's closeness to the question."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from satchel.memory.store.database import Conn
from satchel.memory.store.vectors import Packed

NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class Scope:
    """Where to look: a project, optionally one data subject, some roles, observed turns only."""

    project_id: int
    subject: str = ""
    roles: tuple[str, ...] = ()
    turns_only: bool = False

    def where(
        self, table: str = "m", kind: bool = True, roles: bool = True
    ) -> tuple[sql.Composable, list[Any]]:
        """The scope as a condition over `table` (`messages m`, or `message_vectors v`, which
        carries the message's scope columns); `kind=False` leaves turns-only to the caller,
        `roles=False` the roles."""
        name = sql.Identifier(table)
        clause: sql.Composable = sql.SQL("{}.project_id = %s").format(name)
        params: list[Any] = [self.project_id]
        if self.subject:
            clause = sql.SQL("{} AND {}.data_subject_id = %s").format(clause, name)
            params.append(self.subject)
        if self.roles and roles:
            clause = sql.SQL("{} AND {}.role = ANY(%s)").format(clause, name)
            params.append(list(self.roles))
        if self.turns_only and kind:
            clause = sql.SQL("{} AND {}.turn").format(clause, name)
        return clause, params


@dataclass(frozen=True, slots=True)
class Terms:
    """The question's lexemes with their BM25 weights, and the question without common words."""

    weights: list[tuple[str, float]]
    focused: str
    matches: list[int] = field(default_factory=list)  # each weighted lexeme's scope count


@dataclass(frozen=True, slots=True)
class Coverage:
    """How far the indexes are built: the generation, the log's end, what its vectors cover and
    how far its lexeme counts reach."""

    generation_id: str
    embedder: str
    through_offset: int
    covered_through_offset: int
    counted_through_offset: int


# The project's coverage and each word's lexemes, in one statement (one round trip, no pipeline).
COVERAGE_AND_LEXEMES = (
    "SELECT p.stored, g.id, g.embedder, coalesce(r.vectors_through, -1),"
    " coalesce(r.terms_through, -1),"
    " (SELECT json_agg(tsvector_to_array(to_tsvector('english', w)) ORDER BY n)"
    "  FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n))"
    " FROM (SELECT %s::bigint AS id) q LEFT JOIN projects p ON p.id = q.id"
    " LEFT JOIN passage_generations g ON g.project_id = p.id"
    " LEFT JOIN passage_progress r ON r.project_id = p.id"
)
WORD_LEXEMES = (
    "SELECT tsvector_to_array(to_tsvector('english', w))"
    " FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n) ORDER BY n"
)


def _coverage(row: tuple[Any, ...] | None) -> Coverage:
    if row is None or row[0] is None:
        return Coverage("", "", NO_OFFSET, NO_OFFSET, NO_OFFSET)
    stored, generation, embedder, covered, counted = row
    if generation is None:
        return Coverage("", "", stored, NO_OFFSET, counted)
    return Coverage(str(generation), embedder, stored, min(covered, stored), counted)


async def coverage_and_lexemes(
    conn: Conn, project_id: int, words: list[str]
) -> tuple[Coverage, list[list[str]]]:
    """The project's coverage and each word's lexemes, asked in one statement."""
    cursor = await conn.execute(COVERAGE_AND_LEXEMES, (words, project_id))
    row = await cursor.fetchone()
    assert row is not None
    return _coverage(row[:5]), [list(found) for found in row[5] or []]


async def word_lexemes(conn: Conn, words: list[str]) -> list[list[str]]:
    """Each word's lexemes, in order."""
    cursor = await conn.execute(WORD_LEXEMES, (words,))
    return [list(row[0]) for row in await cursor.fetchall()]


def full_text_match(scope: Scope) -> sql.Composable:
    """The predicate that `m` matches a tsquery, written so each of the two indexes (turns, the
    rest) can serve it: one parameter for turns only, else two."""
    if scope.turns_only:
        return sql.SQL("m.search_text @@ %s::tsquery")
    return sql.SQL(
        "((m.turn AND m.search_text @@ %s::tsquery)"
        " OR (NOT m.turn AND m.search_text @@ %s::tsquery))"
    )


def vector_partition(project_id: int) -> sql.Identifier:
    """The project's own partition of `message_vectors` (migration 0013), named so that a
    statement plans, opens and locks no other project's: a generic plan of the parent holds
    and locks every partition, however many its pruning leaves out."""
    return sql.Identifier(f"message_vectors_{project_id}")


def cosine_expression(vector: Packed, project_id: int) -> tuple[sql.Composable, list[Any]]:
    """The cosine similarity of `m`'s vector (of project `project_id`) to `vector` (NULL when it
    has none)."""
    expression = sql.SQL(
        "(SELECT 1 - (v.embedding <=> %s::vector) FROM {} v WHERE v.message_id = m.id)"
    ).format(vector_partition(project_id))
    return expression, [vector]


def share_expression(terms: Terms) -> tuple[sql.Composable, list[Any]]:
    """The share of the question's term weight `m` holds (0.0 when the terms weigh nothing)."""
    weight = sum(idf for _, idf in terms.weights)
    if not weight:
        return sql.SQL("0.0"), []
    held = sql.SQL(" + ").join(
        sql.SQL("(CASE WHEN m.search_text @@ %s::tsquery THEN %s ELSE 0 END)")
        for _ in terms.weights
    )
    return sql.SQL("({}) / %s").format(held), [*(v for pair in terms.weights for v in pair), weight]
