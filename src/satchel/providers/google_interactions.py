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
from typing import TYPE_CHECKING, Any

from google import genai
from google.genai import types as genai_types
from google.genai._gaos.types.interactions import CreateModelInteraction

from satchel.providers.google_state import (
    Step,
    buffered,
    check_payload,
    committed,
    descriptor,
    empty_payload,
    readable,
    split_inputs,
    user_step,
)
from satchel.providers.google_wire import InteractionReply, call_interactions, failed_error
from satchel.providers.openai_sdk import check_settings, reply_error
from satchel.providers.unwinding import rebuilt, unwind_latest
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    InvalidResponseError,
    Message,
    ModelResponse,
    ModelTurnRequest,
    ModelTurnResult,
    RequestRecord,
    RuntimeState,
    SummaryReply,
    TransitionTelemetry,
    TruncatedError,
    UnwoundTurn,
    redact,
)

if TYPE_CHECKING:
    from satchel.providers.profiles import Profile

DESCRIPTOR = AdapterDescriptor(
    adapter_id="google.interactions.v1",
    provider="google",
    api_surface="interactions",
    implementation_path="src/satchel/providers/google_interactions.py",
    version="1.0.0",
    strategies=("continuous_conversation",),
    review_status="unreviewed",
    compaction=("none", "harness_summary"),
)
SDK_REQUEST_KEYS = frozenset(
    field.alias or name for name, field in CreateModelInteraction.model_fields.items()
) | {"extra_body"}
# Settings that would move the conversation's state out of the adapter's hands (the input, the
# system instruction from the session, server-side history and continuation), or make an
# answer something other than plain text.
OWNED_KEYS = (
    "input",
    "system_instruction",
    "previous_interaction_id",
    "background",
    "continuation_token",
    "tools",
    "environment",
    "webhook_config",
)
# Statuses that mean the answer stopped before it was whole.
_CUT_SHORT = {
    "requires_continuation": "the answer stopped at the decode limit (requires_continuation)",
    "incomplete": "the answer is incomplete (the output limit)",
    "budget_exceeded": "the answer ran out of its budget",
}
_ANSWER_STEPS = frozenset({"thought", "model_output"})


def check_google_request(
    request: object, strategy: str, compaction: str = "none"
) -> dict[str, Any]:
    """The profile rules of `google.interactions.v1`, refused naming the field."""
    settings = check_settings(
        request,
        api="Interactions",
        sdk_keys=SDK_REQUEST_KEYS,
        owned=OWNED_KEYS,
        why_owned=f"{DESCRIPTOR.adapter_id} owns the conversation's input and state (the system "
        "instruction comes from the session, the provider keeps nothing), and answers in plain "
        "text",
        sdk="google-genai",
    )
    if settings.get("store", False) is not False:
        raise ConfigurationError(
            "request.store: continuous_conversation needs store: false (the adapter carries the "
            "conversation, the provider keeps nothing)"
        )
    if "stream" in settings and not isinstance(settings["stream"], bool):
        raise ConfigurationError("request.stream: expected true or false")
    config = settings.get("generation_config")
    if not isinstance(config, Mapping):
        raise ConfigurationError(
            "request.generation_config: expected a mapping with thinking_summaries: auto"
        )
    if config.get("thinking_summaries") != "auto":
        raise ConfigurationError(
            "request.generation_config.thinking_summaries: continuous_conversation needs auto, "
            f"got {config.get('thinking_summaries')!r}"
        )
    return settings


def build_client(profile: Profile, http_client: Any, api_key: str) -> genai.Client:
    """The SDK client of a profile: its base URL, timeout and retries; `http_client` (an
    `httpx.Client`) replaces the SDK's own transport when given."""
    options = genai_types.HttpOptions(
        base_url=profile.client.base_url,
        timeout=round(profile.client.timeout_s * 1000) if profile.client.timeout_s else None,
        retry_options=genai_types.HttpRetryOptions(attempts=profile.client.max_retries + 1),
        httpx_client=http_client,
    )
    return genai.Client(api_key=api_key, http_options=options)


def build_google_interactions(profile: Profile, http_client: Any, api_key: str) -> Any:
    """The registry's factory of `google.interactions.v1`."""
    return GoogleInteractionsAdapter(
        build_client(profile, http_client, api_key),
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


class GoogleInteractionsAdapter:
    """Continuous conversation over Gemini Interactions; see the module docstring."""

    descriptor = DESCRIPTOR
    strategy = "continuous_conversation"
    opaque_fields: frozenset[str] = frozenset()

    def __init__(
        self,
        client: genai.Client,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.request = check_google_request(request, self.strategy)
        self.model = str(self.request["model"])
        self.summary_max_tokens = summary_max_tokens

    @classmethod
    def validate_request(
        cls, request: object, strategy: str, compaction: str = "none"
    ) -> dict[str, Any]:
        return check_google_request(request, strategy, compaction)

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
        if request.compact:
            raise ConfigurationError(f"{self.descriptor.adapter_id} has no native compaction")
        system, users = self._inputs(state, request.new_messages)
        inputs = [*state.payload["pending"], *users]
        sent = [*state.payload["steps"], *inputs]
        reply = call_interactions(self.client, self._body(self.request, system, sent))
        text = self.accept(reply)
        assert reply.usage is not None
        provisional = committed(state, system, inputs, reply.steps, reply.reasoning)
        return ModelTurnResult(
            response=ModelResponse(
                text=text,
                reasoning=reply.reasoning,
                finish_reason="completed",
                model=reply.model or self.model,
                response_id=reply.interaction_id,
            ),
            usage=reply.usage,
            provisional_state=provisional,
            request_record=RequestRecord(
                input_items=tuple(descriptor(i, step) for i, step in enumerate(sent)),
                settings=redact(self.settings(), self.opaque_fields),
            ),
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                history_before=len(state.payload["steps"]),
                history_after=len(provisional.payload["steps"]),
            ),
            readable_request_messages=tuple(readable(step) for step in sent),
        )

    def _inputs(
        self, state: RuntimeState, messages: Sequence[Message]
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
