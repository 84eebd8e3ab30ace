"""`open_source.chat_completions.v1`: continuous conversation with OpenAI-compatible open-weight
servers.

Each accepted plain-text answer is replayed with its exact reasoning string under the aliases the
profile names (`reasoning_content`, `reasoning` or both). Tool calls, refusals, conflicting
reasoning fields, unfinished answers and missing usage are refused. Supports harness summary
compaction: summarize, unwind the latest accepted turn, rebuild behind a bridge message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.chat.state import ChatState
from satchel.providers.chat.summary import ChatSummaries
from satchel.providers.chat.wire import REASONING_FIELDS, ChatReply
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    InvalidResponseError,
)


class OpenSourceChatAdapter(ChatSummaries):
    """Exact reasoning replay for open-weight models behind Chat Completions."""

    descriptor = AdapterDescriptor(
        adapter_id="open_source.chat_completions.v1",
        provider="open_source",
        api_surface="chat.completions",
        implementation_path="src/satchel/providers/chat/open_source_chat.py",
        version="1.0.0",
        strategies=("continuous_conversation",),
        review_status="unreviewed",
        compaction=("none", "harness_summary"),
    )
    strategy = "continuous_conversation"

    def __init__(
        self,
        client: openai.OpenAI,
        request: dict[str, Any],
        *,
        reasoning_replay: Sequence[str] = ("reasoning_content",),
        summary_max_tokens: int | None = None,
    ) -> None:
        super().__init__(client, request)
        aliases = tuple(reasoning_replay)
        if not aliases or len(set(aliases)) != len(aliases) or set(aliases) - set(REASONING_FIELDS):
            raise ConfigurationError(
                "runtime.reasoning_replay: expected one or both of reasoning_content, reasoning; "
                f"got {list(aliases)!r}"
            )
        self.handling = ChatState(aliases)
        self.summary_max_tokens = summary_max_tokens

    def accept_reply(self, reply: ChatReply) -> tuple[str, str | None]:
        values = {value for value in reply.reasoning.values() if value}
        if len(values) > 1:
            raise InvalidResponseError(
                "the answer carries different reasoning under reasoning_content and reasoning",
                usage=reply.usage,
            )
        text, _ = super().accept_reply(reply)
        return text, values.pop() if values else None
