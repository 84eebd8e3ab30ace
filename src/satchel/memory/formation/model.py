"""The OpenAI-compatible chat client of formation: allowed hosts only, temperature 0."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

import httpx

from satchel.memory.config import ModelClientSettings


class HostNotAllowed(ValueError):
    """The model's base URL names a host that may not receive stored text."""


class ModelError(Exception):
    """One failed model call. Its message is safe to store: it never holds model text."""


def allowed_url(settings: ModelClientSettings) -> str:
    """The base URL without its trailing slash, once its scheme and host are allowed."""
    parts = urlsplit(settings.base_url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise HostNotAllowed("the model base URL must be an http(s) URL with a host")
    if host not in settings.allowed_hosts:
        raise HostNotAllowed(
            f"host {host!r} is not in SATCHEL_FORMATION_ALLOWED_HOSTS; no text is sent to it"
        )
    return settings.base_url.rstrip("/")


class ChatModel:
    """Chat completions at temperature 0 against one allowed endpoint."""

    def __init__(
        self, settings: ModelClientSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self.url = allowed_url(settings) + "/chat/completions"
        key = os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.AsyncClient(
            headers=headers,
            timeout=settings.timeout,
            follow_redirects=False,
            transport=transport,
        )

    @property
    def model(self) -> str:
        return self.settings.model

    async def complete(self, messages: list[dict[str, str]], *, as_json: bool = False) -> str:
        """The reply's text; `as_json` asks for a JSON object."""
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": 0,
        }
        if as_json:
            body["response_format"] = {"type": "json_object"}
        try:
            response = await self.client.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise ModelError(f"transport: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise ModelError(f"status {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError("reply is not a chat completion") from None
        if not isinstance(content, str):
            raise ModelError("reply has no text content")
        return content

    async def complete_json(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The reply parsed as one JSON object (a fenced block is unwrapped)."""
        text = (await self.complete(messages, as_json=True)).strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            value = json.loads(text)
        except ValueError:
            raise ModelError("reply is not JSON") from None
        if not isinstance(value, dict):
            raise ModelError("reply is not a JSON object")
        return value

    async def aclose(self) -> None:
        await self.client.aclose()
