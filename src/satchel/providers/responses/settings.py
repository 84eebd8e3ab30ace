"""The request settings of the Responses adapters, checked when a profile is loaded or an
adapter built."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from openai.resources.responses import Responses
from pydantic import ValidationInfo, field_validator, model_validator

from satchel.providers.kit.settings import RequestSettings, StreamFlag, strategy_of

SDK_REQUEST_KEYS = frozenset(inspect.signature(Responses.create).parameters) - {
    "self",
    "extra_headers",
    "extra_query",
    "timeout",
}
ENCRYPTED = "reasoning.encrypted_content"
# Settings that would move the conversation's state out of the adapter's hands, or change
# what an answer is (satchel builds the input itself and accepts plain-text answers only).
OWNED_KEYS = (
    "input",
    "instructions",
    "prompt",
    "previous_response_id",
    "conversation",
    "background",
    "background_options",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_tool_calls",
)


class ResponsesSettings(RequestSettings):
    """A Responses `request` section: streaming a boolean, truncation never automatic, and for
    client-held state `store: false` with the encrypted reasoning included."""

    api: ClassVar[str] = "Responses"
    sdk_keys: ClassVar[frozenset[str]] = SDK_REQUEST_KEYS
    owned: ClassVar[tuple[str, ...]] = OWNED_KEYS
    why_owned: ClassVar[str] = (
        "{adapter_id} owns the conversation's input and state, and answers in plain text"
    )

    stream: StreamFlag = None
    truncation: Any = "disabled"
    store: Any = None
    include: Any = None
    reasoning: Any = None
    context_management: Any = None

    @field_validator("truncation", mode="before")
    @classmethod
    def _truncation(cls, truncation: Any) -> Any:
        if truncation != "disabled":
            raise ValueError(
                "request.truncation: must be disabled; automatic truncation would drop accepted "
                "items without the adapter knowing"
            )
        return truncation

    def check_replay(self) -> None:
        """Client-held state needs `store: false` and the encrypted reasoning back."""
        if self.store is not False:
            raise ValueError(
                "request.store: continuous_conversation needs store: false (the adapter carries "
                "the conversation, the provider keeps nothing)"
            )
        if not isinstance(self.include, list) or ENCRYPTED not in self.include:
            raise ValueError(
                f"request.include: continuous_conversation needs {ENCRYPTED!r}, so reasoning can "
                "be replayed"
            )

    def has(self, name: str) -> bool:
        """Whether the section sets `name`."""
        return name in self.model_fields_set


class OpenAIResponsesSettings(ResponsesSettings):
    """`openai.responses.v1`: for `continuous_conversation`, the replay rules plus readable
    reasoning kept in context; for `previous_response_id`, stored responses. Inline compaction
    (`context_management`) is checked for both."""

    @classmethod
    def refused_first(cls, request: Mapping[str, Any], adapter_id: str) -> None:
        if "previous_response_id" in request:
            raise ValueError(
                "request.previous_response_id: not allowed; choose runtime.state: "
                "previous_response_id and the adapter keeps the handle"
            )

    @model_validator(mode="after")
    def _strategy(self, info: ValidationInfo) -> Self:
        if strategy_of(info) == "previous_response_id":
            if self.store is False:
                raise ValueError(
                    "request.store: previous_response_id needs the provider to store responses"
                )
        else:
            self.check_replay()
            reasoning = self.reasoning
            if not isinstance(reasoning, Mapping):
                raise ValueError(
                    "request.reasoning: continuous_conversation needs reasoning.context: auto "
                    "and reasoning.summary: auto"
                )
            for key in ("context", "summary"):
                if reasoning.get(key) != "auto":
                    raise ValueError(
                        f"request.reasoning.{key}: continuous_conversation needs auto, "
                        f"got {reasoning.get(key)!r}"
                    )
        if self.has("context_management"):
            _check_context_management(self.context_management)
        return self


class XAIResponsesSettings(ResponsesSettings):
    """`xai.responses.v1`: the replay rules; compaction by a separate call, never inline; no
    OpenAI-only reasoning settings."""

    @model_validator(mode="after")
    def _replay(self) -> Self:
        self.check_replay()
        if self.has("context_management"):
            raise ValueError(
                "request.context_management: xAI compacts by a separate call; choose "
                "runtime.compaction.strategy: native"
            )
        if isinstance(self.reasoning, Mapping) and "context" in self.reasoning:
            raise ValueError("request.reasoning.context: not an xAI setting")
        return self


def _check_context_management(value: object) -> None:
    entries = value if isinstance(value, list) else None
    if not entries or not all(
        isinstance(entry, Mapping)
        and entry.get("type") == "compaction"
        and type(entry.get("compact_threshold")) is int
        and entry["compact_threshold"] > 0
        for entry in entries
    ):
        raise ValueError(
            "request.context_management: expected a list of {type: compaction, "
            "compact_threshold: <positive tokens>}"
        )
