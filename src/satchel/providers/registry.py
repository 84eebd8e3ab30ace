"""The adapters this installation ships, registered by their stable ids with the factory that
builds each from a profile (its SDK client included) and the check of its profiles' `request`
section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anthropic
import openai

from satchel.providers.anthropic_messages import (
    DESCRIPTOR as ANTHROPIC_MESSAGES,
)
from satchel.providers.anthropic_messages import (
    AnthropicMessagesAdapter,
    check_anthropic_request,
)
from satchel.providers.deepseek_chat import DeepSeekChatAdapter
from satchel.providers.google_interactions import (
    DESCRIPTOR as GOOGLE_INTERACTIONS,
)
from satchel.providers.google_interactions import (
    build_google_interactions,
    check_google_request,
)
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


def _openai(profile: Profile, http_client: Any, api_key: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=api_key,
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=http_client,
    )


def _openai_chat(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    trim = profile.runtime.trim
    return OpenAIChatAdapter(
        _openai(profile, http_client, api_key),
        profile.request,
        limit_tokens=trim.limit_tokens or int(profile.agent.MAX_CONTEXT_LENGTH * 0.8),
        target_fraction=trim.target_fraction,
    )


def _open_source_chat(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    return OpenSourceChatAdapter(
        _openai(profile, http_client, api_key),
        profile.request,
        reasoning_replay=profile.runtime.reasoning_replay or (),
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _deepseek_chat(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    return DeepSeekChatAdapter(
        _openai(profile, http_client, api_key),
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _openai_responses(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    client = _openai(profile, http_client, api_key)
    if profile.runtime.strategy == "previous_response_id":
        return OpenAIResponseHandleAdapter(client, profile.request)
    return OpenAIResponsesAdapter(
        client,
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _xai_responses(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    return XAIResponsesAdapter(_openai(profile, http_client, api_key), profile.request)


def _anthropic_messages(profile: Profile, http_client: Any, api_key: str) -> ProviderAdapter:
    client = anthropic.Anthropic(
        api_key=api_key,
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=http_client,
    )
    return AnthropicMessagesAdapter(
        client,
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _chat_request(
    adapter: type[OpenAIChatAdapter] | type[OpenSourceChatAdapter] | type[DeepSeekChatAdapter],
) -> Any:
    return lambda request, strategy, compaction: adapter.validate_request(request)


REGISTRY = AdapterRegistry()
REGISTRY.register(OpenAIChatAdapter.descriptor, _openai_chat, _chat_request(OpenAIChatAdapter))
REGISTRY.register(
    OpenSourceChatAdapter.descriptor, _open_source_chat, _chat_request(OpenSourceChatAdapter)
)
REGISTRY.register(
    DeepSeekChatAdapter.descriptor, _deepseek_chat, _chat_request(DeepSeekChatAdapter)
)
REGISTRY.register(OPENAI_RESPONSES, _openai_responses, check_openai_request)
REGISTRY.register(
    XAIResponsesAdapter.descriptor, _xai_responses, XAIResponsesAdapter.validate_request
)
REGISTRY.register(ANTHROPIC_MESSAGES, _anthropic_messages, check_anthropic_request)
REGISTRY.register(GOOGLE_INTERACTIONS, build_google_interactions, check_google_request)
