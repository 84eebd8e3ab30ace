"""The specs of the Chat Completions adapters: descriptor, request settings, factory."""

from __future__ import annotations

from typing import Any

from satchel.providers.chat.deepseek_chat import DeepSeekChatAdapter
from satchel.providers.chat.open_source_chat import OpenSourceChatAdapter
from satchel.providers.chat.openai_chat import OpenAIChatAdapter
from satchel.providers.chat.settings import ChatCompletionsSettings, DeepSeekSettings
from satchel.providers.kit.sdk import openai_client
from satchel.providers.kit.spec import AdapterProfile, AdapterSpec
from satchel.turns import ProviderAdapter


def _openai_chat(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    trim = profile.runtime.trim
    return OpenAIChatAdapter(
        openai_client(profile, http_client, api_key),
        profile.request,
        limit_tokens=trim.limit_tokens or int(profile.agent.MAX_CONTEXT_LENGTH * 0.8),
        target_fraction=trim.target_fraction,
    )


def _open_source_chat(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    return OpenSourceChatAdapter(
        openai_client(profile, http_client, api_key),
        profile.request,
        reasoning_replay=profile.runtime.reasoning_replay or (),
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


def _deepseek_chat(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    return DeepSeekChatAdapter(
        openai_client(profile, http_client, api_key),
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


OPENAI_CHAT = AdapterSpec(OpenAIChatAdapter.descriptor, ChatCompletionsSettings, _openai_chat)
OPEN_SOURCE_CHAT = AdapterSpec(
    OpenSourceChatAdapter.descriptor,
    ChatCompletionsSettings,
    _open_source_chat,
    needs_reasoning_replay=True,
)
DEEPSEEK_CHAT = AdapterSpec(DeepSeekChatAdapter.descriptor, DeepSeekSettings, _deepseek_chat)
