"""`openai.chat_completions.v1`: Chat Completions with `manual_rolling` state.

The visible replies are the state. The window is trimmed by whole turns, oldest first, only when
the estimated request passes its limit, and then down to a lower target, so consecutive requests
share their prefix until the limit is breached again. A server's context overflow recalibrates
the estimate (by the server's own count of the request) and the limit (by the model's context),
so the retried attempt is trimmed to fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.chat.adapter import ChatCompletionsAdapter
from satchel.providers.chat.state import message_tokens, trim_window
from satchel.providers.kit.state import History
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    ContextOverflowError,
    NeutralMessage,
    RuntimeState,
)

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
        self.target_fraction = target_fraction
        self.target_tokens = int(limit_tokens * target_fraction)
        self.token_scale = 1.0  # the server's tokens per estimated token, once it has said
        self.sent_estimate = 0  # the unscaled estimate of the last request

    def window(self, state: RuntimeState, inputs: Sequence[NeutralMessage]) -> History:
        history = trim_window(
            state, inputs, self.limit_tokens, self.target_tokens, self.token_scale
        )
        sent = (*state.payload["preamble"], *history.items, *inputs)
        self.sent_estimate = sum(message_tokens(message) for message in sent)
        return history

    def trim_after_overflow(self, error: ContextOverflowError) -> bool:
        """Scale the estimate to the server's count of the refused request, and bring the limit
        under the model's context, less the output limit when that is smaller (servers that
        count it, as vLLM does, refuse otherwise). False when the answer states no size: nothing
        to calibrate by, so a retry would send the same request."""
        if error.prompt_tokens is None and error.context_tokens is None:
            return False
        if error.prompt_tokens and self.sent_estimate:
            self.token_scale = max(self.token_scale, error.prompt_tokens / self.sent_estimate)
        context = error.context_tokens
        if context:
            output = self.request.get("max_completion_tokens") or self.request.get("max_tokens")
            room = context - output if isinstance(output, int) and output < context else context
            self.limit_tokens = min(self.limit_tokens, room)
            self.target_tokens = int(self.limit_tokens * self.target_fraction)
        return True
