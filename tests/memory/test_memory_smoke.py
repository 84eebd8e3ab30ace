"""The service answers over real HTTP on a real database."""

from __future__ import annotations

import httpx
from memory_kit import LiveServer


def test_observe_then_freshness(live_server: LiveServer) -> None:
    token = live_server.token("alpha")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers) as client:
        assert client.get("/v1/freshness").json() == {
            "scope": "alpha",
            "stored": None,
            "formed": None,
            "parked": 0,
        }
        answer = client.post(
            "/v1/observations",
            json={"messages": [{"role": "user", "content": "hello"}]},
        )
        assert answer.status_code == 201
        assert answer.json()["log_offset"] == 0
        assert client.get("/v1/freshness").json()["stored"] == 0
