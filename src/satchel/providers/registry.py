"""The adapters this installation ships, registered by their stable ids with the factory that
builds each from a profile and the check of its profiles' `request` section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai

from satchel.providers.open_source_chat import OpenSourceChatAdapter
from satchel.providers.openai_chat import OpenAIChatAdapter
from satchel.providers.openai_responses import (
    DESCRIPTOR as OPENAI_RESPONSES,
)
from satchel.providers.openai_responses import (
    OpenAIResponseHandleAdapter,
    OpenAIResponsesAdapter,
    check_openai_request,
)
from satchel.providers.xai_responses import XAIResponsesAdapter
from satchel.turns import AdapterRegistry, ProviderAdapter

if TYPE_CHECKING:
    from satchel.providers.profiles import Profile


def _openai_chat(client: openai.OpenAI, profile: Profile) -> ProviderAdapter:
    trim = profile.runtime.trim
    return OpenAIChatAdapter(
        client,
        profile.request,
        limit_tokens=trim.limit_tokens or int(profile.agent.MAX_CONTEXT_LENGTH * 0.8),
        target_fraction=trim.target_fraction,
    )


def _open_source_chat(client: openai.OpenAI, profile: Profile) -> ProviderAdapter:
    return OpenSourceChatAdapter(
        client,
        profile.request,
        reasoning_replay=profile.runtime.reasoning_replay or ("reasoning_content",),
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _openai_responses(client: openai.OpenAI, profile: Profile) -> ProviderAdapter:
    if profile.runtime.strategy == "previous_response_id":
        return OpenAIResponseHandleAdapter(client, profile.request)
    return OpenAIResponsesAdapter(
        client,
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _xai_responses(client: openai.OpenAI, profile: Profile) -> ProviderAdapter:
    return XAIResponsesAdapter(client, profile.request)


def _chat_request(adapter: type[OpenAIChatAdapter] | type[OpenSourceChatAdapter]) -> Any:
    return lambda request, strategy: adapter.validate_request(request)


REGISTRY = AdapterRegistry()
REGISTRY.register(OpenAIChatAdapter.descriptor, _openai_chat, _chat_request(OpenAIChatAdapter))
REGISTRY.register(
    OpenSourceChatAdapter.descriptor, _open_source_chat, _chat_request(OpenSourceChatAdapter)
)
REGISTRY.register(OPENAI_RESPONSES, _openai_responses, check_openai_request)
REGISTRY.register(
    XAIResponsesAdapter.descriptor, _xai_responses, XAIResponsesAdapter.validate_request
)
