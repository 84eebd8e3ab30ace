"""The OpenAI-compatible chat client of formation, on the official `openai` SDK: allowed hosts
only, temperature 0, a bounded output, structured replies in the strongest form the server takes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai

from satchel.memory.config import ModelClientSettings


class HostNotAllowed(ValueError):
    """The model's base URL names a host that may not receive stored text."""


class ModelError(Exception):
    """One failed model call. Its message is safe to store: it never holds model text.
    `status`: the HTTP status the server answered, when it answered an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# How a JSON reply is asked for, strongest first: a JSON schema, any JSON object, plain text.
JSON_FORMS = ("json_schema", "json_object", "text")
REFUSED_FORM = (400, 422)  # what a server answers to a `response_format` it does not take
NO_KEY = "no-key"  # sent when no key is configured: the SDK needs one, keyless servers ignore it


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


@dataclass(slots=True)
class Usage:
    """What the client's calls cost so far, as the server counted it."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel:
    """Chat completions at temperature 0 against one allowed endpoint.

    Each request has a timeout and is resent by the SDK (with its backoff) after a timeout, a
    connection failure or a 408, 409, 429 or 5xx answer, `settings.retries` times. The JSON form
    the server accepted first is kept for the client's later calls (`json_form`).
    """

    def __init__(
        self, settings: ModelClientSettings, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        base_url = allowed_url(settings)
        self.url = base_url + "/chat/completions"
        key = os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=key or NO_KEY,
            timeout=settings.timeout,
            max_retries=settings.retries,
            http_client=httpx2.AsyncClient(
                timeout=settings.timeout, follow_redirects=False, transport=transport
            ),
        )
        self.json_form: str | None = None  # the form this server took, once one was taken
        self.usage = Usage()

    @property
    def model(self) -> str:
        return self.settings.model

    async def _create(
        self, messages: list[dict[str, str]], max_tokens: int, response_format: dict[str, Any]
    ) -> tuple[str, bool]:
        """The reply's text and whether the output limit cut it."""
        extra: dict[str, Any] = {"response_format": response_format} if response_format else {}
        try:
            reply = await self.client.chat.completions.create(
                model=self.settings.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0,
                max_tokens=max_tokens,
                **extra,
            )
        except openai.APITimeoutError:
            raise ModelError(
                f"timeout: no reply within {self.settings.timeout:g} s after "
                f"{self.settings.retries + 1} attempt(s); raise SATCHEL_FORMATION_TIMEOUT "
                "for a slow model"
            ) from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection"
            raise ModelError(f"transport: {cause}") from None
        except openai.APIStatusError as exc:
            raise ModelError(f"status {exc.status_code}", exc.status_code) from None
        except openai.APIResponseValidationError:
            raise ModelError("reply is not a chat completion") from None
        self.usage.calls += 1
        if reply.usage is not None:
            self.usage.prompt_tokens += reply.usage.prompt_tokens
            self.usage.completion_tokens += reply.usage.completion_tokens
        if not reply.choices:
            raise ModelError("reply is not a chat completion")
        choice = reply.choices[0]
        content = choice.message.content
        if not isinstance(content, str):
            raise ModelError("reply has no text content")
        return content, choice.finish_reason == "length"

    async def complete(self, messages: list[dict[str, str]], *, max_tokens: int) -> str:
        """The reply's text, at most `max_tokens` tokens of it (a cut reply is returned)."""
        text, _ = await self._create(messages, max_tokens, {})
        return text

    async def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        schema: dict[str, Any],
        name: str,
        max_tokens: int,
    ) -> dict[str, Any]:
        """The reply parsed as one JSON object, asked for under `schema` (named `name`) where
        the server takes it, else as any JSON object, else as plain text; a server refusing a
        form (400 or 422) is asked in the next, and the form that worked is kept."""
        index = JSON_FORMS.index(self.json_form) if self.json_form else 0
        while True:
            form = JSON_FORMS[index]
            try:
                text, cut = await self._create(
                    messages, max_tokens, _response_format(form, schema, name)
                )
            except ModelError as exc:
                if form != "text" and exc.status in REFUSED_FORM:
                    index += 1
                    continue
                raise
            break
        self.json_form = form
        if cut:
            raise ModelError(f"reply cut at the output limit of {max_tokens} tokens")
        return parse_object(text)

    async def aclose(self) -> None:
        await self.client.close()


def _response_format(form: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if form == "json_object":
        return {"type": "json_object"}
    return {}


def parse_object(text: str) -> dict[str, Any]:
    """One JSON object from a reply: bare, fenced, or the outermost braces in prose."""
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ModelError("reply is not JSON")
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        raise ModelError("reply is not JSON") from None
    if not isinstance(value, dict):
        raise ModelError("reply is not a JSON object")
    return value
