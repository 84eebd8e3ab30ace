"""The two transports of the v1 operations: `MemoryClient` over `httpx.Client` and
`AsyncMemoryClient` over `httpx.AsyncClient`. Each sends a `Call`, retries it as `Retries`
says, and turns the answer into JSON or a typed error.

The bearer token goes to the deployment the client was built for and nowhere else; it never
appears in an error, a repr or a log line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from satchel.memory.client.calls import Call, Retries, answer
from satchel.memory.client.errors import MemoryServiceError, unreachable
from satchel.memory.client.operations import Operations, next_fields

FRESHNESS = Call("GET", "/v1/freshness", None, 200)


@dataclass(frozen=True)
class Freshness:
    """How far behind memory is: the highest offset stored and formed, and the parked count."""

    scope: str
    stored: int | None
    formed: int | None
    parked: int

    def as_watermark(self) -> dict[str, Any]:
        return {"stored": self.stored, "formed": self.formed, "parked": self.parked}


def _freshness(data: Mapping[str, Any]) -> Freshness:
    return Freshness(
        scope=str(data.get("scope", "")),
        stored=data.get("stored"),
        formed=data.get("formed"),
        parked=int(data.get("parked", 0)),
    )


def _headers(token: str) -> dict[str, str]:
    if not token or not token.strip():
        raise ValueError("a memory token is required")
    return {"Authorization": "Bearer " + token, "Content-Type": "application/json"}


def _base(base_url: str) -> str:
    if not base_url or not base_url.strip():
        raise ValueError("a memory deployment address is required")
    return base_url.rstrip("/")


class MemoryClient(Operations[dict[str, Any]]):
    """The v1 contract over a synchronous `httpx.Client` (one is made when none is given)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        timeout: float = 30.0,
        retries: Retries | None = None,
    ) -> None:
        self.base_url = _base(base_url)
        self.retries = retries or Retries()
        self._headers = _headers(token)
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)

    def __repr__(self) -> str:
        return f"MemoryClient({self.base_url!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: Call) -> dict[str, Any]:
        started, attempt = time.monotonic(), 1
        while True:
            try:
                response = self._http.request(
                    call.method, self.base_url + call.path, json=call.body, headers=self._headers
                )
            except httpx.HTTPError as error:
                raise unreachable(error) from None
            try:
                return answer(response, call)
            except MemoryServiceError as error:
                pause = self.retries.wait(call, error, attempt, time.monotonic() - started)
                if pause is None:
                    raise
            time.sleep(pause)
            attempt += 1

    def freshness(self) -> Freshness:
        """How far storage and formation have got in this project."""
        return _freshness(self._run(FRESHNESS))

    def pages(
        self, listing: Callable[..., dict[str, Any]], **given: Any
    ) -> Iterator[dict[str, Any]]:
        """Every page of a list operation, e.g. `pages(client.list_records, limit=50)`."""
        fields: dict[str, Any] | None = given
        while fields is not None:
            page = listing(**fields)
            yield page
            fields = next_fields(listing.__name__, page, fields)


class AsyncMemoryClient(Operations[Coroutine[Any, Any, dict[str, Any]]]):
    """The v1 contract over an `httpx.AsyncClient` (one is made when none is given)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        retries: Retries | None = None,
    ) -> None:
        self.base_url = _base(base_url)
        self.retries = retries or Retries()
        self._headers = _headers(token)
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    def __repr__(self) -> str:
        return f"AsyncMemoryClient({self.base_url!r})"

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _run(self, call: Call) -> Coroutine[Any, Any, dict[str, Any]]:
        return self._send(call)

    async def _send(self, call: Call) -> dict[str, Any]:
        started, attempt = time.monotonic(), 1
        while True:
            try:
                response = await self._http.request(
                    call.method, self.base_url + call.path, json=call.body, headers=self._headers
                )
            except httpx.HTTPError as error:
                raise unreachable(error) from None
            try:
                return answer(response, call)
            except MemoryServiceError as error:
                pause = self.retries.wait(call, error, attempt, time.monotonic() - started)
                if pause is None:
                    raise
            await asyncio.sleep(pause)
            attempt += 1

    async def freshness(self) -> Freshness:
        """How far storage and formation have got in this project."""
        return _freshness(await self._send(FRESHNESS))

    async def pages(
        self, listing: Callable[..., Awaitable[dict[str, Any]]], **given: Any
    ) -> AsyncIterator[dict[str, Any]]:
        """Every page of a list operation, e.g. `pages(client.list_records, limit=50)`."""
        fields: dict[str, Any] | None = given
        while fields is not None:
            page = await listing(**fields)
            yield page
            fields = next_fields(listing.__name__, page, fields)
