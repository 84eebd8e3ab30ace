"""A stored conversation corpus for the read benchmarks: turns, messages and their vectors.

Embedding 100k messages with the local model would take a quarter of an hour on 2 cores, so
the corpus is built from a pool of distinct sentences that are embedded for real; each user
message is one pool sentence with a short unique tail, and its vector is the sentence's vector
with a little noise, normalized, so they lie as real ones do. The assistant's replies are a dozen
texts said over and over, each with its own real vector, shared as the worker's would be.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg

from satchel.memory.formation.segments import extractive_summary, write_segments
from satchel.memory.passages.embedder import DIMENSIONS, Embedder
from satchel.memory.store.terms import COUNT
from satchel.memory.store.vectors import vector_literal

PEOPLE_TEXT = "Ann Brian Ciara Dara Eoin Fiona Gerry Hannah Ian Jane Kevin Laura"
PEOPLE = PEOPLE_TEXT.split()
DOINGS = [
    "moved to {place}",
    "started a new job in {place}",
    "went hiking near {place} with {person}",
    "had lunch with {person} in {place}",
    "is learning to cook food from {place}",
    "booked flights to {place} for the summer",
    "adopted a dog while living in {place}",
    "finished a painting of the harbour at {place}",
    "signed up for a marathon in {place}",
    "plans to visit {person}'s family in {place}",
]
PLACES_TEXT = """
Lisbon Porto Madrid Seville Dublin Cork Galway Paris Lyon Nice Berlin Munich Hamburg
Vienna Prague Krakow Warsaw Oslo Bergen Stockholm Helsinki Tallinn Riga Vilnius Rome Milan Turin
Naples Athens Sofia"""
PLACES = PLACES_TEXT.split()
WHEN = ["last week", "yesterday", "in March", "this spring", "two years ago", "on Friday"]
TAILS = ["again.", "finally.", "at last.", "honestly!", "apparently.", "as planned.", "for now."]
REPLY = "That sounds lovely; tell me how it goes with {person}."
SUBJECTS = 200
POOL = 2_000  # distinct sentences embedded for real, for turns and for statements each
NOISE = 0.03


def sentences(count: int, rng: random.Random) -> list[str]:
    """`count` distinct sentences a person might tell an assistant."""
    made: set[str] = set()
    while len(made) < count:
        doing = rng.choice(DOINGS).format(place=rng.choice(PLACES), person=rng.choice(PEOPLE))
        made.add(f"{rng.choice(PEOPLE)} {doing} {rng.choice(WHEN)}.")
    return sorted(made)


def passage_question(n: int) -> str:
    """The `n`th of many distinct questions about the corpus (none asked twice in a run)."""
    place = PLACES[n // len(DOINGS) % len(PLACES)]
    doing = DOINGS[n % len(DOINGS)].format(place=place, person=PEOPLE[n % len(PEOPLE)])
    return f"Who {doing} {WHEN[n // 300 % len(WHEN)]}?"


def load_conversations(
    url: str, project_id: int, first_offset: int, messages: int, embedder: Embedder, seed: int
) -> float:
    """`messages` stored messages (user and assistant, two a turn) of `SUBJECTS` people after
    `first_offset`, formed, summarized and indexed as the worker leaves them (so reads are not
    measured beside the worker's one-off walk over a backlog); the seconds spent."""
    began = time.perf_counter()
    rng = random.Random(seed)
    pool = sentences(POOL, rng)
    vectors = embedder.embed(pool)
    # Replies are said word for word again and again, so they share vectors as the worker's
    # would: one real vector per distinct reply.
    replies = [REPLY.format(person=person) for person in PEOPLE]
    replied = dict(zip(replies, embedder.embed(replies), strict=True))
    noise = np.random.default_rng(seed)
    now = datetime.now(UTC)
    turns = messages // 2
    observations: list[tuple[Any, ...]] = []
    rows: list[tuple[Any, ...]] = []
    for n in range(turns):
        at = now - timedelta(minutes=turns - n)
        turn, subject = uuid.uuid4(), f"person-{n % SUBJECTS}"
        observations.append((turn, project_id, first_offset + n, subject, "turn", at, at))
        pick = rng.randrange(len(pool))
        said = f"{pool[pick]} {rng.choice(TAILS)} ({n})"
        jitter = vectors[pick] + noise.normal(0.0, NOISE, DIMENSIONS).astype(np.float32)
        jitter /= np.linalg.norm(jitter)
        reply = REPLY.format(person=rng.choice(PEOPLE))
        rows.append((uuid.uuid4(), turn, project_id, subject, 0, "user", said, 0, at, jitter))
        rows.append(
            (uuid.uuid4(), turn, project_id, subject, 1, "assistant", reply, 1, at, replied[reply])
        )
    with psycopg.connect(url, autocommit=True) as conn:
        graphs = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'message_vectors'"
            " AND indexdef LIKE '%USING hnsw%'"
        ).fetchall()
        conn.execute("DROP INDEX " + ", ".join(name for name, _ in graphs))
        _copy(
            conn,
            "observations (id, project_id, log_offset, data_subject_id, kind, occurred_at,"
            " formed_at)",
            observations,
        )
        _copy(
            conn,
            "messages (id, observation_id, project_id, data_subject_id, ordinal, role, content,"
            " group_ordinal, occurred_at)",
            [row[:-1] for row in rows],
        )
        _vectors(conn, [(row[0], row[2], row[3], row[5], True, row[-1]) for row in rows])
        _embed_the_rest(conn, project_id, embedder, noise)
        conn.execute("SET maintenance_work_mem = '1GB'")
        # Built again once the rows are in: far quicker. A partitioned table's index is shown
        # `ON ONLY` the parent, which would make none on the partitions.
        for _, definition in graphs:
            conn.execute(definition.replace(" ON ONLY ", " ON ", 1))
        conn.execute(
            "INSERT INTO passage_generations (project_id, id, embedder) VALUES (%s, %s, %s)"
            " ON CONFLICT (project_id) DO NOTHING",
            (project_id, uuid.uuid4(), embedder.identity),
        )
        last = first_offset + turns - 1
        conn.execute(
            "UPDATE projects SET stored = %s, formed = %s WHERE id = %s", (last, last, project_id)
        )
        conn.execute(COUNT, {"p": project_id, "after": -1, "through": last})
        conn.execute(
            "INSERT INTO passage_progress (project_id, vectors_through, terms_through)"
            " VALUES (%s, %s, %s)",
            (project_id, last, last),
        )
    asyncio.run(_summarized(url, project_id))
    return time.perf_counter() - began


async def _summarized(url: str, project_id: int) -> None:
    """The segments the worker writes over the loaded turns (with no model configured), in one
    transaction."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await write_segments(conn, project_id, extractive_summary)


def _vectors(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> None:
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY message_vectors (message_id, project_id, data_subject_id, role, turn, embedding)"
            " FROM STDIN"
        ) as writer,
    ):
        for *row, vector in rows:
            writer.write_row((*row, vector_literal(vector)))


def _embed_the_rest(
    conn: psycopg.Connection[Any], project_id: int, embedder: Embedder, noise: np.random.Generator
) -> None:
    """Vectors for the project's other messages (the facts' curated sources): each takes the
    real vector of a statement saying the same thing, jittered."""
    rows = conn.execute(
        "SELECT m.id, m.data_subject_id, m.role, m.content FROM messages m WHERE m.project_id = %s"
        " AND NOT EXISTS (SELECT 1 FROM message_vectors v"
        " WHERE v.message_id = m.id AND v.project_id = m.project_id)",
        (project_id,),
    ).fetchall()
    if not rows:
        return
    # The 2,000 most common things said about people get vectors of their own; the rarer ones
    # (who knows whom) share the vector of their verb.
    said = Counter(_said(content) for *_, content in rows)
    own = {key for key, _ in said.most_common(POOL)}
    example: dict[str, str] = {}
    for *_, content in rows:
        example.setdefault(_key(content, own), content)
    keys = sorted(example)
    real = dict(zip(keys, embedder.embed([example[k] for k in keys]), strict=True))
    jittered = []
    for message, subject, role, content in rows:
        jitter = real[_key(content, own)] + noise.normal(0.0, NOISE, DIMENSIONS).astype(np.float32)
        jittered.append(
            (message, project_id, subject, role, False, jitter / np.linalg.norm(jitter))
        )
    _vectors(conn, jittered)


def _said(content: str) -> str:
    """What a fact statement says after the person's three names (`works at Company 12.`)."""
    return " ".join(content.split()[3:])


def _key(content: str, own: set[str]) -> str:
    """The statement's own key when it is common, else its verb (`knows Aoife`)."""
    said = _said(content)
    return said if said in own else " ".join(content.split()[3:5])


def _copy(conn: psycopg.Connection[Any], target: str, rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as writer:
        for row in rows:
            writer.write_row(row)
