"""Clients for the v1 contract, asynchronous and synchronous, with nothing of any framework.

The bearer token goes to the deployment the client was built for and nowhere else; it never
appears in an error or a log line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx


class MemoryServiceError(Exception):
    """A refusal from the deployment, or no answer at all; branch on `code`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Freshness:
    """How far behind memory is: the highest offset stored and formed, and the parked count."""

    scope: str
    stored: int | None
    formed: int | None
    parked: int

    def as_watermark(self) -> dict[str, Any]:
        return {"stored": self.stored, "formed": self.formed, "parked": self.parked}


def _headers(token: str) -> dict[str, str]:
    if not token or not token.strip():
        raise ValueError("a memory token is required")
    return {"Authorization": "Bearer " + token, "Content-Type": "application/json"}


def _base(base_url: str) -> str:
    if not base_url or not base_url.strip():
        raise ValueError("a memory deployment address is required")
    return base_url.rstrip("/")


def _answer(response: httpx.Response, success: int) -> dict[str, Any]:
    if response.status_code == success:
        data: dict[str, Any] = response.json()
        return data
    code, message = "unexpected_response", f"the deployment answered {response.status_code}"
    try:
        error = response.json().get("error") or {}
        code = error.get("code") or code
        message = error.get("message") or message
    except (ValueError, AttributeError):
        pass
    raise MemoryServiceError(response.status_code, code, message)


def _unreachable(error: httpx.HTTPError) -> MemoryServiceError:
    reason = f"the deployment did not answer ({type(error).__name__})"
    return MemoryServiceError(0, "unreachable", reason)


def _freshness(data: Mapping[str, Any]) -> Freshness:
    return Freshness(
        scope=str(data.get("scope", "")),
        stored=data.get("stored"),
        formed=data.get("formed"),
        parked=int(data.get("parked", 0)),
    )


def _observation(
    key: str, messages: Sequence[Mapping[str, Any]], subject: str | None, occurred_at: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"idempotency_key": key, "messages": [dict(m) for m in messages]}
    if subject:
        body["data_subject_id"] = subject
    if occurred_at:
        body["occurred_at"] = occurred_at
    return body


def _with_subject(body: dict[str, Any], subject: str | None, **extra: Any) -> dict[str, Any]:
    if subject:
        body["data_subject_id"] = subject
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


class AsyncMemoryClient:
    """The v1 contract over an `httpx.AsyncClient` (one is made when none is given)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = _base(base_url)
        self._headers = _headers(token)
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(
        self, method: str, path: str, body: dict[str, Any] | None, success: int
    ) -> dict[str, Any]:
        try:
            response = await self._http.request(
                method, self.base_url + path, json=body, headers=self._headers
            )
        except httpx.HTTPError as error:
            raise _unreachable(error) from None
        return _answer(response, success)

    async def observe(
        self,
        *,
        idempotency_key: str,
        messages: Sequence[Mapping[str, Any]],
        data_subject_id: str | None = None,
        occurred_at: str | None = None,
    ) -> dict[str, Any]:
        """Store a turn; durable when this returns."""
        body = _observation(idempotency_key, messages, data_subject_id, occurred_at)
        return await self._send("POST", "/v1/observations", body, 201)

    async def freshness(self) -> Freshness:
        return _freshness(await self._send("GET", "/v1/freshness", None, 200))

    async def recall(
        self, *, question: str, data_subject_id: str | None = None, **controls: Any
    ) -> dict[str, Any]:
        body = _with_subject({"question": question}, data_subject_id, **controls)
        return await self._send("POST", "/v1/recalls", body, 200)

    async def context(
        self, *, data_subject_id: str, max_characters: int | None = None
    ) -> dict[str, Any]:
        body = _with_subject({}, data_subject_id, max_characters=max_characters)
        return await self._send("POST", "/v1/contexts", body, 200)

    async def assert_records(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        body = {"records": [dict(r) for r in records]}
        return await self._send("POST", "/v1/records/assert", body, 200)

    async def search_passages(
        self, *, question: str, data_subject_id: str | None = None, **options: Any
    ) -> dict[str, Any]:
        body = _with_subject({"question": question}, data_subject_id, **options)
        return await self._send("POST", "/v1/passages/search", body, 200)


class MemoryClient:
    """The v1 contract over a synchronous `httpx.Client`, for scripts and sync frameworks."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = _base(base_url)
        self._headers = _headers(token)
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, success: int
    ) -> dict[str, Any]:
        try:
            response = self._http.request(
                method, self.base_url + path, json=body, headers=self._headers
            )
        except httpx.HTTPError as error:
            raise _unreachable(error) from None
        return _answer(response, success)

    def observe(
        self,
        *,
        idempotency_key: str,
        messages: Sequence[Mapping[str, Any]],
        data_subject_id: str | None = None,
        occurred_at: str | None = None,
    ) -> dict[str, Any]:
        """Store a turn; durable when this returns."""
        body = _observation(idempotency_key, messages, data_subject_id, occurred_at)
        return self._send("POST", "/v1/observations", body, 201)

    def freshness(self) -> Freshness:
        return _freshness(self._send("GET", "/v1/freshness", None, 200))

    def recall(
        self, *, question: str, data_subject_id: str | None = None, **controls: Any
    ) -> dict[str, Any]:
        body = _with_subject({"question": question}, data_subject_id, **controls)
        return self._send("POST", "/v1/recalls", body, 200)

    def context(self, *, data_subject_id: str, max_characters: int | None = None) -> dict[str, Any]:
        body = _with_subject({}, data_subject_id, max_characters=max_characters)
        return self._send("POST", "/v1/contexts", body, 200)

    def assert_records(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        body = {"records": [dict(r) for r in records]}
        return self._send("POST", "/v1/records/assert", body, 200)

    def search_passages(
        self, *, question: str, data_subject_id: str | None = None, **options: Any
    ) -> dict[str, Any]:
        body = _with_subject({"question": question}, data_subject_id, **options)
        return self._send("POST", "/v1/passages/search", body, 200)
