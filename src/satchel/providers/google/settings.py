"""The request settings of `google.interactions.v1`, checked when a profile is loaded or the
adapter built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from google.genai._gaos.types.interactions import CreateModelInteraction
from pydantic import Field, field_validator

from satchel.providers.kit.settings import RequestSettings, StreamFlag

SDK_REQUEST_KEYS = frozenset(
    field.alias or name for name, field in CreateModelInteraction.model_fields.items()
) | {"extra_body"}
# Settings that would move the conversation's state out of the adapter's hands (the input, the
# system instruction from the session, server-side history and continuation), or make an
# answer something other than plain text.
OWNED_KEYS = (
    "input",
    "system_instruction",
    "previous_interaction_id",
    "background",
    "continuation_token",
    "tools",
    "environment",
    "webhook_config",
)


class InteractionsSettings(RequestSettings):
    """An Interactions `request` section: nothing stored by the provider, streaming a boolean,
    readable thought summaries."""

    api: ClassVar[str] = "Interactions"
    sdk: ClassVar[str] = "google-genai"
    sdk_keys: ClassVar[frozenset[str]] = SDK_REQUEST_KEYS
    owned: ClassVar[tuple[str, ...]] = OWNED_KEYS
    why_owned: ClassVar[str] = (
        "{adapter_id} owns the conversation's input and state (the system instruction comes "
        "from the session, the provider keeps nothing), and answers in plain text"
    )

    store: Any = False
    stream: StreamFlag = None
    generation_config: Any = Field(default=None, validate_default=True)

    @field_validator("store", mode="before")
    @classmethod
    def _store(cls, store: Any) -> Any:
        if store is not False:
            raise ValueError(
                "request.store: continuous_conversation needs store: false (the adapter carries "
                "the conversation, the provider keeps nothing)"
            )
        return store

    @field_validator("generation_config", mode="before")
    @classmethod
    def _thinking_summaries(cls, config: Any) -> Any:
        if not isinstance(config, Mapping):
            raise ValueError(
                "request.generation_config: expected a mapping with thinking_summaries: auto"
            )
        if config.get("thinking_summaries") != "auto":
            raise ValueError(
                "request.generation_config.thinking_summaries: continuous_conversation needs "
                f"auto, got {config.get('thinking_summaries')!r}"
            )
        return config
