"""Extraction quality of a formation model over the corpus in `formation_corpus.yaml`.

    satchel bench formation [--base-url URL --model NAME] [--limit N] [--timeout S]

Each turn goes through the worker's own extraction (`satchel.memory.formation.worker.extract`:
the prompt, the bounded request in the strongest JSON form the server takes, and every admission
check) with the vocabulary of a freshly migrated embedded PostgreSQL. A turn whose extraction
fails (cut, invalid, late or refused reply) counts as parked, as the worker with one attempt
would park it. Admitted facts are matched to the expected ones on subject, predicate and object
after normalisation (case, punctuation, a leading article). Without `--base-url` it starts
llama.cpp's server with SmolLM2-135M-Instruct. Prints a table by kind of turn, then one JSON
object as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import yaml
from rich.console import Console
from rich.table import Table

from satchel.memory.config import ModelClientSettings
from satchel.memory.domain import Candidate, RejectedClaim, StoredMessage
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.formation.worker import extract
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import start_embedded
from satchel.memory.store.formation import vocabulary

CORPUS = Path(__file__).with_name("formation_corpus.yaml")
ARTICLES = ("the ", "a ", "an ", "my ", "our ")
Triple = tuple[str, str, str]


def norm(text: str) -> str:
    """Lowercase, punctuation dropped, whitespace collapsed, a leading article dropped."""
    words = " ".join(re.sub(r"[^\w\s/-]", " ", text.lower()).split())
    for article in ARTICLES:
        words = words.removeprefix(article)
    return words


def expected(fact: str) -> list[set[str]]:
    """A corpus fact ("subject; predicate; object", spellings split by "|") as accepted sets."""
    return [{norm(spelling) for spelling in part.split("|")} for part in fact.split(";")]


def matches(triple: Triple, fact: list[set[str]]) -> bool:
    return all(norm(value) in accepted for value, accepted in zip(triple, fact, strict=True))


@dataclass
class Score:
    """Counts of one kind of turn (or all of them)."""

    turns: int = 0
    expected: int = 0
    admitted: int = 0
    correct: int = 0
    found: int = 0
    parked: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def add(self, other: Score) -> None:
        for name in ("turns", "expected", "admitted", "correct", "found", "parked"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rejected.update(other.rejected)

    @property
    def precision(self) -> float:
        """Correct over admitted; with nothing admitted, 1 when nothing was expected, else 0."""
        if self.admitted:
            return self.correct / self.admitted
        return 0.0 if self.expected else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


def messages_of(turn: dict[str, Any]) -> list[StoredMessage]:
    now = datetime.now(UTC)
    said = [("user", turn["user"])] + (
        [("assistant", turn["assistant"])] if "assistant" in turn else []
    )
    return [StoredMessage(uuid.uuid4(), n, role, text, now) for n, (role, text) in enumerate(said)]


async def score_turn(
    model: ChatModel, turn: dict[str, Any], predicates: dict[str, str]
) -> tuple[Score, str | None]:
    """The turn's score and, when it parked, the reason."""
    score = Score(turns=1, expected=len(turn["facts"]))
    facts = [expected(fact) for fact in turn["facts"]]
    try:
        outcome = await extract(model, messages_of(turn), predicates)
    except ModelError as exc:
        score.parked = 1
        return score, str(exc)
    admitted: set[Triple] = set()
    for item in outcome:
        if isinstance(item, RejectedClaim):
            score.rejected[item.reason] += 1
        elif isinstance(item, Candidate):
            admitted.add((item.subject, item.predicate, item.object))
    score.admitted = len(admitted)
    score.correct = sum(any(matches(t, f) for f in facts) for t in admitted)
    score.found = sum(any(matches(t, f) for t in admitted) for f in facts)
    return score, None


@contextmanager
def predicates_of_a_fresh_database() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="satchel-bench-formation-") as folder:
        embedded = start_embedded(Path(folder) / "data")
        try:
            migrate(embedded.url)

            async def read() -> dict[str, str]:
                async with await psycopg.AsyncConnection.connect(embedded.url) as conn:
                    return await vocabulary(conn)

            yield asyncio.run(read())
        finally:
            embedded.stop()


async def score_corpus(
    model: ChatModel, corpus: list[dict[str, Any]], predicates: dict[str, str]
) -> tuple[dict[str, Score], Counter[str]]:
    """Each kind's score, and why turns parked."""
    kinds: dict[str, Score] = {}
    parked: Counter[str] = Counter()
    try:
        for number, turn in enumerate(corpus, 1):
            score, reason = await score_turn(model, turn, predicates)
            kinds.setdefault(turn["kind"], Score()).add(score)
            if reason:
                parked[reason.split(";")[0]] += 1
            print(f"turn {number}/{len(corpus)} ({turn['kind']}): {reason or 'formed'}", flush=True)
    finally:
        await model.aclose()
    return kinds, parked


def measure(args: argparse.Namespace, base_url: str, model_name: str) -> dict[str, Any]:
    corpus = yaml.safe_load(CORPUS.read_text())[: args.limit]
    settings = ModelClientSettings(
        model=model_name,
        base_url=base_url,
        api_key_env=args.api_key_env,
        allowed_hosts=((urlsplit(base_url).hostname or "").lower(),),
        timeout=args.timeout,
        retries=0,
    )
    model = ChatModel(settings)
    with predicates_of_a_fresh_database() as predicates:
        started = time.monotonic()
        kinds, parked = asyncio.run(score_corpus(model, corpus, predicates))
        seconds = time.monotonic() - started
    total = Score()
    for score in kinds.values():
        total.add(score)
    table = Table(title=f"satchel formation: {model_name} at {base_url}")
    for column in (
        "kind",
        "turns",
        "expected",
        "admitted",
        "correct",
        "precision",
        "recall",
        "F1",
        "parked",
    ):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind, score in [*sorted(kinds.items()), ("all", total)]:
        table.add_row(
            kind,
            str(score.turns),
            str(score.expected),
            str(score.admitted),
            str(score.correct),
            f"{score.precision:.2f}",
            f"{score.recall:.2f}",
            f"{score.f1:.2f}",
            str(score.parked),
        )
    Console(width=120).print(table)
    turns = max(total.turns, 1)
    return {
        "model": model_name,
        "turns": total.turns,
        "expected": total.expected,
        "admitted": total.admitted,
        "precision": round(total.precision, 3),
        "recall": round(total.recall, 3),
        "f1": round(total.f1, 3),
        "parked_share": round(total.parked / turns, 3),
        "parked_reasons": dict(parked),
        "rejections": dict(total.rejected),
        "quote_rejections": total.rejected["unlocatable_quote"],
        "json_form": model.json_form,
        "prompt_tokens_per_turn": round(model.usage.prompt_tokens / turns, 1),
        "completion_tokens_per_turn": round(model.usage.completion_tokens / turns, 1),
        "seconds_per_turn": round(seconds / turns, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible base URL (default: SmolLM2 here)")
    parser.add_argument("--model", help="the model name the server knows (with --base-url)")
    parser.add_argument("--api-key-env", help="the NAME of the variable holding the key")
    parser.add_argument("--limit", type=int, help="only the first N turns of the corpus")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--threads", type=int, default=2, help="the SmolLM2 server's threads")
    args = parser.parse_args()
    if args.base_url:
        if not args.model:
            parser.error("--base-url needs --model (the model name the server serves)")
        result = measure(args, args.base_url, args.model)
    else:
        from satchel.harness.llama import smollm2_server

        with smollm2_server(threads=args.threads) as server:
            result = measure(args, server.base_url, server.model)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
