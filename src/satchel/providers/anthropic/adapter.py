"""`anthropic.messages.v1`: Anthropic Messages as a continuous conversation held in memory,
with native on-demand compaction.

Each request sends the session's system prompt apart, then the accepted messages (every assistant
content block replayed in order: thinking with its signature, empty thinking, redacted thinking,
compaction blocks, unknown fields), then the buffered inputs and the turn's new ones. Only
`end_turn`, or a `stop_sequence` the profile configured, can supply an action; refusals, truncated
or paused answers, unfinished streams and inline compaction blocks go to the retry policy.

When the session asks for a compaction, the accepted history alone goes out first, as a separate
request with `compaction: {type: summarize}` (same model, system prompt, thinking and effort; no
stop sequences or output format; its own output cap); the buffered inputs and the new frame are
held aside. Its answer must be exactly one signed compaction block with a summary, which then
stands for the whole prefix: it goes first in the action request, followed by the held inputs.
The compaction is part of the attempt: it commits only with an accepted action, and a retry
compacts the unchanged accepted history again. There is no harness-summary capability.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anthropic

from satchel.providers.anthropic.settings import MessagesSettings
from satchel.providers.anthropic.state import (
    Block,
    MessagesState,
    NativeMessage,
    readable,
    replayable,
    shown,
    split_inputs,
)
from satchel.providers.anthropic.wire import MessagesReply, call_messages
from satchel.providers.kit.adapter import AdapterBase
from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.result import turn_result
from satchel.providers.kit.state import History
from satchel.turns import (
    AdapterDescriptor,
    AttemptError,
    ConfigurationError,
    InvalidResponseError,
    ModelTurnRequest,
    ModelTurnResult,
    NativeCompaction,
    NeutralMessage,
    RefusalError,
    RuntimeState,
    TransitionTelemetry,
    TruncatedError,
    Usage,
)

DESCRIPTOR = AdapterDescriptor(
    adapter_id="anthropic.messages.v1",
    provider="anthropic",
    api_surface="messages",
    implementation_path="src/satchel/providers/anthropic/adapter.py",
    version="1.0.0",
    strategies=("continuous_conversation",),
    review_status="unreviewed",
    compaction=("none", "native"),
)
ACTION_ONLY = ("stop_sequences",)
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_NOT_AN_ACTION = {
    "tool_use": "the model called a tool; this adapter accepts plain-text answers only",
    "pause_turn": "the answer was paused before it finished",
    "compaction": "the answer is a compaction, not an action",
}


class AnthropicMessagesAdapter(AdapterBase):
    """Continuous conversation over Anthropic Messages; see the module docstring."""

    descriptor = DESCRIPTOR
    strategy = "continuous_conversation"
    handling = MessagesState()

    def __init__(
        self,
        client: anthropic.Anthropic,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.request = MessagesSettings.check(request, DESCRIPTOR.adapter_id, self.strategy)
        self.model = str(self.request["model"])
        self.summary_max_tokens = summary_max_tokens or int(self.request["max_tokens"])
        self.stop_sequences = frozenset(self.request.get("stop_sequences", ()))

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        system, users = self._inputs(state, request.new_messages)
        inputs = [*state.payload["pending"], *users]
        history = History(state.payload["messages"], state.accepted_turns)
        compaction = None
        if request.compact:
            history, compaction = self.compacted(state, system)
        sent = [*history.items, *inputs]
        try:
            reply = call_messages(self.client, self._body(self.request, system, sent))
            text = self.accept(reply)
        except AttemptError as exc:  # the compaction's usage is billed with the failed attempt
            if compaction is not None:
                exc.usage = compaction.usage + (exc.usage or Usage())
            raise
        blocks = replayable(reply.blocks)
        provisional = self.handling.committed(
            state, history, inputs, blocks, reply.reasoning, system
        )
        return turn_result(
            self,
            text=text,
            reasoning=reply.reasoning,
            finish_reason=str(reply.stop_reason),
            model=reply.model,
            response_id=reply.message_id,
            usage=reply.usage,
            provisional=provisional,
            sent=sent,
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                compaction_items_returned=int(compaction is not None),
                history_before=len(state.payload["messages"]),
                history_after=len(provisional.payload["messages"]),
            ),
            readable=(*shown(history.items, history.turns), *map(readable, inputs)),
            compaction=compaction,
        )

    def _inputs(
        self, state: RuntimeState, messages: Sequence[NeutralMessage]
    ) -> tuple[str | None, list[NativeMessage]]:
        """The session's system prompt (fixed by its first turn) and this turn's user messages."""
        system, users = split_inputs(messages, "new_messages")
        fixed = state.payload["system"]
        started = bool(state.payload["messages"])
        if system is None:
            return fixed, users
        if (started or fixed is not None) and system != fixed:
            raise ConfigurationError(
                "new_messages: the system prompt cannot change during a session"
            )
        return system, users

    def _body(
        self, settings: Mapping[str, Any], system: str | None, messages: list[NativeMessage]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {**settings, "messages": messages}
        if system is not None:
            body["system"] = system
        return body

    def compacted(
        self, state: RuntimeState, system: str | None
    ) -> tuple[History, NativeCompaction | None]:
        """The accepted history replaced by one signed compaction block, and what it cost; the
        history unchanged (no compaction) when nothing has been accepted yet."""
        history: list[NativeMessage] = state.payload["messages"]
        if not state.accepted_turns:
            return History(history, ()), None
        settings = {k: v for k, v in self.request.items() if k not in ACTION_ONLY}
        if isinstance(settings.get("output_config"), Mapping):
            kept = {k: v for k, v in settings["output_config"].items() if k != "format"}
            settings = {k: v for k, v in settings.items() if k != "output_config"}
            if kept:
                settings["output_config"] = kept
        settings["max_tokens"] = self.summary_max_tokens
        settings["compaction"] = {"type": "summarize"}
        reply = call_messages(self.client, self._body(settings, system, history))
        block = self._summary(reply)
        record = {
            "items_before": len(history),
            "items_after": 1,
            "items_summarized": len(history),
            "turns_compacted": len(state.accepted_turns),
        }
        assert reply.usage is not None
        summary: NativeMessage = {"role": "assistant", "content": replayable([block])}
        return History([summary], ()), NativeCompaction(reply.usage, record)

    def _summary(self, reply: MessagesReply) -> Block:
        """The one signed compaction block of a compaction answer, or the error it deserves."""
        self._stopped(reply, expected=("compaction",))
        blocks = reply.blocks
        if len(blocks) != 1 or blocks[0].get("type") != "compaction":
            kinds = ", ".join(str(b.get("type")) for b in blocks) or "nothing"
            raise reply_error(
                InvalidResponseError,
                f"the compaction must answer exactly one compaction block (got {kinds})",
                reply,
            )
        block = blocks[0]
        content, signature = block.get("content"), block.get("signature")
        if not isinstance(content, str) or not content.strip():
            raise reply_error(InvalidResponseError, "the compaction summary is empty", reply)
        if not isinstance(signature, str) or not signature:
            raise reply_error(InvalidResponseError, "the compaction summary is unsigned", reply)
        return block

    def accept(self, reply: MessagesReply) -> str:
        """Return the answer text of a finished answer, or raise the error it deserves."""
        self._stopped(reply, expected=("end_turn", "stop_sequence"))
        if reply.stop_reason == "stop_sequence" and reply.stop_sequence not in self.stop_sequences:
            raise reply_error(
                InvalidResponseError, "the answer stopped at a sequence nobody configured", reply
            )
        kinds = {str(block.get("type")) for block in reply.blocks}
        if "compaction" in kinds:
            raise reply_error(
                InvalidResponseError,
                "an action answer carried an inline compaction block; compaction runs as its "
                "own request",
                reply,
            )
        if kinds & _TOOL_BLOCKS:
            raise reply_error(InvalidResponseError, _NOT_AN_ACTION["tool_use"], reply)
        if any(
            block.get("type") == "thinking" and not block.get("signature") for block in reply.blocks
        ):
            raise reply_error(
                InvalidResponseError,
                "a thinking block came back without its signature, so it cannot be replayed",
                reply,
            )
        text = reply.text
        if not text.strip():
            raise reply_error(InvalidResponseError, "the answer is empty", reply)
        return text

    def _stopped(self, reply: MessagesReply, expected: tuple[str, ...]) -> None:
        """Refuse an answer without usage, or one that stopped for a reason not `expected`."""
        if reply.usage is None:
            raise reply_error(
                InvalidResponseError,
                "the provider reported no usage; every request must be accounted for",
                reply,
            )
        reason = reply.stop_reason
        if reason in expected:
            return
        if reason == "refusal":
            details = reply.stop_details or {}
            raise reply_error(
                RefusalError, "the model refused", reply, error_type=details.get("category")
            )
        if reason in ("max_tokens", "model_context_window_exceeded"):
            raise reply_error(
                TruncatedError, "the answer hit the output limit", reply, error_type=reason
            )
        message = _NOT_AN_ACTION.get(str(reason), f"the answer stopped for {reason!r}")
        raise reply_error(InvalidResponseError, message, reply, error_type=reason)
