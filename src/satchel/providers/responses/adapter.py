"""The base of the Responses adapters: client-held state replayed exactly, `store: false`.

Each request sends the accepted items (every user input and every native output item of the
accepted turns, encrypted reasoning included), then the buffered inputs and the turn's new ones.
Only a `completed` response with visible text can supply an action; everything else raises the
attempt error the retry policy expects. Subclasses add their provider's request rules and
compaction.
"""

from __future__ import annotations

from typing import Any

import openai

from satchel.providers.kit.adapter import AdapterBase
from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.result import turn_result
from satchel.providers.kit.state import History
from satchel.providers.responses.settings import ResponsesSettings
from satchel.providers.responses.state import Item, ResponsesState, input_item, replayable
from satchel.providers.responses.wire import ResponsesReply, call_responses, failed_error
from satchel.turns import (
    AttemptError,
    ConfigurationError,
    InvalidResponseError,
    ModelTurnRequest,
    ModelTurnResult,
    NativeCompaction,
    RefusalError,
    RuntimeState,
    TransitionTelemetry,
    TruncatedError,
    Usage,
)

# Output items that mean the model asked for a tool rather than answering.
_TOOL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "mcp_call", "local_shell_call"}
)


class ResponsesAdapter(AdapterBase):
    """Continuous conversation over Responses with exact replay; see the module docstring.
    `request_settings` checks the profile's `request` section."""

    strategy = "continuous_conversation"
    request_settings: type[ResponsesSettings]
    handling = ResponsesState()

    def __init__(self, client: openai.OpenAI, request: dict[str, Any]) -> None:
        self.client = client
        self.request = self.request_settings.check(
            request, self.descriptor.adapter_id, self.strategy
        )
        self.model = str(self.request["model"])

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        inputs = [*state.payload["pending"], *map(input_item, request.new_messages)]
        history = History(state.payload["items"], state.accepted_turns)
        compaction = None
        if request.compact:
            history, compaction = self.compacted(state)
        sent = [*history.items, *inputs]
        try:
            reply = call_responses(self.client, {**self.request, "input": sent})
            text = self.accept(reply)
        except AttemptError as exc:  # the compaction's usage is billed with the failed attempt
            if compaction is not None:
                exc.usage = compaction.usage + (exc.usage or Usage())
            raise
        output = replayable(reply.items)
        provisional = self.handling.committed(state, history, inputs, output, reply.reasoning)
        telemetry = TransitionTelemetry(
            items_sent=len(sent),
            compaction_items_returned=sum(i.get("type") == "compaction" for i in output),
            history_before=len(state.payload["items"]),
            history_after=len(provisional.payload["items"]),
        )
        return self.result(reply, text, provisional, sent, telemetry, compaction)

    def result(
        self,
        reply: ResponsesReply,
        text: str,
        provisional: RuntimeState,
        sent: list[Item],
        telemetry: TransitionTelemetry,
        compaction: NativeCompaction | None = None,
    ) -> ModelTurnResult:
        """The attempt's result for an accepted-looking `reply` to the request of `sent`."""
        return turn_result(
            self,
            text=text,
            reasoning=reply.reasoning,
            finish_reason="completed",
            model=reply.model,
            response_id=reply.response_id,
            usage=reply.usage,
            provisional=provisional,
            sent=sent,
            telemetry=telemetry,
            compaction=compaction,
        )

    def compacted(self, state: RuntimeState) -> tuple[History, NativeCompaction | None]:
        """The accepted history after a native compaction, and what it cost. Adapters without
        native compaction never get a compact request (profiles refuse it)."""
        raise ConfigurationError(f"{self.descriptor.adapter_id} has no native compaction")

    def accept(self, reply: ResponsesReply) -> str:
        """Return the answer text of a completed response, or raise the error it deserves."""
        if reply.usage is None:
            raise reply_error(
                InvalidResponseError,
                "the provider reported no usage; every request must be accounted for",
                reply,
            )
        if reply.status == "failed":
            raise failed_error(reply)
        if reply.status == "incomplete":
            reason = reply.incomplete_reason
            if reason == "max_output_tokens":
                raise reply_error(TruncatedError, "the answer hit the output limit", reply)
            if reason == "content_filter":
                raise reply_error(RefusalError, "the answer was filtered", reply, error_type=reason)
            raise reply_error(
                InvalidResponseError,
                f"the response is incomplete ({reason})",
                reply,
                error_type=reason,
            )
        if reply.status != "completed":
            raise reply_error(
                InvalidResponseError, f"the response did not complete ({reply.status})", reply
            )
        if reply.refusal is not None:
            raise reply_error(RefusalError, "the model refused", reply)
        if any(item.get("type") in _TOOL_ITEMS for item in reply.items):
            raise reply_error(
                InvalidResponseError,
                "the model called a tool; this adapter accepts plain-text answers only",
                reply,
            )
        if any(
            item.get("type") == "reasoning" and not item.get("encrypted_content")
            for item in reply.items
        ):
            raise reply_error(
                InvalidResponseError,
                "a reasoning item came back without its encrypted content, so it cannot be "
                "replayed",
                reply,
            )
        text = reply.text
        if not text.strip():
            raise reply_error(InvalidResponseError, "the answer is empty", reply)
        return text
