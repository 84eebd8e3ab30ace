"""Latency and throughput of the memory deployment against the design's targets.

Starts its own embedded PostgreSQL in a temporary directory and `satchel serve` on a loopback
port (a separate process, as a user runs it: worker on, access log on), then measures over HTTP
with keep-alive connections:

* observe: once the worker has indexed the context subjects' turns (loaded below without
  vectors or counts) and written the recall project's theme reports, so that the burst is all
  it has to do (the table says how long both took), one client posting turns one after another
  (p50, p95 in ms), then 8 concurrent clients (turns/s over the whole run), while the worker
  counts and embeds what they write; the table says how far it had got when the writes ended;
* recall at 100k facts and 100k stored messages: facts loaded in bulk with COPY, row for row what
  `records/assert` writes (a curated source turn and its message, entities and the observations
  naming them, the fact and its evidence), and 50k observed turns of 200 people (see
  `_corpus.py`: real MiniLM vectors of 2,000 distinct sentences, jittered), indexed and counted as
  the worker leaves them; then 1-hop questions naming one person, default surfaces (facts and
  passages) (p50, p95), once the worker is idle, as a deployment mostly is. Before them, the
  worker's catch-up after the burst is timed with the API idle; then a second burst of 2,000
  turns, and 200 recalls asked while the worker works through it (shown apart);
* passage search over the same 200k messages, distinct questions, 200 candidates (p50, p95);
* contexts for a subject with 10k formed turns (p95), once with only the turns and once with
  the segments a formation worker would have written over them (levels 1..4, 8 per parent).

The table shows each figure beside its target; the last line printed is one JSON object with
`observe_p50_ms`, `observe_p95_ms`, `observe_8_clients_per_s`, `recall_p50_ms`,
`recall_p95_ms`, `passages_p95_ms`, `contexts_p95_ms` (the worse of the two context rows),
`worker_catch_up_turns_per_s` (the observed turns not yet formed, embedded and counted when the
writes ended, over `worker_catch_up_s`), `passages_p50_ms`, `recall_backlog_p50_ms` (while the
worker catches up with the second burst), `worker_catch_up_s` (seconds from the end of the
writes until every observed turn is formed, embedded and counted), `reports` and
`reports_written_s` (the theme reports, and the seconds the worker took to write them once the
context turns were indexed), and
`recall_cpu_ms` and `passages_cpu_ms`: the CPU time a recall and a passage search cost, the
service, its worker, PostgreSQL and the clients together (the table shows each part, and how
busy the cores were: on a small machine, latency is mostly this time shared out over its cores).
The table also gives the CPU seconds the worker, PostgreSQL and the service spent during the
catch-up, and what the local embedder alone takes for one of the burst's texts on one core,
measured first on the quiet machine (the turns a second one of the worker's model threads
could embed there).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

from _corpus import load_conversations, passage_question
from _memory_load import load_facts, load_turns, project
from _service import Client, cpu_spent, percentile, service, worker_quiet
from satchel.memory.passages.embedder import EmbeddingSettings, load_embedder
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import pgdata_of, start_embedded

ASKED = "Turn {}: can we move the design review to Thursday at 3?"
ANSWERED = "Done: Thursday 15:00, and I told the others in the channel."
TARGETS = {
    "observe_p50_ms": ("<=", 5.0),
    "observe_p95_ms": ("<=", 15.0),
    "observe_8_clients_per_s": (">=", 500.0),
    "recall_p50_ms": ("<=", 10.0),
    "recall_p95_ms": ("<=", 25.0),
    "passages_p95_ms": ("<=", 50.0),
    "contexts_p95_ms": ("<=", 20.0),
    "worker_catch_up_turns_per_s": (">=", 250.0),
}

console = Console()


# ---- observe -----------------------------------------------------------------------------------


def turn(n: int) -> dict[str, Any]:
    return {
        "idempotency_key": str(uuid.uuid4()),
        "data_subject_id": f"person-{n % 50}",
        "messages": [
            {"role": "user", "content": f"Turn {n}: I moved my standup to 9:30 on Tuesdays."},
            {"role": "assistant", "content": "Noted; I will remind you on Monday evenings."},
        ],
    }


def observe_one_client(port: int, token: str, count: int, warmup: int) -> list[float]:
    client = Client(port, token)
    for n in range(warmup):
        client.post("/v1/observations", turn(n), 201)
    samples = [client.timed("/v1/observations", turn(n), 201) for n in range(count)]
    client.close()
    return samples


def observe_concurrently(port: int, token: str, clients: int, each: int, first: int = 0) -> float:
    """Turns per second with `clients` clients posting `each` turns apiece (numbered from
    `first`)."""
    start = threading.Barrier(clients + 1)
    failures: list[BaseException] = []

    def run(index: int) -> None:
        client = Client(port, token)
        client.post("/v1/observations", turn(first + index), 201)
        start.wait()
        try:
            for n in range(each):
                client.post("/v1/observations", turn(first + index * each + n), 201)
        except BaseException as exc:
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise failures[0]
    return clients * each / elapsed


def worker_progress(url: str, project_id: int) -> tuple[int, int, int, int]:
    """How many of the project's turns are stored, formed, embedded and counted."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT p.stored + 1, coalesce(p.formed, -1) + 1, coalesce(r.vectors_through, -1) + 1,"
            " coalesce(r.terms_through, -1) + 1 FROM projects p"
            " LEFT JOIN passage_progress r ON r.project_id = p.id WHERE p.id = %s",
            (project_id,),
        ).fetchone()
    assert row is not None
    stored, formed, embedded, counted = row
    return stored, formed, embedded, counted


def turns_left(progress: tuple[int, int, int, int]) -> int:
    """Of `worker_progress`'s stored turns, those not yet formed, embedded and counted."""
    stored, *done = progress
    return stored - min(done)


def embedder_alone(count: int = 300) -> float:
    """Milliseconds the local embedder takes for one of the burst's user texts, on this thread
    (each turn's reply is the same text, embedded once a batch)."""
    embedder = load_embedder(EmbeddingSettings())
    texts = [turn(n)["messages"][0]["content"] for n in range(count)]
    embedder.embed(texts[:20])
    began = time.perf_counter()
    embedder.embed(texts)
    return (time.perf_counter() - began) / count * 1000


def caught_up(url: str, project_id: int, timeout: float, began: float) -> float:
    """Seconds from `began` (on the `perf_counter` clock) until the worker has formed, embedded
    and counted every stored turn."""
    while True:
        stored, *done = worker_progress(url, project_id)
        if min(done) >= stored:
            return time.perf_counter() - began
        if time.perf_counter() - began > timeout:
            raise RuntimeError(f"the worker did not catch up in {timeout:g} s: {stored}, {done}")
        time.sleep(0.25)


def report_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM reports").fetchone()
    assert row is not None
    count: int = row[0]
    return count


# ---- reads -------------------------------------------------------------------------------------


def timed_reads(
    port: int, token: str, body: Callable[[int], dict[str, Any]], path: str, count: int
) -> list[float]:
    client = Client(port, token)
    for n in range(min(50, count)):
        client.post(path, body(n))
    samples = [client.timed(path, body(n)) for n in range(count)]
    client.close()
    return samples


def checked_recall(port: int, token: str, person: str) -> None:
    """A recall about a loaded person finds that person's facts (the load is what recall reads)."""
    client = Client(port, token)
    answer = client.post("/v1/recalls", {"question": f"What do we know about {person}?"})
    client.close()
    if not answer["facts"]:
        raise RuntimeError(f"a recall about {person} found no facts: {answer}")


# ---- report ------------------------------------------------------------------------------------


def report(results: dict[str, float | None], notes: dict[str, str]) -> None:
    table = Table(title="satchel memory (embedded PostgreSQL, loopback)")
    for column in ("measure", "value", "target", ""):
        table.add_column(column)
    for key, (op, goal) in TARGETS.items():
        value = results.get(key)
        if value is None:
            table.add_row(key, "n/a", f"{op} {goal:g}", notes.get(key, "not measured"))
            continue
        met = value <= goal if op == "<=" else value >= goal
        mark = "[green]met[/green]" if met else "[red]missed[/red]"
        table.add_row(key, f"{value:.2f}", f"{op} {goal:g}", mark)
    for key, note in notes.items():
        if key not in TARGETS:
            table.add_row(key, "", "", note)
    console.print(table)


def run(args: argparse.Namespace, folder: Path) -> dict[str, float | None]:
    results: dict[str, float | None] = dict.fromkeys(TARGETS)
    notes: dict[str, str] = {}
    embedded = start_embedded(folder / "data")
    try:
        url = embedded.url
        migrate(url)
        alone = embedder_alone()
        notes["embedder alone"] = (
            f"{alone:.2f} ms a turn's text on one core: {1000 / alone:.0f} turns/s a core"
        )
        with psycopg.connect(url, autocommit=True) as conn:
            observe_project, observe_token = project(conn, "observe", url)
            recall_project, recall_token = project(conn, "recall", url)
            contexts_project, contexts_token = project(conn, "contexts", url)
        loaded = load_facts(url, recall_project, args.facts, args.seed)
        notes["recall load"] = f"{args.facts} facts by COPY in {loaded.seconds:.1f} s"
        spent = load_conversations(
            url,
            recall_project,
            args.facts,
            args.messages,
            load_embedder(EmbeddingSettings()),
            args.seed,
        )
        notes["passages load"] = f"{args.messages} messages, vectors and index in {spent:.1f} s"
        spent = load_turns(url, contexts_project, "long-history", args.turns, segments=False)
        with psycopg.connect(url, autocommit=True) as conn:
            segmented_project, segmented_token = project(conn, "segmented", url)
        spent += load_turns(url, segmented_project, "long-history", args.turns, segments=True)
        notes["contexts load"] = f"2 x {args.turns} turns by COPY in {spent:.1f} s"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        with service(url, folder) as served:
            port = served.port
            # The context subjects' turns are loaded without vectors or counts, and the recall
            # project's facts without theme reports: the worker does both first, so that the
            # burst below is all it catches up with (a burst stops a report pass, but a graph
            # being partitioned would go on beside it).
            began = time.perf_counter()
            for loaded_project in (contexts_project, segmented_project):
                indexed_s = caught_up(url, loaded_project, args.catch_up, began)
            notes["worker before writes"] = (
                f"the context subjects' 2 x {args.turns} turns indexed in {indexed_s:.1f} s"
            )
            written_s = worker_quiet(served, args.catch_up)
            reports = report_count(url)
            results["reports_written_s"] = written_s
            results["reports"] = reports
            notes["theme reports"] = (
                f"{reports} written; the worker quiet {written_s:.1f} s after that indexing"
            )
            one = observe_one_client(port, observe_token, args.observe, args.warmup)
            results["observe_p50_ms"] = statistics.median(one)
            results["observe_p95_ms"] = percentile(one, 0.95)
            results["observe_8_clients_per_s"] = observe_concurrently(
                port, observe_token, args.clients, args.observe // 2
            )
            writes_ended = time.perf_counter()
            stored, formed, vectored, counted = worker_progress(url, observe_project)
            left = turns_left((stored, formed, vectored, counted))
            notes["worker during writes"] = (
                f"of {stored} turns written, {vectored} embedded and {counted} counted by then"
            )
            rng = random.Random(args.seed + 1)
            asked = [rng.choice(loaded.people) for _ in range(args.reads + args.backlog_reads)]
            checked_recall(port, recall_token, asked[0])

            def recalled(n: int) -> dict[str, Any]:
                return {"question": f"Where does {asked[n]} work?", "hops": 1}

            # The catch-up with the API idle, as a deployment after a burst.
            with cpu_spent(served, pgdata_of(folder / "data")) as catching_up:
                spent = caught_up(url, observe_project, args.catch_up, writes_ended)
            results["worker_catch_up_s"] = spent
            results["worker_catch_up_turns_per_s"] = left / spent
            notes["worker catching up"] = (
                f"the other {left} of the {stored} turns in {spent:.1f} s after the writes,"
                f" {left / spent:.0f} turns/s, the API idle"
            )
            notes["catch-up CPU"] = (
                f"s of CPU: worker {catching_up.worker:.1f}, PostgreSQL"
                f" {catching_up.database:.1f}, service {catching_up.service:.1f};"
                f" the cores {catching_up.busy:.0%} busy"
            )
            worker_quiet(served, args.catch_up)
            # A second, smaller burst, and recalls while the worker catches up with it.
            observe_concurrently(
                port, observe_token, args.clients, args.backlog_turns // args.clients, 10**6
            )
            behind = turns_left(worker_progress(url, observe_project))
            busy = timed_reads(port, recall_token, recalled, "/v1/recalls", args.backlog_reads)
            after = turns_left(worker_progress(url, observe_project))
            results["recall_backlog_p50_ms"] = statistics.median(busy)
            notes["recall during a backlog"] = (
                f"p50 {statistics.median(busy):.2f} ms, p95 {percentile(busy, 0.95):.2f} ms, with"
                f" {behind} turns left to do before and {after} after"
            )
            caught_up(url, observe_project, args.catch_up, time.perf_counter())
            quiet_s = worker_quiet(served, args.catch_up)
            notes["worker after the catch-up"] = f"quiet {quiet_s:.1f} s after it"
            with cpu_spent(served, pgdata_of(folder / "data")) as cost:
                recall = timed_reads(
                    port,
                    recall_token,
                    lambda n: recalled(args.backlog_reads + n),
                    "/v1/recalls",
                    args.reads,
                )
            results["recall_p50_ms"] = statistics.median(recall)
            results["recall_p95_ms"] = percentile(recall, 0.95)
            results["recall_cpu_ms"] = cost.total() / len(recall) * 1000
            notes["recall"] = "1 hop, default surfaces (facts and passages), worker idle"
            notes["recall CPU"] = cost.per(len(recall))
            with cpu_spent(served, pgdata_of(folder / "data")) as cost:
                searched = timed_reads(
                    port,
                    recall_token,
                    # the approximate search (HNSW); the default, exact one scans every vector
                    lambda n: {"question": passage_question(n), "candidates": 200},
                    "/v1/passages/search",
                    args.reads,
                )
            results["passages_p50_ms"] = statistics.median(searched)
            results["passages_p95_ms"] = percentile(searched, 0.95)
            results["passages_cpu_ms"] = cost.total() / len(searched) * 1000
            notes["passages"] = (
                f"p50 {results['passages_p50_ms']:.2f} ms over 200k messages, 200 candidates"
            )
            notes["passages CPU"] = cost.per(len(searched))
            plain = timed_reads(
                port,
                contexts_token,
                lambda _: {"data_subject_id": "long-history"},
                "/v1/contexts",
                args.reads,
            )
            segmented = timed_reads(
                port,
                segmented_token,
                lambda _: {"data_subject_id": "long-history"},
                "/v1/contexts",
                args.reads,
            )
            notes["contexts, turns only"] = f"p95 {percentile(plain, 0.95):.2f} ms"
            notes["contexts, with segments"] = f"p95 {percentile(segmented, 0.95):.2f} ms"
            results["contexts_p95_ms"] = max(percentile(plain, 0.95), percentile(segmented, 0.95))
    finally:
        embedded.stop()
    report(results, notes)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--observe", type=int, default=2000, help="timed observations (1 client)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed observations first")
    parser.add_argument("--clients", type=int, default=8, help="concurrent observing clients")
    parser.add_argument("--facts", type=int, default=100_000, help="facts loaded for recall")
    parser.add_argument("--messages", type=int, default=100_000, help="stored messages")
    parser.add_argument("--turns", type=int, default=10_000, help="turns of the context subject")
    parser.add_argument("--reads", type=int, default=500, help="timed recalls and contexts")
    parser.add_argument(
        "--backlog-turns", type=int, default=2000, help="the second burst, for --backlog-reads"
    )
    parser.add_argument(
        "--backlog-reads", type=int, default=200, help="recalls while the worker catches up"
    )
    parser.add_argument(
        "--catch-up", type=float, default=600.0, help="seconds the worker may take to catch up"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="satchel-bench-memory-"))
    try:
        results = run(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({key: None if v is None else round(v, 3) for key, v in results.items()}))


if __name__ == "__main__":
    main()
