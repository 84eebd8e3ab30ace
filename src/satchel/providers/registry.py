"""The adapters this installation ships: one spec per adapter id, and the registry built from
them (descriptor, factory, and the check of a profile's `request` section)."""

from __future__ import annotations

from satchel.providers.anthropic.spec import ANTHROPIC_MESSAGES
from satchel.providers.chat.specs import DEEPSEEK_CHAT, OPEN_SOURCE_CHAT, OPENAI_CHAT
from satchel.providers.google.spec import GOOGLE_INTERACTIONS
from satchel.providers.kit.spec import AdapterSpec
from satchel.providers.responses.specs import OPENAI_RESPONSES, XAI_RESPONSES
from satchel.turns import AdapterRegistry

SPECS: dict[str, AdapterSpec] = {
    spec.descriptor.adapter_id: spec
    for spec in (
        OPENAI_CHAT,
        OPEN_SOURCE_CHAT,
        DEEPSEEK_CHAT,
        OPENAI_RESPONSES,
        XAI_RESPONSES,
        ANTHROPIC_MESSAGES,
        GOOGLE_INTERACTIONS,
    )
}

REGISTRY = AdapterRegistry()
for _spec in SPECS.values():
    REGISTRY.register(_spec.descriptor, _spec.factory, _spec.validate_request)
