"""The request settings of `anthropic.messages.v1`, checked when a profile is loaded or the
adapter built."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

from anthropic.resources.beta.messages import Messages
from pydantic import Field, ValidationInfo, field_validator

from satchel.providers.kit.settings import RequestSettings, StreamFlag, compaction_of

SDK_REQUEST_KEYS = frozenset(inspect.signature(Messages.create).parameters) - {
    "self",
    "extra_headers",
    "extra_query",
    "timeout",
}
COMPACTION_BETA = "compact-2026-09-04"
THRESHOLD_BETA = "compact-2026-01-12"
# Settings that would move the conversation out of the adapter's hands, switch models, or make
# an answer something other than plain text.
OWNED_KEYS = (
    "messages",
    "system",
    "compaction",
    "tools",
    "tool_choice",
    "mcp_servers",
    "container",
    "thread",
    "fallbacks",
    "fallback_credit_token",
)
THINKING_TYPES = frozenset({"adaptive", "enabled", "disabled"})


class MessagesSettings(RequestSettings):
    """A Messages `request` section: an output cap, plain-text stop sequences, the compaction
    beta for native compaction (never threshold compaction), and checked thinking and cache
    settings."""

    api: ClassVar[str] = "Messages"
    sdk: ClassVar[str] = "anthropic"
    sdk_keys: ClassVar[frozenset[str]] = SDK_REQUEST_KEYS
    owned: ClassVar[tuple[str, ...]] = OWNED_KEYS
    why_owned: ClassVar[str] = (
        "{adapter_id} owns the conversation (the system prompt comes from the session), its "
        "compaction and the model, and answers in plain text"
    )

    max_tokens: Any = Field(default=None, validate_default=True)
    stream: StreamFlag = None
    stop_sequences: Any = None
    betas: Any = Field(default_factory=list, validate_default=True)
    thinking: Any = None
    cache_control: Any = None
    output_config: Any = None

    @classmethod
    def refused_first(cls, request: Mapping[str, Any], adapter_id: str) -> None:
        extra = request.get("extra_body")
        for where, settings in (("request", request), ("request.extra_body", extra)):
            if isinstance(settings, Mapping) and "context_management" in settings:
                raise ValueError(
                    f"{where}.context_management: threshold compaction and context edits are "
                    "refused (they would summarize or drop history inside an action request, "
                    "the newest frame included); choose runtime.compaction.strategy: native"
                )
        found = _key_path(request, "pause_after_compaction")
        if found is not None:
            raise ValueError(
                f"{found}: refused; pausing after a compaction would not protect the newest "
                "frame (native compaction runs as its own request)"
            )

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _max_tokens(cls, tokens: Any) -> Any:
        if type(tokens) is not int or tokens <= 0:
            raise ValueError(f"request.max_tokens: expected a positive integer, got {tokens!r}")
        return tokens

    @field_validator("stop_sequences", mode="before")
    @classmethod
    def _stop_sequences(cls, stops: Any) -> Any:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise ValueError("request.stop_sequences: expected a list of non-empty strings")
        return stops

    @field_validator("betas", mode="before")
    @classmethod
    def _betas(cls, betas: Any, info: ValidationInfo) -> Any:
        if not isinstance(betas, list) or not all(isinstance(b, str) and b for b in betas):
            raise ValueError("request.betas: expected a list of beta names")
        if THRESHOLD_BETA in betas:
            raise ValueError(
                f"request.betas: {THRESHOLD_BETA} is the threshold-compaction beta, refused; "
                f"native on-demand compaction uses {COMPACTION_BETA}"
            )
        if compaction_of(info) == "native" and COMPACTION_BETA not in betas:
            raise ValueError(
                f"request.betas: native compaction needs {COMPACTION_BETA!r} (sent on every "
                "request, so the signed summary is accepted back)"
            )
        return betas

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, thinking: Any) -> Any:
        if thinking is None:
            return thinking
        if not isinstance(thinking, Mapping) or thinking.get("type") not in THINKING_TYPES:
            raise ValueError(
                "request.thinking: expected {type: adaptive | enabled | disabled, ...}"
            )
        if thinking["type"] == "disabled" and "display" in thinking:
            raise ValueError("request.thinking.display: not with thinking disabled")
        if thinking.get("display", "summarized") not in ("summarized", "omitted"):
            raise ValueError("request.thinking.display: expected summarized or omitted")
        return thinking

    @field_validator("cache_control", mode="before")
    @classmethod
    def _cache_control(cls, cache: Any) -> Any:
        if cache is None:
            return cache
        if (
            not isinstance(cache, Mapping)
            or cache.get("type") != "ephemeral"
            or not set(cache) <= {"type", "ttl"}
            or cache.get("ttl", "5m") not in ("5m", "1h")
        ):
            raise ValueError(
                "request.cache_control: expected {type: ephemeral} with an optional ttl of 5m or 1h"
            )
        return cache

    @field_validator("output_config", mode="before")
    @classmethod
    def _output_config(cls, config: Any) -> Any:
        if not isinstance(config, Mapping):
            raise ValueError("request.output_config: expected a mapping")
        return config


def _key_path(value: object, key: str, where: str = "request") -> str | None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            path = f"{where}.{name}"
            if name == key:
                return path
            if (found := _key_path(item, key, path)) is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _key_path(item, key, f"{where}[{index}]")) is not None:
                return found
    return None
