"""The request settings of the Chat Completions adapters, checked when a profile is loaded or an
adapter built."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

import openai
from pydantic import Field, ValidationInfo, field_validator

from satchel.providers.chat.deepseek_state import ANSWER_TOOL_NAME, THINKING
from satchel.providers.kit.settings import RequestSettings

OWNED_KEYS = ("messages", "tools", "tool_choice", "functions", "function_call")
SDK_REQUEST_KEYS = frozenset(
    inspect.signature(openai.resources.chat.Completions.create).parameters
) - {"self"}


class ChatCompletionsSettings(RequestSettings):
    """A Chat Completions `request` section: one answer per turn; streaming always asks for the
    usage chunk."""

    api: ClassVar[str] = "Chat Completions"
    sdk_keys: ClassVar[frozenset[str]] = SDK_REQUEST_KEYS
    owned: ClassVar[tuple[str, ...]] = OWNED_KEYS
    why_owned: ClassVar[str] = "{adapter_id} builds messages itself and answers in plain text"

    n: Any = Field(default=1)
    stream: Any = None
    stream_options: Any = None

    @field_validator("n", mode="before")
    @classmethod
    def _one_answer(cls, n: Any) -> Any:
        if n != 1:
            raise ValueError("request.n: must be 1 (one answer per turn)")
        return n

    @field_validator("stream_options", mode="before")
    @classmethod
    def _usage_when_streaming(cls, options: Any, info: ValidationInfo) -> Any:
        if info.data.get("stream"):
            if options is not None and not isinstance(options, dict):
                raise ValueError("request.stream_options: expected a mapping")
            if (options or {}).get("include_usage") is False:
                raise ValueError(
                    "request.stream_options.include_usage: must be true when streaming; "
                    "usage arrives in the last chunk"
                )
        elif options is not None:
            raise ValueError("request.stream_options: only valid with request.stream: true")
        return options

    def sent(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("stream"):
            request["stream_options"] = {
                **(request.get("stream_options") or {}),
                "include_usage": True,
            }
        return request


class DeepSeekSettings(ChatCompletionsSettings):
    """A DeepSeek `request` section: the Chat Completions rules, the adapter's own tool, and
    thinking mode (absent means enabled, anything else is refused)."""

    extra_body: Any = None

    @classmethod
    def refused_first(cls, request: Mapping[str, Any], adapter_id: str) -> None:
        extra = request.get("extra_body", {})
        for key in OWNED_KEYS:
            for where, settings in (("request", request), ("request.extra_body", extra)):
                if isinstance(settings, Mapping) and key in settings:
                    raise ValueError(
                        f"{where}.{key}: not allowed; {adapter_id} builds the messages and owns "
                        f"the one tool ({ANSWER_TOOL_NAME}) it sends"
                    )

    @field_validator("extra_body", mode="before")
    @classmethod
    def _thinking(cls, extra: Any, info: ValidationInfo) -> Any:
        if dict(extra or {}).get("thinking", THINKING) != THINKING:
            raise ValueError(
                f"request.extra_body.thinking: must be {THINKING!r} (or left out); "
                f"{(info.context or {}).get('adapter_id')} replays reasoning in thinking mode only"
            )
        return extra

    def sent(self, request: dict[str, Any]) -> dict[str, Any]:
        settings = super().sent(request)
        extra = dict(settings.get("extra_body") or {})
        settings["extra_body"] = {**extra, "thinking": dict(THINKING)}
        return settings
