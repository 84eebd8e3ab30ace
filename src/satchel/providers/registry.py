"""The adapters this installation ships, registered by their stable ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

import openai

from satchel.providers.open_source_chat import OpenSourceChatAdapter
from satchel.providers.openai_chat import OpenAIChatAdapter
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


REGISTRY = AdapterRegistry()
REGISTRY.register(OpenAIChatAdapter.descriptor, _openai_chat)
REGISTRY.register(OpenSourceChatAdapter.descriptor, _open_source_chat)

REQUEST_VALIDATORS = {
    OpenAIChatAdapter.descriptor.adapter_id: OpenAIChatAdapter.validate_request,
    OpenSourceChatAdapter.descriptor.adapter_id: OpenSourceChatAdapter.validate_request,
}
