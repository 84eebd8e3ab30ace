"""Retention against a model: turns stored at chosen times, a policy set and cleared, sweeps at a
clock that only moves forward."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from memory_kit import LiveServer
from memory_world import client, observe
from retention_kit import database_now

from satchel.memory.service.retention import clear_policy, set_policy, sweep_now

PAST = timedelta(days=1000)  # the model's day 0, so every stored time is in the past


class Retention(RuleBasedStateMachine):
    """A sweep deletes exactly the turns stored before its deadline (`now` less the policy's
    days; none without a policy), its receipt counts them with every residual 0, and nothing
    else is deleted; clearing a policy says whether there was one."""

    server: LiveServer

    def __init__(self) -> None:
        super().__init__()
        self.url = self.server.database_url
        self.project = f"r{uuid.uuid4().hex[:12]}"
        self.http = client(self.server, self.server.token(self.project))
        self.origin = database_now(self.url) - PAST
        self.clock = 0  # days after `origin`
        self.stored: dict[str, int] = {}  # turn -> the day it was stored
        self.policy: int | None = None

    @rule(age=st.integers(0, 40))
    def store(self, age: int) -> None:
        turn = observe(self.http, "person-1", f"turn {len(self.stored)} stored {age} days ago")
        day = self.clock - age
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE observations SET stored_at = %s WHERE id = %s",
                (self.origin + timedelta(days=day), turn),
            )
        self.stored[turn] = day

    @rule(days=st.integers(1, 30))
    def keep(self, days: int) -> None:
        set_policy(self.url, self.project, days, None)
        self.policy = days

    @rule()
    def clear(self) -> None:
        assert clear_policy(self.url, self.project) == (self.policy is not None)
        self.policy = None

    @rule(days=st.integers(0, 20))
    def advance(self, days: int) -> None:
        self.clock += days

    @rule()
    def sweep(self) -> None:
        now = self.origin + timedelta(days=self.clock)
        receipts = sweep_now(self.url, self.project, now)
        if self.policy is None:
            assert receipts == []
            return
        deadline = self.clock - self.policy
        expired = {turn for turn, day in self.stored.items() if day < deadline}
        (receipt,) = receipts
        assert receipt.now_used == now
        assert receipt.deleted.get("observation", 0) == len(expired)
        assert receipt.clean and not any(receipt.residual.values())
        for turn in expired:
            del self.stored[turn]

    @invariant()
    def the_database_holds_the_model(self) -> None:
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT o.id::text FROM observations o JOIN projects p ON p.id = o.project_id"
                " WHERE p.name = %s",
                (self.project,),
            ).fetchall()
        assert {turn for (turn,) in rows} == set(self.stored)

    def teardown(self) -> None:
        self.http.close()


def test_a_sweep_deletes_exactly_the_turns_past_the_deadline(live_server: LiveServer) -> None:
    Retention.server = live_server
    run_state_machine_as_test(
        Retention,
        settings=settings(
            max_examples=15, stateful_step_count=12, deadline=None, derandomize=True, database=None
        ),
    )
