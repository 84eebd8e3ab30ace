"""Retention at the real clock: a read never serves a turn past its deadline, the worker sweeps on
its first pass, and sweepers running at once take turns and count each row once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
from memory_kit import LiveServer
from memory_world import client
from retention_kit import NEW, OLD, Garden, worker_pass

from satchel.memory.config import MemorySettings
from satchel.memory.service.retention import list_receipts, set_policy, sweep_now


def test_turns_past_their_deadline_are_not_served_before_any_sweep(
    live_server: LiveServer,
) -> None:
    garden = Garden(live_server, age=40)
    assert set(garden.showing(OLD)) >= {"recall", "passages", "contexts", "export", "records"}
    set_policy(live_server.database_url, "alpha", 30, None)

    fresh = garden.through(client(live_server, live_server.token()))  # a grant looked up anew
    assert fresh.showing(OLD) == []
    assert set(fresh.showing(NEW)) >= {"recall, project-wide", "passages", "contexts", "export"}
    assert garden.stored(garden.old) == 0 and garden.vectors(garden.old) == 0
    (receipt,) = list_receipts(garden.url, "alpha")
    assert receipt.deleted["observation"] == 2 and receipt.clean
    assert garden.stored(garden.new) == 2


def test_a_remembered_grant_hears_that_its_project_has_a_policy(live_server: LiveServer) -> None:
    garden = Garden(live_server, age=40)
    assert OLD in garden.reads()["contexts"]  # the grant is remembered from here on
    set_policy(live_server.database_url, "alpha", 30, None)
    deadline = time.monotonic() + 5
    while OLD in garden.reads()["contexts"]:
        assert time.monotonic() < deadline, "the policy was never heard"
        time.sleep(0.05)
    assert garden.showing(OLD) == []


def test_a_project_without_a_policy_keeps_its_turns(live_server: LiveServer) -> None:
    garden = Garden(live_server, age=4000)
    assert sweep_now(garden.url, None, None) == []  # nothing to delete: no receipt
    assert set(garden.showing(OLD)) >= {"recall", "passages", "contexts", "export", "records"}
    assert garden.stored(garden.old) == 2


def test_the_worker_sweeps_on_its_first_pass(live_server: LiveServer) -> None:
    garden = Garden(live_server, age=40)
    with psycopg.connect(garden.url, autocommit=True) as conn:  # behind the service's back
        conn.execute(
            "INSERT INTO retention_policies (project_id, keep_days, inactive_after_days)"
            " SELECT id, 30, 1 FROM projects WHERE name = 'alpha'"
        )
    worker_pass(garden.url, MemorySettings().for_worker())
    assert garden.stored(garden.old) == 0 and garden.stored(garden.new) == 2
    (receipt,) = list_receipts(garden.url, "alpha")
    assert receipt.deleted["observation"] == 2 and receipt.clean
    assert receipt.inactive == []  # Ann and Bob both had a turn stored today


def test_sweepers_at_once_delete_each_turn_once(live_server: LiveServer) -> None:
    garden = Garden(live_server, age=40)
    http = garden.http
    extra = [
        http.post(
            "/v1/observations",
            json={"data_subject_id": f"s{i}", "messages": [{"role": "user", "content": OLD}]},
        ).json()["id"]
        for i in range(30)
    ]
    with psycopg.connect(garden.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE observations SET stored_at = stored_at - interval '40 days'"
            " WHERE id = ANY(%s::uuid[])",
            (extra,),
        )
        conn.execute(
            "INSERT INTO retention_policies (project_id, keep_days, inactive_after_days)"
            " SELECT id, 30, 35 FROM projects WHERE name = 'alpha'"
        )
    with ThreadPoolExecutor(4) as pool:
        swept = [
            r
            for job in [pool.submit(sweep_now, garden.url, "alpha", None) for _ in range(4)]
            for r in job.result()
        ]
    assert sum(r.deleted.get("observation", 0) for r in swept) == 32
    assert all(r.clean for r in swept)
    assert garden.stored(garden.old + extra) == 0 and garden.stored(garden.new) == 2
