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

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic
from anthropic.resources.beta.messages import Messages

from satchel.providers.anthropic_state import (
    Block,
    NativeMessage,
    buffered,
    check_payload,
    committed,
    descriptor,
    empty_payload,
    readable,
    replayable,
    shown,
    split_inputs,
)
from satchel.providers.anthropic_wire import MessagesReply, call_messages
from satchel.providers.openai_sdk import check_settings, reply_error
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

DESCRIPTOR = AdapterDescriptor(
    adapter_id="anthropic.messages.v1",
    provider="anthropic",
    api_surface="messages",
    implementation_path="src/satchel/providers/anthropic_messages.py",
    version="1.0.0",
    strategies=("continuous_conversation",),
    review_status="unreviewed",
    compaction=("none", "native"),
)
SDK_REQUEST_KEYS = frozenset(inspect.signature(Messages.create).parameters) - {
    "self",
    "extra_headers",
    "extra_query",
    "timeout",
}
COMPACTION_BETA = "compact-2026-09-04"
THRESHOLD_BETA = "compact-2026-01-12"
# Settings that would move the conversation out of the adapter's hands, switch models, or make
# an answer something other than plain text.
OWNED_KEYS = (
    "messages",
    "system",
    "compaction",
    "tools",
    "tool_choice",
    "mcp_servers",
    "container",
    "thread",
    "fallbacks",
    "fallback_credit_token",
)
ACTION_ONLY = ("stop_sequences",)
THINKING_TYPES = frozenset({"adaptive", "enabled", "disabled"})
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_NOT_AN_ACTION = {
    "tool_use": "the model called a tool; this adapter accepts plain-text answers only",
    "pause_turn": "the answer was paused before it finished",
    "compaction": "the answer is a compaction, not an action",
}


def check_anthropic_request(
    request: object, strategy: str, compaction: str = "none"
) -> dict[str, Any]:
    """The profile rules of `anthropic.messages.v1`, refused naming the field."""
    if isinstance(request, Mapping):
        _refuse_threshold_compaction(request)
    settings = check_settings(
        request,
        api="Messages",
        sdk_keys=SDK_REQUEST_KEYS,
        owned=OWNED_KEYS,
        why_owned=f"{DESCRIPTOR.adapter_id} owns the conversation (the system prompt comes from "
        "the session), its compaction and the model, and answers in plain text",
        sdk="anthropic",
    )
    tokens = settings.get("max_tokens")
    if type(tokens) is not int or tokens <= 0:
        raise ConfigurationError(f"request.max_tokens: expected a positive integer, got {tokens!r}")
    if "stream" in settings and not isinstance(settings["stream"], bool):
        raise ConfigurationError("request.stream: expected true or false")
    stops = settings.get("stop_sequences", [])
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise ConfigurationError("request.stop_sequences: expected a list of non-empty strings")
    _check_betas(settings.get("betas", []), compaction)
    _check_thinking(settings.get("thinking"))
    _check_cache_control(settings.get("cache_control"))
    if "output_config" in settings and not isinstance(settings["output_config"], Mapping):
        raise ConfigurationError("request.output_config: expected a mapping")
    return settings


def _refuse_threshold_compaction(request: Mapping[str, Any]) -> None:
    extra = request.get("extra_body")
    for where, settings in (("request", request), ("request.extra_body", extra)):
        if isinstance(settings, Mapping) and "context_management" in settings:
            raise ConfigurationError(
                f"{where}.context_management: threshold compaction and context edits are "
                "refused (they would summarize or drop history inside an action request, the "
                "newest frame included); choose runtime.compaction.strategy: native"
            )
    found = _key_path(request, "pause_after_compaction")
    if found is not None:
        raise ConfigurationError(
            f"{found}: refused; pausing after a compaction would not protect the newest frame "
            "(native compaction runs as its own request)"
        )


def _key_path(value: object, key: str, where: str = "request") -> str | None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            path = f"{where}.{name}"
            if name == key:
                return path
            if (found := _key_path(item, key, path)) is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _key_path(item, key, f"{where}[{index}]")) is not None:
                return found
    return None


def _check_betas(betas: object, compaction: str) -> None:
    if not isinstance(betas, list) or not all(isinstance(b, str) and b for b in betas):
        raise ConfigurationError("request.betas: expected a list of beta names")
    if THRESHOLD_BETA in betas:
        raise ConfigurationError(
            f"request.betas: {THRESHOLD_BETA} is the threshold-compaction beta, refused; native "
            f"on-demand compaction uses {COMPACTION_BETA}"
        )
    if compaction == "native" and COMPACTION_BETA not in betas:
        raise ConfigurationError(
            f"request.betas: native compaction needs {COMPACTION_BETA!r} (sent on every request, "
            "so the signed summary is accepted back)"
        )


def _check_thinking(thinking: object) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, Mapping) or thinking.get("type") not in THINKING_TYPES:
        raise ConfigurationError(
            "request.thinking: expected {type: adaptive | enabled | disabled, ...}"
        )
    if thinking["type"] == "disabled" and "display" in thinking:
        raise ConfigurationError("request.thinking.display: not with thinking disabled")
    if thinking.get("display", "summarized") not in ("summarized", "omitted"):
        raise ConfigurationError("request.thinking.display: expected summarized or omitted")


def _check_cache_control(cache: object) -> None:
    if cache is None:
        return
    if (
        not isinstance(cache, Mapping)
        or cache.get("type") != "ephemeral"
        or not set(cache) <= {"type", "ttl"}
        or cache.get("ttl", "5m") not in ("5m", "1h")
    ):
        raise ConfigurationError(
            "request.cache_control: expected {type: ephemeral} with an optional ttl of 5m or 1h"
        )


class AnthropicMessagesAdapter:
    """Continuous conversation over Anthropic Messages; see the module docstring."""

    descriptor = DESCRIPTOR
    strategy = "continuous_conversation"
    opaque_fields: frozenset[str] = frozenset()

    def __init__(
        self,
        client: anthropic.Anthropic,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.request = check_anthropic_request(request, self.strategy)
        self.model = str(self.request["model"])
        self.summary_max_tokens = summary_max_tokens or int(self.request["max_tokens"])
        self.stop_sequences = frozenset(self.request.get("stop_sequences", ()))

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
        system, users = self._inputs(state, request.new_messages)
        inputs = [*state.payload["pending"], *users]
        base: list[NativeMessage] = state.payload["messages"]
        turns = state.accepted_turns
        compaction = None
        if request.compact:
            base, compaction = self.compacted(state, system)
            turns = ()
        sent = [*base, *inputs]
        try:
            reply = call_messages(self.client, self._body(self.request, system, sent))
            text = self.accept(reply)
        except AttemptError as exc:  # the compaction's usage is billed with the failed attempt
            if compaction is not None:
                exc.usage = compaction.usage + (exc.usage or Usage())
            raise
        assert reply.usage is not None
        blocks = replayable(reply.blocks)
        provisional = committed(state, system, base, turns, inputs, blocks, reply.reasoning)
        return ModelTurnResult(
            response=ModelResponse(
                text=text,
                reasoning=reply.reasoning,
                finish_reason=str(reply.stop_reason),
                model=reply.model or self.model,
                response_id=reply.message_id,
            ),
            usage=reply.usage,
            provisional_state=provisional,
            request_record=RequestRecord(
                input_items=tuple(descriptor(i, message) for i, message in enumerate(sent)),
                settings=redact(self.settings(), self.opaque_fields),
            ),
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                compaction_items_returned=int(compaction is not None),
                history_before=len(state.payload["messages"]),
                history_after=len(provisional.payload["messages"]),
            ),
            readable_request_messages=(*shown(base, turns), *map(readable, inputs)),
            compaction=compaction,
        )

    def _inputs(
        self, state: RuntimeState, messages: Sequence[Message]
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
    ) -> tuple[list[NativeMessage], NativeCompaction | None]:
        """The accepted history replaced by one signed compaction block, and what it cost; the
        history unchanged (no compaction) when nothing has been accepted yet."""
        history: list[NativeMessage] = state.payload["messages"]
        if not state.accepted_turns:
            return history, None
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
        return [summary], NativeCompaction(reply.usage, record)

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
