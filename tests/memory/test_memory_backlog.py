"""The formation backlog cap: past it an observation is 429 `rate_limited` and nothing is kept."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
import taisce
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import LiveServer

from satchel.memory.config import MemorySettings, SettingError
from satchel.memory.formation.worker import Worker

LIMIT = 3


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False, backlog_limit=LIMIT)


def turn(key: str, content: str, subject: str = "ana") -> dict[str, Any]:
    return {
        "idempotency_key": key,
        "data_subject_id": subject,
        "messages": [{"role": "user", "content": content}],
    }


def form(live_server: LiveServer, settings: MemorySettings) -> None:
    """One worker pass (no extraction model): every waiting turn is formed."""

    async def run() -> None:
        worker = Worker(live_server.database_url, settings)
        try:
            await worker.run_once()
        finally:
            await worker.close()

    asyncio.run(run())


def test_a_full_backlog_refuses_new_turns_until_they_form(
    live_server: LiveServer, memory_settings: MemorySettings
) -> None:
    keys = [str(uuid.uuid4()) for _ in range(LIMIT + 1)]

    async def observe(index: int) -> dict[str, Any]:
        async with taisce.Client(live_server.base_url, live_server.token("alpha")) as client:
            return await client.observe(
                idempotency_key=keys[index],
                data_subject_id="ana",
                messages=[{"role": "user", "content": f"turn {index}"}],
            )

    accepted = [asyncio.run(observe(index)) for index in range(LIMIT)]
    assert [receipt["log_offset"] for receipt in accepted] == [0, 1, 2]
    with pytest.raises(taisce.TaisceError) as full:
        asyncio.run(observe(LIMIT))
    assert (full.value.status, full.value.code) == (429, "rate_limited")
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        refused = http.post("/v1/observations", json=turn(keys[LIMIT], f"turn {LIMIT}"))
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert http.get("/v1/freshness").json()["stored"] == LIMIT - 1  # nothing kept
        # an accepted turn's retry still answers its receipt while the backlog is full
        assert asyncio.run(observe(0)) == accepted[0]
        with httpx.Client(
            base_url=live_server.base_url,
            headers={"Authorization": f"Bearer {live_server.token('beta')}"},
        ) as beta:  # each project has its own backlog
            assert beta.post("/v1/observations", json=turn(keys[0], "beta")).status_code == 201
        form(live_server, memory_settings)
        assert http.get("/v1/freshness").json()["formed"] == LIMIT - 1
        retried = asyncio.run(observe(LIMIT))
        assert retried["log_offset"] == LIMIT


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.sampled_from(["observe", "form"]), min_size=1, max_size=12))
def test_a_turn_is_accepted_exactly_while_the_backlog_has_room(
    live_server: LiveServer, memory_settings: MemorySettings, steps: list[str]
) -> None:
    token = live_server.token(f"p{uuid.uuid4().hex[:12]}")
    waiting = 0
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        for step in steps:
            if step == "form":
                form(live_server, memory_settings)
                waiting = 0
                continue
            answer = http.post("/v1/observations", json=turn(str(uuid.uuid4()), "words"))
            assert answer.status_code == (201 if waiting < LIMIT else 429)
            waiting += answer.status_code == 201
        freshness = http.get("/v1/freshness").json()
        stored, formed = freshness["stored"], freshness["formed"]
        assert (-1 if stored is None else stored) - (-1 if formed is None else formed) == waiting


def test_the_cap_is_read_from_the_environment() -> None:
    assert MemorySettings.from_env({}).backlog_limit == 100_000
    assert MemorySettings.from_env({"SATCHEL_BACKLOG_LIMIT": "512"}).backlog_limit == 512
    for value in ("0", "1000001", "many"):
        with pytest.raises(SettingError, match="SATCHEL_BACKLOG_LIMIT"):
            MemorySettings.from_env({"SATCHEL_BACKLOG_LIMIT": value})
