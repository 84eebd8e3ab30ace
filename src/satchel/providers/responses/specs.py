"""The specs of the Responses adapters: descriptor, request settings, factory."""

from __future__ import annotations

from typing import Any

from satchel.providers.kit.sdk import openai_client
from satchel.providers.kit.spec import AdapterProfile, AdapterSpec
from satchel.providers.responses.openai_responses import (
    DESCRIPTOR,
    OpenAIResponseHandleAdapter,
    OpenAIResponsesAdapter,
)
from satchel.providers.responses.settings import OpenAIResponsesSettings, XAIResponsesSettings
from satchel.providers.responses.xai_responses import XAIResponsesAdapter
from satchel.turns import ProviderAdapter


def _openai_responses(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    client = openai_client(profile, http_client, api_key)
    if profile.runtime.strategy == "previous_response_id":
        return OpenAIResponseHandleAdapter(client, profile.request)
    return OpenAIResponsesAdapter(
        client,
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _xai_responses(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    return XAIResponsesAdapter(openai_client(profile, http_client, api_key), profile.request)


OPENAI_RESPONSES = AdapterSpec(DESCRIPTOR, OpenAIResponsesSettings, _openai_responses)
XAI_RESPONSES = AdapterSpec(XAIResponsesAdapter.descriptor, XAIResponsesSettings, _xai_responses)
