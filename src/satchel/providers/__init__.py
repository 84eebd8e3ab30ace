"""Provider adapters by family (one spec per adapter id), their registry, and model profiles."""

from satchel.providers.chat.open_source_chat import OpenSourceChatAdapter
from satchel.providers.chat.openai_chat import OpenAIChatAdapter
from satchel.providers.profiles import (
    Profile,
    ProfileError,
    build_adapter,
    example_profiles,
    load_profiles,
    parse_profiles,
)
from satchel.providers.registry import REGISTRY

__all__ = [
    "REGISTRY",
    "OpenAIChatAdapter",
    "OpenSourceChatAdapter",
    "Profile",
    "ProfileError",
    "build_adapter",
    "example_profiles",
    "load_profiles",
    "parse_profiles",
]
