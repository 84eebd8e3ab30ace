"""The base of the Responses adapters: client-held state replayed exactly, `store: false`.

Each request sends the accepted items (every user input and every native output item of the
accepted turns, encrypted reasoning included), then the buffered inputs and the turn's new ones.
Only a `completed` response with visible text can supply an action; everything else raises the
attempt error the retry policy expects. Subclasses add their provider's request rules and
compaction.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import openai
from openai.resources.responses import Responses

from satchel.providers.openai_sdk import check_settings, reply_error
from satchel.providers.responses_state import (
    Item,
    buffered,
    check_payload,
    committed,
    descriptor,
    empty_payload,
    input_item,
    readable,
    replayable,
)
from satchel.providers.responses_wire import ResponsesReply, call_responses, failed_error
from satchel.turns import (
    AdapterDescriptor,
    AttemptError,
    ConfigurationError,
    InvalidResponseError,
    Message,
    ModelResponse,
    ModelTurnRequest,
    ModelTurnResult,
    NativeCompaction,
    RefusalError,
    RequestRecord,
    RuntimeState,
    TransitionTelemetry,
    TruncatedError,
    Usage,
    redact,
)

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
# Output items that mean the model asked for a tool rather than answering.
_TOOL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "mcp_call", "local_shell_call"}
)


def check_request(
    request: object, adapter_id: str, *, owned: Sequence[str] = OWNED_KEYS
) -> dict[str, Any]:
    """The checks every Responses request passes: a mapping of SDK settings with a model, none
    of the `owned` ones, streaming a boolean, truncation never automatic."""
    settings = check_settings(
        request,
        api="Responses",
        sdk_keys=SDK_REQUEST_KEYS,
        owned=owned,
        why_owned=f"{adapter_id} owns the conversation's input and state, and answers in "
        "plain text",
    )
    if "stream" in settings and not isinstance(settings["stream"], bool):
        raise ConfigurationError("request.stream: expected true or false")
    if settings.get("truncation", "disabled") != "disabled":
        raise ConfigurationError(
            "request.truncation: must be disabled; automatic truncation would drop accepted "
            "items without the adapter knowing"
        )
    return settings


def check_replay(settings: Mapping[str, Any]) -> None:
    """Client-held state needs `store: false` and the encrypted reasoning back."""
    if settings.get("store") is not False:
        raise ConfigurationError(
            "request.store: continuous_conversation needs store: false (the adapter carries the "
            "conversation, the provider keeps nothing)"
        )
    include = settings.get("include")
    if not isinstance(include, list) or ENCRYPTED not in include:
        raise ConfigurationError(
            f"request.include: continuous_conversation needs {ENCRYPTED!r}, so reasoning can be "
            "replayed"
        )


class ResponsesAdapter:
    """Continuous conversation over Responses with exact replay; see the module docstring."""

    descriptor: AdapterDescriptor
    strategy = "continuous_conversation"
    opaque_fields: frozenset[str] = frozenset()

    def __init__(self, client: openai.OpenAI, request: dict[str, Any]) -> None:
        self.client = client
        self.request = self.validate_request(request, self.strategy)
        self.model = str(self.request["model"])

    @classmethod
    def validate_request(
        cls, request: object, strategy: str, compaction: str = "none"
    ) -> dict[str, Any]:
        settings = check_request(request, cls.descriptor.adapter_id)
        check_replay(settings)
        return settings

    def initial_state(self) -> RuntimeState:
        return RuntimeState(self.descriptor.adapter_id, self.strategy, empty_payload())

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        state.validate(since)
        state.check_owner(self.descriptor.adapter_id, (self.strategy,))
        check_payload(state)

    def buffer_inputs(self, state: RuntimeState, messages: Sequence[Message]) -> RuntimeState:
        return buffered(state, messages)

    def settings(self) -> dict[str, Any]:
        return dict(self.request)

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        inputs = [*state.payload["pending"], *map(input_item, request.new_messages)]
        base: list[Item] = state.payload["items"]
        turns = state.accepted_turns
        compaction = None
        if request.compact:
            base, compaction = self.compacted(state)
            turns = ()
        sent = [*base, *inputs]
        try:
            reply = call_responses(self.client, {**self.request, "input": sent})
            text = self.accept(reply)
        except AttemptError as exc:  # the compaction's usage is billed with the failed attempt
            if compaction is not None:
                exc.usage = compaction.usage + (exc.usage or Usage())
            raise
        output = replayable(reply.items)
        provisional = committed(state, base, turns, inputs, output, reply.reasoning)
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
        assert reply.usage is not None
        return ModelTurnResult(
            response=ModelResponse(
                text=text,
                reasoning=reply.reasoning,
                finish_reason="completed",
                model=reply.model or self.model,
                response_id=reply.response_id,
            ),
            usage=reply.usage,
            provisional_state=provisional,
            request_record=RequestRecord(
                input_items=tuple(descriptor(i, item) for i, item in enumerate(sent)),
                settings=redact(self.settings(), self.opaque_fields),
            ),
            telemetry=telemetry,
            readable_request_messages=tuple(readable(item) for item in sent),
            compaction=compaction,
        )

    def compacted(self, state: RuntimeState) -> tuple[list[Item], NativeCompaction | None]:
        """The accepted items after a native compaction, and what it cost. Adapters without
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
