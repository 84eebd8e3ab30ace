"""The official SDKs' clients, built from a profile's client section, and how a conversation is
handed to an SDK's `create()`."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
from google import genai
from google.genai import types as genai_types

from satchel.providers.kit.spec import AdapterProfile


def openai_client(profile: AdapterProfile, http_client: Any, api_key: str) -> openai.OpenAI:
    """The `openai` client of a profile; `http_client` (an `httpx.Client`) replaces the SDK's
    own transport when given."""
    return openai.OpenAI(
        api_key=api_key,
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=http_client,
    )


def anthropic_client(
    profile: AdapterProfile, http_client: Any, api_key: str
) -> anthropic.Anthropic:
    """The `anthropic` client of a profile, as `openai_client`."""
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=http_client,
    )


def google_client(profile: AdapterProfile, http_client: Any, api_key: str) -> genai.Client:
    """The `google-genai` client of a profile: its base URL, timeout and retries; `http_client`
    (an `httpx.Client`) replaces the SDK's own transport when given."""
    options = genai_types.HttpOptions(
        base_url=profile.client.base_url,
        timeout=round(profile.client.timeout_s * 1000) if profile.client.timeout_s else None,
        retry_options=genai_types.HttpRetryOptions(attempts=profile.client.max_retries + 1),
        httpx_client=http_client,
    )
    return genai.Client(api_key=api_key, http_options=options)


def sdk_arguments(body: dict[str, Any], field: str) -> dict[str, Any]:
    """`body` as `create()` arguments whose conversation (`field`: `messages` or `input`)
    travels in `extra_body`.

    The SDK walks every parameter against its type hints before sending; over a long
    conversation that walk is most of a request's client-side time, and for the message and item
    parameters satchel sends (no aliased or formatted fields) it returns its input unchanged.
    `extra_body` is merged into the JSON as given, in place of the empty list, so the bytes sent
    are the same; tests hold them equal.
    """
    conversation = body.get(field)
    if conversation is None:
        return body
    extra = {field: conversation, **(body.get("extra_body") or {})}
    return {**body, field: [], "extra_body": extra}
