"""The spec of `anthropic.messages.v1`: descriptor, request settings, factory."""

from __future__ import annotations

from typing import Any

from satchel.providers.anthropic.adapter import DESCRIPTOR, AnthropicMessagesAdapter
from satchel.providers.anthropic.settings import MessagesSettings
from satchel.providers.kit.sdk import anthropic_client
from satchel.providers.kit.spec import AdapterProfile, AdapterSpec
from satchel.turns import ProviderAdapter


def _anthropic_messages(profile: AdapterProfile, http_client: Any, api_key: str) -> ProviderAdapter:
    return AnthropicMessagesAdapter(
        anthropic_client(profile, http_client, api_key),
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


ANTHROPIC_MESSAGES = AdapterSpec(DESCRIPTOR, MessagesSettings, _anthropic_messages)
