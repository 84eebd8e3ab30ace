"""`openai.chat_completions.v1`: Chat Completions with `manual_rolling` state.

The visible replies are the state. The window is trimmed by whole turns, oldest first, only when
the estimated request passes its limit, and then down to a lower target, so consecutive requests
share their prefix until the limit is breached again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.chat.adapter import ChatCompletionsAdapter
from satchel.providers.chat.state import trim_window
from satchel.providers.kit.state import History
from satchel.turns import AdapterDescriptor, ConfigurationError, NeutralMessage, RuntimeState

DEFAULT_TARGET_FRACTION = 0.7


class OpenAIChatAdapter(ChatCompletionsAdapter):
    """OpenAI-compatible Chat Completions (Grok included) with a held, trimmed window."""

    descriptor = AdapterDescriptor(
        adapter_id="openai.chat_completions.v1",
        provider="openai",
        api_surface="chat.completions",
        implementation_path="src/satchel/providers/chat/openai_chat.py",
        version="1.0.0",
        strategies=("manual_rolling",),
        review_status="unreviewed",
        compaction=("none",),
    )
    strategy = "manual_rolling"

    def __init__(
        self,
        client: openai.OpenAI,
        request: dict[str, Any],
        *,
        limit_tokens: int,
        target_fraction: float = DEFAULT_TARGET_FRACTION,
    ) -> None:
        super().__init__(client, request)
        if type(limit_tokens) is not int or limit_tokens <= 0:
            raise ConfigurationError(
                f"runtime.trim.limit_tokens: expected a positive integer, got {limit_tokens!r}"
            )
        if not 0 < target_fraction <= 1:
            raise ConfigurationError(
                f"runtime.trim.target_fraction: expected 0 < fraction <= 1, got {target_fraction!r}"
            )
        self.limit_tokens = limit_tokens
        self.target_tokens = int(limit_tokens * target_fraction)

    def window(self, state: RuntimeState, inputs: Sequence[NeutralMessage]) -> History:
        return trim_window(state, inputs, self.limit_tokens, self.target_tokens)
