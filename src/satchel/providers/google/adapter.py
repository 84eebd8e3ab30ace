"""`google.interactions.v1`: the Gemini Interactions API as a continuous conversation held in
memory (`store: false`), with the harness-summary capability.

Each request sends the session's system instruction apart, then the accepted steps (each user
input, and every step the model generated in an accepted interaction exactly as returned: thought
steps with their opaque signature and readable summary, model output steps, unknown fields), then
the buffered inputs and the turn's new ones, as `input`. Only a `completed` interaction whose
steps are thoughts and text output can supply an action; `requires_continuation`, `incomplete`,
`failed`, `cancelled` or any other status, a tool step, an unsigned thought or an unfinished
stream go to the retry policy, and the accepted state stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google import genai

from satchel.providers.google.settings import InteractionsSettings
from satchel.providers.google.state import (
    InteractionsState,
    Step,
    split_inputs,
    user_step,
)
from satchel.providers.google.wire import InteractionReply, call_interactions, failed_error
from satchel.providers.kit.adapter import AdapterBase
from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.result import turn_result
from satchel.providers.kit.state import History
from satchel.providers.kit.unwinding import rebuilt, unwind_latest
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    InvalidResponseError,
    ModelTurnRequest,
    ModelTurnResult,
    NeutralMessage,
    RuntimeState,
    SummaryReply,
    TransitionTelemetry,
    TruncatedError,
    UnwoundTurn,
)

DESCRIPTOR = AdapterDescriptor(
    adapter_id="google.interactions.v1",
    provider="google",
    api_surface="interactions",
    implementation_path="src/satchel/providers/google/adapter.py",
    version="1.0.0",
    strategies=("continuous_conversation",),
    review_status="unreviewed",
    compaction=("none", "harness_summary"),
)
# Statuses that mean the answer stopped before it was whole.
_CUT_SHORT = {
    "requires_continuation": "the answer stopped at the decode limit (requires_continuation)",
    "incomplete": "the answer is incomplete (the output limit)",
    "budget_exceeded": "the answer ran out of its budget",
}
_ANSWER_STEPS = frozenset({"thought", "model_output"})


class GoogleInteractionsAdapter(AdapterBase):
    """Continuous conversation over Gemini Interactions; see the module docstring."""

    descriptor = DESCRIPTOR
    strategy = "continuous_conversation"
    handling = InteractionsState()

    def __init__(
        self,
        client: genai.Client,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.request = InteractionsSettings.check(request, DESCRIPTOR.adapter_id, self.strategy)
        self.model = str(self.request["model"])
        self.summary_max_tokens = summary_max_tokens

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        if request.compact:
            raise ConfigurationError(f"{self.descriptor.adapter_id} has no native compaction")
        system, users = self._inputs(state, request.new_messages)
        inputs = [*state.payload["pending"], *users]
        sent = [*state.payload["steps"], *inputs]
        reply = call_interactions(self.client, self._body(self.request, system, sent))
        text = self.accept(reply)
        history = History(state.payload["steps"], state.accepted_turns)
        provisional = self.handling.committed(
            state, history, inputs, reply.steps, reply.reasoning, system
        )
        return turn_result(
            self,
            text=text,
            reasoning=reply.reasoning,
            finish_reason="completed",
            model=reply.model,
            response_id=reply.interaction_id,
            usage=reply.usage,
            provisional=provisional,
            sent=sent,
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                history_before=len(state.payload["steps"]),
                history_after=len(provisional.payload["steps"]),
            ),
        )

    def _inputs(
        self, state: RuntimeState, messages: Sequence[NeutralMessage]
    ) -> tuple[str | None, list[Step]]:
        """The session's system instruction (fixed by its first turn) and this turn's steps."""
        system, users = split_inputs(messages, "new_messages")
        fixed = state.payload["system"]
        if system is None:
            return fixed, users
        if (state.payload["steps"] or fixed is not None) and system != fixed:
            raise ConfigurationError(
                "new_messages: the system prompt cannot change during a session"
            )
        return system, users

    def _body(
        self, settings: Mapping[str, Any], system: str | None, steps: list[Step]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {**settings, "store": False, "input": steps}
        if system is not None:
            body["system_instruction"] = system
        return body

    def accept(self, reply: InteractionReply) -> str:
        """Return the answer text of a completed interaction, or raise the error it deserves."""
        if reply.usage is None:
            raise reply_error(
                InvalidResponseError,
                "the provider reported no usage; every request must be accounted for",
                reply,
            )
        status = reply.status
        if status == "failed":
            raise failed_error(reply)
        if status in _CUT_SHORT:
            raise reply_error(TruncatedError, _CUT_SHORT[status], reply, error_type=status)
        if status != "completed":
            raise reply_error(
                InvalidResponseError,
                f"the interaction did not complete ({status})",
                reply,
                error_type=status,
            )
        self._check_steps(reply)
        text = reply.text
        if not text.strip():
            raise reply_error(InvalidResponseError, "the answer is empty", reply)
        return text

    def _check_steps(self, reply: InteractionReply) -> None:
        if reply.unreadable:
            raise reply_error(
                InvalidResponseError,
                "the stream carried deltas this adapter cannot replay exactly",
                reply,
            )
        for step in reply.steps:
            kind = step.get("type")
            if kind not in _ANSWER_STEPS:
                raise reply_error(
                    InvalidResponseError,
                    f"the model answered with a {kind} step; this adapter accepts plain-text "
                    "answers only",
                    reply,
                )
            if kind == "thought" and not step.get("signature"):
                raise reply_error(
                    InvalidResponseError,
                    "a thought came back without its signature, so it cannot be replayed",
                    reply,
                )
            if kind == "model_output" and (
                step.get("error")
                or any(part.get("type") != "text" for part in step.get("content") or ())
            ):
                raise reply_error(
                    InvalidResponseError, "a model output step is not plain text", reply
                )

    # The harness-summary capability.

    def native_items(self, state: RuntimeState) -> int:
        return len(state.payload["steps"])

    def summarize(self, state: RuntimeState, prompt: str) -> SummaryReply:
        steps = [*state.payload["steps"], user_step({"role": "user", "content": prompt}, "prompt")]
        settings = dict(self.request)
        if self.summary_max_tokens is not None:
            config = dict(settings["generation_config"])
            config["max_output_tokens"] = self.summary_max_tokens
            settings["generation_config"] = config
        reply = call_interactions(self.client, self._body(settings, state.payload["system"], steps))
        if reply.usage is None:
            raise reply_error(InvalidResponseError, "the summary answer reported no usage", reply)
        text = reply.text.strip()
        complete = (
            reply.status == "completed"
            and not reply.unreadable
            and all(step.get("type") in _ANSWER_STEPS for step in reply.steps)
            and bool(text)
        )
        return SummaryReply(text, reply.usage, complete)

    def unwind_latest_turn(self, state: RuntimeState) -> tuple[RuntimeState, UnwoundTurn]:
        return unwind_latest(state, "steps")

    def rebuild(
        self, state: RuntimeState, bridge: str, tail: Sequence[UnwoundTurn]
    ) -> RuntimeState:
        return rebuilt(
            state, "steps", user_step({"role": "user", "content": bridge}, "bridge"), tail
        )
