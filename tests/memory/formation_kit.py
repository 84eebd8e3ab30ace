"""Helpers of the formation tests: settings pointing at a loopback model, worker passes, turns."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

import httpx
import psycopg
from model_server import ModelServer

from satchel.memory.config import MemorySettings, ModelClientSettings
from satchel.memory.formation.worker import Tally, Worker
from satchel.memory.passages.embedder import EmbeddingSettings, EndpointEmbedder

MODEL = "scripted-extractor"


def with_model(settings: MemorySettings, model: ModelServer, **changes: Any) -> MemorySettings:
    """`settings` forming with the loopback `model`, no resend of a failed request, no backoff
    unless `changes` say."""
    client = ModelClientSettings(model=MODEL, base_url=model.base_url, retries=0)
    return replace(settings, formation=client, **{"formation_backoff": 0.0, **changes})


def embedder(model: ModelServer) -> EndpointEmbedder:
    return EndpointEmbedder(EmbeddingSettings(base_url=model.base_url, model="scripted-embedder"))


def passes(url: str, settings: MemorySettings, model: ModelServer, count: int = 1) -> list[Tally]:
    """`count` worker passes over the database at `url`."""

    async def run() -> list[Tally]:
        worker = Worker(url, settings, embedder=embedder(model))
        try:
            return [await worker.run_once() for _ in range(count)]
        finally:
            await worker.close()

    return asyncio.run(run())


def observe(http: httpx.Client, subject: str, *messages: tuple[str, str]) -> dict[str, Any]:
    """Store one turn of (role, content) messages; its receipt."""
    answer = http.post(
        "/v1/observations",
        json={
            "idempotency_key": str(uuid.uuid4()),
            "data_subject_id": subject,
            "messages": [{"role": role, "content": content} for role, content in messages],
        },
    )
    assert answer.status_code == 201, answer.text
    receipt: dict[str, Any] = answer.json()
    return receipt


def freshness(http: httpx.Client) -> tuple[int | None, int | None, int]:
    body = http.get("/v1/freshness").json()
    return body["stored"], body["formed"], body["parked"]


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def claim(
    subject: str, predicate: str, obj: str, quote: str, message: int = 0, **more: Any
) -> dict[str, Any]:
    return {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "statement": f"{subject} {predicate} {obj}.",
        "quote": quote,
        "message": message,
        "asserted": True,
        "current": True,
        "confidence": 0.9,
        **more,
    }
