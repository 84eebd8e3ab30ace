"""Remembered grants: a change to a credential takes effect at once, heard or not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from memory_kit import LiveServer

from satchel.memory.api import credentials
from satchel.memory.api.credentials import Credentials
from satchel.memory.service.tokens import revoke_token

SETTLES = 5.0  # seconds a change may take to be heard on a loaded machine


def client(live_server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"})


def freshness(api: httpx.Client) -> int:
    return api.get("/v1/freshness").status_code


def observe(api: httpx.Client) -> int:
    turn = {"data_subject_id": "ann", "messages": [{"role": "user", "content": "hello"}]}
    return api.post("/v1/observations", json=turn).status_code


def settles(ask: Callable[[], int], status: int) -> None:
    """`ask` answers `status` soon (the change is heard), and keeps answering it."""
    deadline = time.monotonic() + SETTLES
    while ask() != status:
        assert time.monotonic() < deadline, f"still not {status} after {SETTLES} s"
        time.sleep(0.01)
    assert [ask() for _ in range(5)] == [status] * 5


def listening(url: str) -> list[int]:
    """The backends listening for credential changes to this database."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
            (f"LISTEN {credentials.CHANNEL}",),
        ).fetchall()
    return [row[0] for row in rows]


def revoke_unheard(url: str, token: str, listener: int | None = None) -> None:
    """Revoke `token` with the notification switched off (and first end the `listener`)."""
    with psycopg.connect(url) as conn:
        conn.execute("ALTER TABLE tokens DISABLE TRIGGER tokens_changed")
        if listener is not None:
            conn.execute("SELECT pg_terminate_backend(%s)", (listener,))
        conn.execute("UPDATE tokens SET revoked_at = now() WHERE prefix = %s", (token[:12],))
        conn.execute("ALTER TABLE tokens ENABLE TRIGGER tokens_changed")


def change(url: str, statement: str, *params: object) -> None:
    """Run one statement on the test database, committed, as an operator would."""
    with psycopg.connect(url) as conn:
        conn.execute(statement, params)


def credentials_of(server: LiveServer) -> Credentials[Any]:
    """The running service's remembered grants (the server runs in this process)."""
    found: Credentials[Any] = server.server.config.app.state.deployment.gate.credentials
    return found


def until_listening(server: LiveServer, but: int | None = None) -> None:
    """Wait until the service listens for credential changes (on a backend other than `but`)."""
    deadline = time.monotonic() + SETTLES
    while not credentials_of(server).listening or listening(server.database_url) in ([], [but]):
        assert time.monotonic() < deadline, "the service never listened for credential changes"
        time.sleep(0.01)


@pytest.fixture
def heard(live_server: LiveServer) -> Iterator[LiveServer]:
    """The live server once its listener listens."""
    until_listening(live_server)
    yield live_server


def test_a_revoked_token_is_refused_though_its_grant_was_remembered(heard: LiveServer) -> None:
    token = heard.token("alpha")
    with client(heard, token) as api:
        assert [freshness(api) for _ in range(3)] == [200] * 3
        assert revoke_token(heard.database_url, token) == 1
        settles(lambda: freshness(api), 401)


def test_a_suspended_project_and_a_narrowed_token_take_effect_at_once(heard: LiveServer) -> None:
    url = heard.database_url
    narrowed, suspended = heard.token("alpha"), heard.token("frozen")
    with client(heard, narrowed) as alpha, client(heard, suspended) as frozen:
        assert (observe(alpha), freshness(frozen)) == (201, 200)
        change(url, "UPDATE tokens SET access = 'read_only' WHERE prefix = %s", narrowed[:12])
        settles(lambda: observe(alpha), 403)
        assert freshness(alpha) == 200
        change(url, "UPDATE projects SET suspended_at = now() WHERE name = 'frozen'")
        settles(lambda: freshness(frozen), 401)
        change(url, "DELETE FROM tokens WHERE prefix = %s", narrowed[:12])
        settles(lambda: freshness(alpha), 401)


def test_grants_are_remembered_and_only_the_notification_ends_them(heard: LiveServer) -> None:
    """With the notification switched off a revocation goes unheard and the remembered grant
    still serves: it is what makes revocation take effect before the grant's lifetime ends."""
    url = heard.database_url
    token = heard.token("alpha")
    with client(heard, token) as api:
        assert freshness(api) == 200
        revoke_unheard(url, token)
        assert freshness(api) == 200
        change(url, "UPDATE projects SET name = name WHERE name = 'alpha'")  # heard
        settles(lambda: freshness(api), 401)


def test_a_lost_listener_forgets_every_grant_and_listens_again(heard: LiveServer) -> None:
    url = heard.database_url
    first, second = heard.token("alpha"), heard.token("alpha")
    with client(heard, first) as one, client(heard, second) as two:
        assert (freshness(one), freshness(two)) == (200, 200)
        (pid,) = listening(url)
        revoke_unheard(url, first, listener=pid)
        # Unheard, the revocation still takes effect: losing the listener forgot the grant.
        settles(lambda: freshness(one), 401)
        until_listening(heard, but=pid)
        assert freshness(two) == 200
        assert revoke_token(url, second) == 1
        settles(lambda: freshness(two), 401)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RememberedGrants(RuleBasedStateMachine):
    """Against a model: a grant is served only while listening, only if it was looked up
    after everything was last forgotten, and only within its lifetime; at most 3 are kept."""

    digests = st.sampled_from([b"a", b"b", b"c", b"d"])

    @initialize()
    def start(self) -> None:
        self.clock = Clock()
        self.credentials: Credentials[str] = Credentials("", capacity=3, clock=self.clock)
        self.credentials.listening = True
        self.looked_up: dict[bytes, int] = {}  # lookups in flight: the generation they began in
        self.kept: dict[bytes, tuple[str, float]] = {}  # the model: what may be served, until
        self.count = 0

    @rule(on=st.booleans())
    def listen(self, on: bool) -> None:
        if on and not self.credentials.listening:
            self.credentials.forget()
            self.kept.clear()
        if not on:
            self.credentials.forget()
            self.kept.clear()
        self.credentials.listening = on

    @rule()
    def notified(self) -> None:
        self.credentials.forget()
        self.kept.clear()

    @rule(digest=digests)
    def lookup_begins(self, digest: bytes) -> None:
        self.looked_up[digest] = self.credentials.generation

    @precondition(lambda self: bool(self.looked_up))
    @rule(data=st.data())
    def lookup_ends(self, data: st.DataObject) -> None:
        digest = data.draw(st.sampled_from(sorted(self.looked_up)))
        began = self.looked_up.pop(digest)
        self.count += 1
        grant = f"grant {self.count}"
        fresh = self.credentials.listening and began == self.credentials.generation
        self.credentials.remember(digest, grant, began)
        if fresh:
            self.kept[digest] = (grant, self.clock.now + credentials.LIFETIME)

    @rule(seconds=st.floats(0, 2 * credentials.LIFETIME))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule(digest=digests)
    def served(self, digest: bytes) -> None:
        found = self.credentials.grant(digest)
        if found is None:
            self.kept.pop(digest, None)  # forgotten, expired, or crowded out: looked up again
            return
        grant, until = self.kept[digest]
        assert found == grant and self.credentials.listening and self.clock.now < until

    @invariant()
    def bounded(self) -> None:
        assert len(self.credentials) <= 3


TestRememberedGrants = RememberedGrants.TestCase
TestRememberedGrants.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
