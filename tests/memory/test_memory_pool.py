"""A request that holds a pooled connection never waits for a second one."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from memory_kit import LiveServer
from psycopg_pool import AsyncConnectionPool
from records_kit import assert_records, claim

from satchel.memory.config import MemorySettings
from satchel.memory.store.database import spare_connection


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(pool_size=1)


async def test_a_spare_connection_is_given_only_when_one_is_free_at_once(db_url: str) -> None:
    async with AsyncConnectionPool(db_url, min_size=2, max_size=2, open=False) as pool:
        await pool.wait()
        async with pool.connection() as first:
            async with spare_connection(pool) as spare:
                assert spare is not None and spare is not first
                await spare.execute("SELECT 1")
                began = time.monotonic()
                async with spare_connection(pool) as none:
                    assert none is None
                assert time.monotonic() - began < 0.5
            async with spare_connection(pool) as again:  # the spare went back to the pool
                assert again is not None


def test_recalls_with_passages_answer_on_a_pool_of_one(live_server: LiveServer) -> None:
    """Facts and passages share the request's one connection: their statements (and the
    search's pipelines) must not overlap on it."""
    token = live_server.token("alpha")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers, timeout=30) as client:
        for n in range(20):
            body = {
                "data_subject_id": "ana",
                "messages": [{"role": "user", "content": f"I live in Cork, street {n}."}],
            }
            assert client.post("/v1/observations", json=body).status_code == 201
        places = [
            claim("Ana", "interested_in", f"Place {n}", f"Ana is interested in Place {n}.")
            for n in range(20)
        ]
        assert_records(client, *places)

        def ask(n: int) -> tuple[int, int, int]:
            question = f"Where does Ana live? Cork? ({n})"
            answer = client.post("/v1/recalls", json={"question": question})
            found = answer.json()
            return (
                answer.status_code,
                len(found.get("facts", [])) > 0,
                len(found.get("passages", [])) > 0,
            )

        with ThreadPoolExecutor(4) as threads:
            assert set(threads.map(ask, range(40))) == {(200, True, True)}
