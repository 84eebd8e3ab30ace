"""Load over several API replicas: client threads observing turns (each with an idempotency
key, retried with the same key on another replica when an answer is lost) and recalling, every
answer's status counted.

    with Load(tokens, [replica_a.base_url, replica_b.base_url]) as load:
        ...                      # kill a replica: its clients move to the next one
    load.acknowledged            # key -> Turn, for every observation answered 201
    load.statuses                # Counter of every status answered (0: no answer)
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import httpx

CLIENTS = 4
RECALL_EVERY = 4  # a recall after every 4th observation
RETRY_PAUSE = 0.05  # seconds between two tries of a turn whose answer was lost or refused


@dataclass(frozen=True, slots=True)
class Turn:
    project: str
    subject: str
    content: str
    observation_id: str


class Load:
    """`CLIENTS` threads spread over `base_urls`; each thread works for one project in turn."""

    def __init__(self, tokens: dict[str, str], base_urls: list[str]) -> None:
        self.tokens = tokens
        self.base_urls = list(base_urls)
        self.down: set[str] = set()  # replicas the test killed: no client picks them again
        self.acknowledged: dict[str, Turn] = {}
        self.statuses: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(CLIENTS)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in self.threads), "a client hung"

    def mark_down(self, base_url: str) -> None:
        with self.lock:
            self.down.add(base_url)

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Until `count` more turns than now are acknowledged."""
        target = len(self.acknowledged) + count
        deadline = time.monotonic() + timeout
        while len(self.acknowledged) < target:
            assert time.monotonic() < deadline, f"the load stalled: {self.statuses}"
            time.sleep(0.02)

    def _replicas(self, number: int) -> itertools.cycle[str]:
        start = number % len(self.base_urls)
        return itertools.cycle(self.base_urls[start:] + self.base_urls[:start])

    def _count(self, status: int) -> None:
        with self.lock:
            self.statuses[status] += 1

    def _post(self, client: httpx.Client, url: str, path: str, token: str, body: object) -> int:
        """One request; its status, 0 when no answer came."""
        try:
            answer = client.post(
                url + path, json=body, headers={"Authorization": f"Bearer {token}"}
            )
        except httpx.TransportError:
            self._count(0)
            return 0
        self._count(answer.status_code)
        return answer.status_code

    def _run(self, number: int) -> None:
        projects = itertools.cycle(sorted(self.tokens))
        replicas = self._replicas(number)
        with httpx.Client(timeout=30) as client:
            for count in itertools.count(1):
                if self.stopping.is_set():
                    return
                project = next(projects)
                subject = f"person-{number}"
                content = f"Client {number} says: turn {count} of {project}, kept in jar {count}."
                key = str(uuid.uuid4())
                body = {
                    "idempotency_key": key,
                    "data_subject_id": subject,
                    "messages": [{"role": "user", "content": content}],
                }
                receipt = self._observe(client, replicas, self.tokens[project], body)
                with self.lock:
                    self.acknowledged[key] = Turn(project, subject, content, receipt)
                if count % RECALL_EVERY == 0:
                    url = self._next_up(replicas)
                    question = {"question": f"jar {count}", "data_subject_id": subject}
                    self._post(client, url, "/v1/recalls", self.tokens[project], question)

    def _next_up(self, replicas: itertools.cycle[str]) -> str:
        while (url := next(replicas)) in self.down:
            continue
        return url

    def _observe(
        self, client: httpx.Client, replicas: itertools.cycle[str], token: str, body: object
    ) -> str:
        """Post `body` until some replica answers 201 (the same key every time); the
        observation's id."""
        while True:
            url = self._next_up(replicas)
            try:
                answer = client.post(
                    url + "/v1/observations",
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                )
            except httpx.TransportError:
                self._count(0)
                time.sleep(RETRY_PAUSE)
                continue
            self._count(answer.status_code)
            if answer.status_code == 201:
                return str(answer.json()["id"])
            time.sleep(RETRY_PAUSE)
