"""API replicas and workers sharing one external PostgreSQL server, side by side.

Starts a PostgreSQL 18 + pgvector server apart from satchel (the one the tests start: its own
data folder, TCP on loopback, a password; `--admin-url` uses a server of yours instead, making
and dropping its own databases there), then over HTTP with keep-alive connections:

* observe: `--clients` clients posting turns (each its own subject, projects in turn) for
  `--seconds`, over one API replica (`satchel serve --role api`), then over two (each client
  keeps to one replica): turns/s and per-request p50, p95;
* catch-up: the turns the observe runs stored are the backlog; a copy of the database for each
  run (`CREATE DATABASE ... TEMPLATE`), one `satchel worker`, then two: seconds until every turn
  is formed and every message embedded (the local MiniLM; no formation model), turns/s;
* recall: over the caught-up copy, the same clients asking a question about their subject for
  `--seconds`, over one replica, then two: recalls/s and p50, p95.

Every run shows the CPU seconds spent by the replicas, the workers, PostgreSQL and the clients,
and how busy the cores were: what limits a figure on a small machine. The last line printed is
one JSON object: `observe_per_s_1`, `observe_per_s_2`, `recall_per_s_1`, `recall_per_s_2`,
`catch_up_s_1`, `catch_up_s_2` (the suffix: replicas or workers), and `backlog` (turns).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import psycopg
from rich.console import Console
from rich.table import Table

from _service import Client, _cpu, _grown, _idle, _whole, free_port, percentile, ready
from satchel.memory.service.tokens import create_token
from satchel.memory.store.database import describe_url, migrate

TESTS = Path(__file__).resolve().parents[1] / "tests" / "memory"
PROJECTS = ("north", "south", "east", "west")
PAUSE = 0.2  # seconds between two looks at the backlog


@dataclass(slots=True)
class Run:
    """One measured run: its name, how many things it did in how long, latencies, CPU."""

    name: str
    done: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    busy: float = 0.0

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0


class Processes:
    """`satchel serve --role api` replicas and `satchel worker`s over one database."""

    def __init__(self, url: str, folder: Path) -> None:
        self.env = {**os.environ, "SATCHEL_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
        self.env["SATCHEL_ACCESS_LOG"] = "0"
        self.folder = folder
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.ports: list[int] = []

    def _start(self, kind: str, *command: str) -> subprocess.Popen[bytes]:
        log = self.folder / f"{kind}-{len(self.started)}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "satchel", *command],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append((kind, process))
        return process

    def replica(self) -> int:
        port = free_port()
        process = self._start("replica", "serve", "--role", "api", "--port", str(port))
        deadline = time.monotonic() + 120
        while not ready(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"a replica did not start:\n{self.logs()}")
            time.sleep(0.1)
        self.ports.append(port)
        return port

    def worker(self) -> None:
        self._start("worker", "worker")

    def pids(self, kind: str) -> list[psutil.Process]:
        return [psutil.Process(p.pid) for k, p in self.started if k == kind and p.poll() is None]

    def logs(self) -> str:
        return "\n".join(path.read_text()[-2000:] for path in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        for _, process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _, process in self.started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.started.clear()
        self.ports.clear()


@contextlib.contextmanager
def processes(url: str, folder: Path) -> Iterator[Processes]:
    running = Processes(url, folder)
    try:
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def measured(run: Run, running: Processes, postmaster: psutil.Process | None) -> Iterator[Run]:
    """The CPU each group spends while the block runs, and the share of the cores busy."""

    def groups() -> dict[str, dict[int, float]]:
        return {
            "replicas": _cpu(running.pids("replica")),
            "workers": _cpu(running.pids("worker")),
            "PostgreSQL": _cpu([postmaster, *postmaster.children(recursive=True)])
            if postmaster
            else {},
            "clients": _cpu([psutil.Process()]),
        }

    machine = psutil.cpu_times()
    before = groups()
    started = time.perf_counter()
    yield run
    run.seconds = run.seconds or time.perf_counter() - started
    after = groups()
    ended = psutil.cpu_times()
    run.cpu = {name: _grown(before[name], after[name]) for name in before}
    whole = _whole(ended) - _whole(machine)
    run.busy = 1 - (_idle(ended) - _idle(machine)) / whole if whole > 0 else 0.0


def clients_for(tokens: dict[str, str], ports: list[int], count: int) -> list[Client]:
    """`count` clients, projects in turn, spread over `ports` round robin."""
    names = sorted(tokens)
    return [Client(ports[n % len(ports)], tokens[names[n % len(names)]]) for n in range(count)]


def hammer(
    clients: list[Client], seconds: float, request: Callable[[Client, int, int], float]
) -> tuple[int, list[float]]:
    """Each client sends requests one after another for `seconds`: how many, their latencies."""
    latencies: list[list[float]] = [[] for _ in clients]
    stop = time.monotonic() + seconds

    def one(number: int) -> None:
        count = 0
        while time.monotonic() < stop:
            count += 1
            latencies[number].append(request(clients[number], number, count))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = [ms for each in latencies for ms in each]
    return len(flat), flat


def observe(client: Client, number: int, count: int) -> float:
    said = (
        f"Client {number} note {count}: the parcel for order {count * 7 + number} left the depot."
    )
    body = {
        "idempotency_key": str(uuid.uuid4()),
        "data_subject_id": f"person-{number}",
        "messages": [{"role": "user", "content": said}],
    }
    return client.timed("/v1/observations", body, expect=201)


def recall(client: Client, number: int, count: int) -> float:
    body = {
        "question": f"where is order {count * 7 + number}?",
        "data_subject_id": f"person-{number}",
    }
    return client.timed("/v1/recalls", body)


def backlog_left(url: str) -> int:
    """Turns not yet formed plus messages not yet embedded."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM observations WHERE formed_at IS NULL)"
            " + (SELECT count(*) FROM messages) - (SELECT count(*) FROM message_vectors)"
        ).fetchone()
    assert row is not None
    return int(row[0])


def stored_turns(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM observations").fetchone()
    assert row is not None
    return int(row[0])


def with_database(url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=name)


class Server:
    """The PostgreSQL server the runs share: databases made on it and dropped at the end."""

    def __init__(self, admin_url: str, postmaster: psutil.Process | None) -> None:
        self.admin_url = admin_url
        self.postmaster = postmaster
        self.made: list[str] = []

    def database(self, template: str | None = None) -> str:
        name = f"satchel_bench_{uuid.uuid4().hex[:10]}"
        copy = f" TEMPLATE {template}" if template else ""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}{copy}")
        self.made.append(name)
        url = with_database(self.admin_url, name)
        if template is None:
            migrate(url)
        return url

    def drop(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def server(admin_url: str | None) -> Iterator[Server]:
    """The given server, or one of the benchmark's own (the tests' external server)."""
    if admin_url:
        shared = Server(admin_url, postmaster_of(admin_url))
        try:
            yield shared
        finally:
            shared.drop()
        return
    sys.path.insert(0, str(TESTS))
    own = importlib.import_module("external_postgres").start_external()
    try:
        yield Server(own.url, psutil.Process(own.pid))
    finally:
        own.stop()


def postmaster_of(admin_url: str) -> psutil.Process | None:
    """The postmaster of the server at `admin_url` when it runs on this machine, else None."""
    with psycopg.connect(admin_url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    try:
        parent: psutil.Process | None = psutil.Process(int(row[0])).parent()
    except psutil.Error:
        return None
    return parent


def over_replicas(
    name: str,
    request: Callable[[Client, int, int], float],
    url: str,
    folder: Path,
    shared: Server,
    tokens: dict[str, str],
    args: argparse.Namespace,
) -> list[Run]:
    """`request` sent by the clients for `args.seconds` over one replica, then over two."""
    runs = []
    with processes(url, folder) as running:
        for replicas in (1, 2):
            running.replica()
            clients = clients_for(tokens, running.ports, args.clients)
            with measured(Run(f"{name} x{replicas} api"), running, shared.postmaster) as measuring:
                measuring.done, measuring.latencies = hammer(clients, args.seconds, request)
                measuring.seconds = args.seconds
            runs.append(measuring)
            for client in clients:
                client.close()
    return runs


def run(args: argparse.Namespace, folder: Path) -> tuple[list[Run], int]:
    with server(args.admin_url) as shared:
        url = shared.database()
        tokens = {project: create_token(url, project) for project in PROJECTS}
        runs = over_replicas("observe", observe, url, folder / "observe", shared, tokens, args)
        backlog = stored_turns(url)
        template = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        caught_up = ""
        for workers in (1, 2):
            copy = shared.database(template=str(template))
            with processes(copy, folder / f"catch-up-{workers}") as running:
                with measured(
                    Run(f"catch-up x{workers} worker"), running, shared.postmaster
                ) as measuring:
                    for _ in range(workers):
                        running.worker()
                    while backlog_left(copy) > 0:
                        if not running.pids("worker"):
                            raise RuntimeError(f"a worker stopped:\n{running.logs()}")
                        time.sleep(PAUSE)
                    measuring.done = backlog
                runs.append(measuring)
            caught_up = copy
        runs += over_replicas("recall", recall, caught_up, folder / "recall", shared, tokens, args)
        print(f"database server: {describe_url(url)}", file=sys.stderr)
    return runs, backlog


def show(runs: list[Run], backlog: int) -> dict[str, float]:
    table = Table(
        title=f"replicas and workers on one PostgreSQL server, {os.cpu_count()} cores"
        " (CPU: seconds spent in the run)",
        box=None,
    )
    columns = ("run", "done", "s", "per s", "p50 ms", "p95 ms")
    parts = {
        "replicas": "CPU api",
        "workers": "CPU wrk",
        "PostgreSQL": "CPU pg",
        "clients": "CPU cli",
    }
    for column in (*columns, *parts.values(), "busy"):
        table.add_column(column, justify="left" if column == "run" else "right", no_wrap=True)
    for each in runs:
        timed = bool(each.latencies)
        table.add_row(
            each.name,
            str(each.done),
            f"{each.seconds:.1f}",
            f"{each.rate:.1f}",
            f"{percentile(each.latencies, 0.5):.1f}" if timed else "-",
            f"{percentile(each.latencies, 0.95):.1f}" if timed else "-",
            *(f"{each.cpu[name]:.1f}" for name in parts),
            f"{each.busy:.0%}",
        )
    Console(width=max(120, Console().width)).print(table)
    by_name = {each.name: each for each in runs}
    return {
        "observe_per_s_1": by_name["observe x1 api"].rate,
        "observe_per_s_2": by_name["observe x2 api"].rate,
        "recall_per_s_1": by_name["recall x1 api"].rate,
        "recall_per_s_2": by_name["recall x2 api"].rate,
        "catch_up_s_1": by_name["catch-up x1 worker"].seconds,
        "catch_up_s_2": by_name["catch-up x2 worker"].seconds,
        "backlog": float(backlog),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed run")
    parser.add_argument(
        "--admin-url",
        metavar="URL",
        help="a PostgreSQL server of yours (a role that may create databases); default: start one",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="satchel-bench-replicas-"))
    try:
        for part in ("observe", "catch-up-1", "catch-up-2", "recall"):
            (folder / part).mkdir()
        runs, backlog = run(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results = show(runs, backlog)
    print(json.dumps({key: round(value, 3) for key, value in results.items()}))


if __name__ == "__main__":
    main()
