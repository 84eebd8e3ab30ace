"""A request that holds a pooled connection never waits for a second one."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from memory_kit import LiveServer
from psycopg_pool import AsyncConnectionPool

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
    token = live_server.token("alpha")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers, timeout=10) as client:
        body = {
            "data_subject_id": "ana",
            "messages": [{"role": "user", "content": "I live in Cork."}],
        }
        assert client.post("/v1/observations", json=body).status_code == 201

        def ask(_: int) -> int:
            answer = client.post("/v1/recalls", json={"question": "Where does Ana live? Cork?"})
            return answer.status_code

        with ThreadPoolExecutor(4) as threads:
            assert list(threads.map(ask, range(8))) == [200] * 8
