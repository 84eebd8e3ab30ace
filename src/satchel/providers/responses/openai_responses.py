"""`openai.responses.v1`: OpenAI Responses, as continuous conversation or by response handle.

`continuous_conversation` (`store: false`) replays each accepted user input and every native
output item, encrypted reasoning included; the provider compacts inline when the request sets
`context_management`, and the latest compaction item then carries everything before it. Profiles
that choose `harness_summary` instead get the summary capability (unwind, rebuild with the exact
native items of the unwound tail). `previous_response_id` keeps only the latest accepted response's
id and the inputs waiting for the next call: the provider keeps the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.spec import INLINE_COMPACTION
from satchel.providers.kit.unwinding import rebuilt, unwind_latest
from satchel.providers.responses.adapter import ResponsesAdapter
from satchel.providers.responses.settings import OpenAIResponsesSettings
from satchel.providers.responses.state import input_item
from satchel.providers.responses.wire import call_responses
from satchel.turns import (
    AdapterDescriptor,
    InvalidResponseError,
    ModelTurnRequest,
    ModelTurnResult,
    NeutralMessage,
    RuntimeState,
    StateError,
    SummaryReply,
    TransitionTelemetry,
    UnwoundTurn,
)

DESCRIPTOR = AdapterDescriptor(
    adapter_id="openai.responses.v1",
    provider="openai",
    api_surface="responses",
    implementation_path="src/satchel/providers/responses/openai_responses.py",
    version="1.0.0",
    strategies=("continuous_conversation", "previous_response_id"),
    review_status="provider_reference",
    compaction=("none", "harness_summary", INLINE_COMPACTION),
)


class OpenAIResponsesAdapter(ResponsesAdapter):
    """Continuous conversation over OpenAI Responses, with the harness-summary capability."""

    descriptor = DESCRIPTOR
    request_settings = OpenAIResponsesSettings

    def __init__(
        self,
        client: openai.OpenAI,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        super().__init__(client, request)
        self.summary_max_tokens = summary_max_tokens

    def native_items(self, state: RuntimeState) -> int:
        return len(state.payload["items"])

    def summarize(self, state: RuntimeState, prompt: str) -> SummaryReply:
        items = [*state.payload["items"], input_item({"role": "user", "content": prompt})]
        body: dict[str, Any] = {**self.request, "input": items}
        if self.summary_max_tokens is not None:
            body["max_output_tokens"] = self.summary_max_tokens
        reply = call_responses(self.client, body)
        if reply.usage is None:
            raise reply_error(InvalidResponseError, "the summary answer reported no usage", reply)
        text = reply.text.strip()
        complete = reply.status == "completed" and reply.refusal is None and bool(text)
        return SummaryReply(text, reply.usage, complete)

    def unwind_latest_turn(self, state: RuntimeState) -> tuple[RuntimeState, UnwoundTurn]:
        return unwind_latest(state, "items")

    def rebuild(
        self, state: RuntimeState, bridge: str, tail: Sequence[UnwoundTurn]
    ) -> RuntimeState:
        return rebuilt(state, "items", input_item({"role": "user", "content": bridge}), tail)


class OpenAIResponseHandleAdapter(ResponsesAdapter):
    """`previous_response_id`: the provider keeps the conversation; the state is the latest
    accepted response's id and the inputs waiting for the next call. A retry sends the same
    handle, so no attempt's response is ever chained to."""

    descriptor = DESCRIPTOR
    strategy = "previous_response_id"
    request_settings = OpenAIResponsesSettings

    def initial_state(self) -> RuntimeState:
        return RuntimeState(self.descriptor.adapter_id, self.strategy, _handle(None, []))

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        state.validate(since)
        state.check_owner(self.descriptor.adapter_id, (self.strategy,))
        payload = state.payload
        if sorted(payload) != ["pending", "response_id"]:
            raise StateError("RuntimeState.payload: expected keys pending, response_id")
        if payload["response_id"] is not None and not isinstance(payload["response_id"], str):
            raise StateError("RuntimeState.payload.response_id: expected a response id or null")
        if not isinstance(payload["pending"], list):
            raise StateError("RuntimeState.payload.pending: expected a list")
        if state.accepted_turns:
            raise StateError("RuntimeState.accepted_turns: the provider holds the turns")

    def buffer_inputs(
        self, state: RuntimeState, messages: Sequence[NeutralMessage]
    ) -> RuntimeState:
        pending = [*state.payload["pending"], *map(input_item, messages)]
        payload = _handle(state.payload["response_id"], pending)
        return RuntimeState(state.adapter_id, state.strategy, payload)

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        handle = state.payload["response_id"]
        sent = [*state.payload["pending"], *map(input_item, request.new_messages)]
        body: dict[str, Any] = {**self.request, "input": sent}
        if handle is not None:
            body["previous_response_id"] = handle
        reply = call_responses(self.client, body)
        text = self.accept(reply)
        if not reply.response_id:
            raise reply_error(InvalidResponseError, "the response has no id to chain to", reply)
        provisional = RuntimeState(state.adapter_id, state.strategy, _handle(reply.response_id, []))
        return self.result(
            reply, text, provisional, sent, TransitionTelemetry(items_sent=len(sent))
        )


def _handle(response_id: str | None, pending: list[dict[str, Any]]) -> dict[str, Any]:
    return {"response_id": response_id, "pending": pending}
