"""LoCoMo retrieval: how well passage search finds the turns that answer each question.

Starts its own embedded PostgreSQL in a temporary directory and `satchel serve` on a loopback
port, stores the ten LoCoMo conversations (`../shared/data/locomo10.json`, relative to the
project root) through `POST /v1/observations` twice, into two projects, one data subject per
conversation and one observation per turn (a `user` message):

* dated: "Speaker: text" with the shared photo's caption when there is one, and the session's
  date as `occurred_at`;
* text only: "Speaker: text" alone, no caption and no `occurred_at`, as a client that stores
  only what was said would;

builds each passage index with `index_passages`, then asks every question that has evidence of
both.

Measured, without any language model:

* turn level: recall_any@k (some evidence turn in the top k) and recall_all@k (every evidence
  turn in the top k), k = 5, 10, 50;
* session level: recall_any@k over the sessions in order of their first turn in the ranking,
  k = 1, 5, 10;
* ingest turns/s over HTTP, index turns/s, search latency p50/p95 over HTTP.

k <= 32 is read from `POST /v1/passages/search` (the contract caps `limit` at 32); @50 comes from
the same search function called in process with limit 50. Beside it: the same search with full
text only, and plain BM25 (Okapi, k1 1.2, b 0.75, lowercase words) in process.

The last line printed is one JSON object with `turn_recall_all_at_10` and
`session_recall_any_at_5` (dated), `text_only_turn_recall_all_at_10` and
`text_only_session_recall_any_at_5`, `bm25_turn_recall_all_at_10` and
`bm25_session_recall_any_at_5` (over the text-only turns), `search_p95_ms` (both protocols'
searches) and `ingest_turns_per_s`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from rich.console import Console
from rich.table import Table

from _service import Client, percentile, service
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.passages.embedder import load_embedder
from satchel.memory.passages.index import index_passages
from satchel.memory.passages.search import search_passages
from satchel.memory.service.tokens import create_token
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import start_embedded
from satchel.memory.store.passage_scope import Scope

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo10.json"
TURN_KS = (5, 10, 50)
SESSION_KS = (1, 5, 10)
API_LIMIT = 32
DEEP_LIMIT = 50
DATED = "dated"
TEXT_ONLY = "text only"
PROTOCOLS = (DATED, TEXT_ONLY)
GOALS = {
    DATED: {"turn_recall_all_at_10": 0.82, "session_recall_any_at_5": 0.97},
    TEXT_ONLY: {"turn_recall_all_at_10": 0.75, "session_recall_any_at_5": 0.95},
}
EVIDENCE = re.compile(r"D(\d+):(\d+)")
WORD = re.compile(r"[a-z0-9]+")

console = Console()


# ---- the data ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Turn:
    dia_id: str
    session: int
    said: str
    """ "Speaker: text", all a text-only client stores."""
    caption: str | None
    occurred_at: str

    def text(self, protocol: str) -> str:
        if protocol == DATED and self.caption:
            return f"{self.said} [shares a photo: {self.caption}]"
        return self.said

    def body(self, protocol: str, subject: str) -> dict[str, object]:
        """The observation a client of `protocol` stores for this turn."""
        body: dict[str, object] = {
            "data_subject_id": subject,
            "messages": [{"role": "user", "content": self.text(protocol)}],
        }
        if protocol == DATED:
            body["occurred_at"] = self.occurred_at
        return body


@dataclass(slots=True)
class Question:
    subject: str
    text: str
    evidence: set[str]


@dataclass(slots=True)
class Conversation:
    subject: str
    turns: list[Turn] = field(default_factory=list)


def when(stamp: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as RFC 3339 (UTC), or now when it does not parse."""
    try:
        parsed = datetime.strptime(stamp.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        parsed = datetime.now(UTC).replace(tzinfo=None)
    return parsed.replace(tzinfo=UTC).isoformat()


def load(path: Path) -> tuple[list[Conversation], list[Question]]:
    conversations, questions = [], []
    for sample in json.loads(path.read_text()):
        talk = sample["conversation"]
        conversation = Conversation(sample["sample_id"])
        sessions = sorted(
            int(key.split("_")[1])
            for key, value in talk.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        for number in sessions:
            stamp = when(talk.get(f"session_{number}_date_time", ""))
            for item in talk[f"session_{number}"]:
                said = f"{item['speaker']}: {item['text']}"
                caption = item.get("blip_caption") or None
                conversation.turns.append(Turn(item["dia_id"], number, said, caption, stamp))
        known = {turn.dia_id for turn in conversation.turns}
        for qa in sample["qa"]:
            found = {f"D{s}:{t}" for s, t in EVIDENCE.findall(" ".join(qa.get("evidence", [])))}
            if found & known:
                questions.append(Question(conversation.subject, qa["question"], found & known))
        conversations.append(conversation)
    return conversations, questions


# ---- ingest and index --------------------------------------------------------------------------


def ingest(
    port: int, token: str, conversations: list[Conversation], protocol: str
) -> tuple[dict[str, str], float]:
    """Observe every turn as a client of `protocol` would (one client per conversation, 4 at a
    time); observation id -> dia key, and turns/s."""
    sources: dict[str, str] = {}
    failures: list[BaseException] = []
    queue = list(conversations)
    lock = threading.Lock()

    def run() -> None:
        client = Client(port, token, timeout=120)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    conversation = queue.pop(0)
                for turn in conversation.turns:
                    body = turn.body(protocol, conversation.subject)
                    stored = client.post("/v1/observations", body, 201)
                    sources[stored["id"]] = f"{conversation.subject}/{turn.dia_id}"
        except BaseException as exc:
            failures.append(exc)
        finally:
            client.close()

    began = time.perf_counter()
    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return sources, len(sources) / (time.perf_counter() - began)


async def build_index(url: str, project_id: int, turns: int) -> float:
    """Run `index_passages` until every message has a vector; returns turns/s.

    The service's own worker may index beside it (the two take turns), so the loop waits for
    the project's vectors to reach its last stored turn.
    """
    embedder = load_embedder()
    began = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        while True:
            done = await index_passages(conn, project_id, embedder, 256)
            await conn.commit()
            cursor = await conn.execute(
                "SELECT p.stored - coalesce(r.vectors_through, -1) FROM projects p"
                " LEFT JOIN passage_progress r ON r.project_id = p.id WHERE p.id = %s",
                (project_id,),
            )
            row = await cursor.fetchone()
            await conn.commit()
            left = int(row[0]) if row else 0
            console.print(f"  {turns - left} of {turns} indexed", end="\r")
            if not left:
                break
            if not done:
                await asyncio.sleep(0.5)
    console.print()
    return turns / max(time.perf_counter() - began, 1e-9)


# ---- scoring -----------------------------------------------------------------------------------


def session_of(key: str) -> str:
    subject, dia = key.split("/")
    return f"{subject}/{dia.split(':')[0]}"


@dataclass(slots=True)
class Score:
    """Hit counts per metric over the questions asked."""

    asked: int = 0
    hits: Counter[str] = field(default_factory=Counter)

    def add(self, ranked: list[str], question: Question) -> None:
        self.asked += 1
        evidence = {f"{question.subject}/{dia}" for dia in question.evidence}
        for k in TURN_KS:
            top = set(ranked[:k])
            self.hits[f"turn_recall_any_at_{k}"] += bool(top & evidence)
            self.hits[f"turn_recall_all_at_{k}"] += evidence <= top
        sessions = list(dict.fromkeys(session_of(key) for key in ranked))
        wanted = {session_of(key) for key in evidence}
        for k in SESSION_KS:
            self.hits[f"session_recall_any_at_{k}"] += bool(set(sessions[:k]) & wanted)

    def rate(self, metric: str) -> float:
        return self.hits[metric] / max(self.asked, 1)


class BM25:
    """Plain Okapi BM25 over lowercase words, one index per conversation."""

    def __init__(self, docs: list[tuple[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.keys = [key for key, _ in docs]
        self.tokens = [WORD.findall(text.lower()) for _, text in docs]
        self.counts = [Counter(tokens) for tokens in self.tokens]
        self.avgdl = sum(map(len, self.tokens)) / max(len(self.tokens), 1)
        df = Counter(word for tokens in self.tokens for word in set(tokens))
        n = len(self.tokens)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def rank(self, question: str, limit: int) -> list[str]:
        words = set(WORD.findall(question.lower()))
        scored = []
        for key, tokens, counts in zip(self.keys, self.tokens, self.counts, strict=True):
            norm = self.k1 * (1 - self.b + self.b * len(tokens) / self.avgdl)
            score = sum(
                self.idf[w] * counts[w] * (self.k1 + 1) / (counts[w] + norm)
                for w in words
                if w in counts
            )
            if score > 0:
                scored.append((score, key))
        scored.sort(key=lambda item: -item[0])
        return [key for _, key in scored[:limit]]


def search_over_http(
    port: int, token: str, questions: list[Question], keys: dict[str, str]
) -> tuple[Score, list[float]]:
    client = Client(port, token, timeout=120)
    score, latencies = Score(), []
    for question in questions:
        body = {"question": question.text, "limit": API_LIMIT, "data_subject_id": question.subject}
        began = time.perf_counter()
        page = client.post("/v1/passages/search", body)
        latencies.append((time.perf_counter() - began) * 1000)
        score.add([keys[p["chunk_id"]] for p in page["passages"]], question)
    client.close()
    return score, latencies


async def search_in_process(
    url: str, project_id: int, questions: list[Question], keys: dict[str, str], vectors: bool
) -> Score:
    embedder = load_embedder() if vectors else None
    caches = SearchCaches()
    score = Score()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for question in questions:
            found = await search_passages(
                conn,
                Scope(project_id, question.subject),
                question.text,
                limit=DEEP_LIMIT,
                embedder=embedder,
                caches=caches,
            )
            await conn.rollback()
            score.add([keys[str(hit.chunk_id)] for hit in found.hits], question)
    return score


def bm25_score(conversations: list[Conversation], questions: list[Question]) -> Score:
    """Plain BM25 over what a text-only client stores."""
    indexes = {
        c.subject: BM25([(f"{c.subject}/{t.dia_id}", t.text(TEXT_ONLY)) for t in c.turns])
        for c in conversations
    }
    score = Score()
    for question in questions:
        score.add(indexes[question.subject].rank(question.text, DEEP_LIMIT), question)
    return score


# ---- the run -----------------------------------------------------------------------------------


def chunk_keys(url: str, project_id: int, sources: dict[str, str]) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT id, observation_id FROM messages WHERE project_id = %s", (project_id,)
        ).fetchall()
    return {str(chunk): sources[str(source)] for chunk, source in rows}


def merged(http_score: Score, deep: Score) -> Score:
    """@k <= 32 from the HTTP answers, @50 from the in-process search."""
    score = Score(http_score.asked, Counter(http_score.hits))
    for metric, hits in deep.hits.items():
        if metric.endswith("_at_50"):
            score.hits[metric] = hits
    return score


def table(columns: dict[str, Score]) -> Table:
    view = Table(title="LoCoMo retrieval (questions with evidence)")
    view.add_column("recall", no_wrap=True)
    for name in columns:
        view.add_column(name, justify="right")
    view.add_column("goal: dated / text only", justify="right")
    metrics = [f"turn_recall_any_at_{k}" for k in TURN_KS]
    metrics += [f"turn_recall_all_at_{k}" for k in TURN_KS]
    metrics += [f"session_recall_any_at_{k}" for k in SESSION_KS]
    for metric in metrics:
        goals = [f">= {GOALS[p][metric]:.2f}" for p in PROTOCOLS if metric in GOALS[p]]
        cells = [f"{score.rate(metric):.3f}" for score in columns.values()]
        label = metric.replace("_recall_", " ").replace("_at_", "@")
        view.add_row(label, *cells, " / ".join(goals))
    return view


@dataclass(slots=True)
class Measured:
    """One protocol's scores: hybrid search (@k <= 32 over HTTP, @50 in process) and full text
    only; its ingest rate and search latencies."""

    hybrid: Score
    text: Score
    ingest_rate: float
    latencies: list[float]


def measure(
    url: str,
    folder: Path,
    conversations: list[Conversation],
    questions: list[Question],
    protocol: str,
) -> Measured:
    """Store the conversations as a client of `protocol` into a project of their own, index
    them and ask every question."""
    name = protocol.replace(" ", "-")
    token = create_token(url, f"locomo-{name}")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT id FROM projects WHERE name = %s", (f"locomo-{name}",)
        ).fetchone()
    assert row is not None
    project_id = int(row[0])
    turns = sum(len(c.turns) for c in conversations)
    (folder / name).mkdir()
    with service(url, folder / name) as served:
        port = served.port
        console.print(f"{protocol}: ingesting over HTTP ...")
        sources, ingest_rate = ingest(port, token, conversations, protocol)
        console.print(f"{protocol}: building the passage index ...")
        index_rate = asyncio.run(build_index(url, project_id, turns))
        keys = chunk_keys(url, project_id, sources)
        console.print(f"{protocol}: searching {len(questions)} questions over HTTP ...")
        hybrid_http, latencies = search_over_http(port, token, questions, keys)
    deep = asyncio.run(search_in_process(url, project_id, questions, keys, vectors=True))
    text = asyncio.run(search_in_process(url, project_id, questions, keys, vectors=False))
    console.print(f"{protocol}: index {turns} turns at {index_rate:.0f} turns/s")
    return Measured(merged(hybrid_http, deep), text, ingest_rate, latencies)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="satchel bench locomo", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="locomo10.json")
    parser.add_argument("--conversations", type=int, default=10, help="how many to load")
    args = parser.parse_args(argv)
    conversations, questions = load(args.data.resolve())
    conversations = conversations[: args.conversations]
    subjects = {c.subject for c in conversations}
    questions = [q for q in questions if q.subject in subjects]
    turns = sum(len(c.turns) for c in conversations)
    console.print(f"{len(conversations)} conversations, {turns} turns, {len(questions)} questions")
    folder = Path(tempfile.mkdtemp(prefix="satchel-locomo-"))
    embedded = start_embedded(folder / "data")
    try:
        migrate(embedded.url)
        found = {
            protocol: measure(embedded.url, folder, conversations, questions, protocol)
            for protocol in PROTOCOLS
        }
        bm25 = bm25_score(conversations, questions)
    finally:
        embedded.stop()
        shutil.rmtree(folder, ignore_errors=True)
    dated, text_only = found[DATED], found[TEXT_ONLY]
    columns = {
        "dated: hybrid": dated.hybrid,
        "dated: full text": dated.text,
        "text only: hybrid": text_only.hybrid,
        "text only: full text": text_only.text,
        "text only: plain BM25": bm25,
    }
    console.print(table(columns))
    latencies = dated.latencies + text_only.latencies
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    ingest_rate = min(dated.ingest_rate, text_only.ingest_rate)
    console.print(
        f"ingest {ingest_rate:.0f} turns/s over HTTP (the slower protocol); search p50 "
        f"{p50:.1f} ms, p95 {p95:.1f} ms"
    )
    summary: dict[str, float] = {
        "turn_recall_all_at_10": round(dated.hybrid.rate("turn_recall_all_at_10"), 4),
        "session_recall_any_at_5": round(dated.hybrid.rate("session_recall_any_at_5"), 4),
        "text_only_turn_recall_all_at_10": round(text_only.hybrid.rate("turn_recall_all_at_10"), 4),
        "text_only_session_recall_any_at_5": round(
            text_only.hybrid.rate("session_recall_any_at_5"), 4
        ),
        "bm25_turn_recall_all_at_10": round(bm25.rate("turn_recall_all_at_10"), 4),
        "bm25_session_recall_any_at_5": round(bm25.rate("session_recall_any_at_5"), 4),
        "search_p95_ms": round(p95, 2),
        "ingest_turns_per_s": round(ingest_rate, 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
