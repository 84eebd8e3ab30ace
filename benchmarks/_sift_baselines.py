"""Baseline context strategies for the sift benchmark, each held to the trace's ceiling on the
whole request: tool definitions, messages and the longest note reserved.

- `SlidingWindow`: the system prompt and task, then the newest whole steps that fit (reference).
- `HysteresisWindow`: when the history after the task passes the room, drop the oldest whole
  steps down to half the room and hold that start until the room is passed again.
- `ToolResultClearing`: Anthropic's server-side `clear_tool_uses_20250919` over the sent history.
- `LangChainClearing`: LangChain's `ClearToolUsesEdit`, applied as `ContextEditingMiddleware`
  applies it on every model call.

The clearing strategies fall back to the hysteresis window when clearing alone cannot hold the
ceiling (tool inputs and assistant text keep growing); `fallbacks` counts the calls that moved it.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from math import ceil
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

from satchel.sift import ChatMessage, ContextSift, SiftSettings, estimate_tokens
from satchel.sift.langchain import LangChainSift, to_openai_message

PLACEHOLDER = "[cleared]"
"""What a cleared tool result says (LangChain's default placeholder)."""
HEAD = 2
"""The system prompt and the task: always sent."""


def tool_tokens(tools: Sequence[Mapping[str, Any]]) -> int:
    """Tool definitions by the sift's estimate: compact sorted JSON over 3.5."""
    text = json.dumps(tools, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return ceil(len(text) / 3.5) if tools else 0


class Sizes:
    """`estimate_tokens` per message object, remembered (messages never change)."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[ChatMessage, int]] = {}

    def __call__(self, message: ChatMessage) -> int:
        hit = self._known.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = estimate_tokens(message)
        self._known[id(message)] = (message, size)
        return size


def note_message(note: str | None) -> list[ChatMessage]:
    """The per-call note as the message every strategy appends last."""
    return [{"role": "user", "content": note}] if note else []


class Windowed:
    """A strategy over an append-only history: the head, then the history from a held start
    (a step boundary), each message possibly edited; subclasses define the edit."""

    name = "window"
    key = "window"
    hysteresis = True

    def __init__(self, tools: Sequence[Mapping[str, Any]], ceiling: int, note_reserve: int) -> None:
        self.tools = list(tools)
        self.tool_tokens = tool_tokens(self.tools)
        self.room = ceiling - self.tool_tokens - note_reserve
        """Tokens for the messages, note aside."""
        self.size = Sizes()
        self.start = HEAD
        self.fallbacks = 0
        """Calls on which the start moved."""
        self._prefix = [0]
        """Tokens of `history[:i]`, unedited."""

    def edited(self, history: Sequence[ChatMessage], start: int) -> list[ChatMessage]:
        """The head and `history[start:]` as sent (after any edit)."""
        return list(history[:HEAD]) + list(history[start:])

    def modelled(self, history: Sequence[ChatMessage], start: int) -> int:
        """Tokens of `edited(history, start)`, computed cheaply for the start search."""
        prefix = self._prefix
        return prefix[HEAD] + prefix[len(history)] - prefix[start]

    def __call__(self, history: Sequence[ChatMessage], note: str | None) -> list[ChatMessage]:
        while len(self._prefix) <= len(history):
            self._prefix.append(self._prefix[-1] + self.size(history[len(self._prefix) - 1]))
        sent = self.edited(history, self.start)
        size = sum(self.size(message) for message in sent)
        if size > self.room or not self.hysteresis:
            start = self._new_start(history)
            if start != self.start:
                self.fallbacks += self.hysteresis
                self.start = start
                sent = self.edited(history, start)
        return sent + note_message(note)

    def _new_start(self, history: Sequence[ChatMessage]) -> int:
        """The earliest step boundary whose request fits the target (half the room after the
        head with hysteresis, else the room); failing that the whole room; failing that the last
        boundary."""
        head = sum(self.size(message) for message in history[:HEAD])
        full = self.room
        target = head + (self.room - head) // 2 if self.hysteresis else full
        boundaries = [
            index
            for index in range(max(self.start, HEAD), len(history))
            if history[index].get("role") != "tool"
        ]
        for goal in (target, full):
            for index in boundaries:
                if self.modelled(history, index) <= goal:
                    return index
        return boundaries[-1] if boundaries else self.start


class SlidingWindow(Windowed):
    """The newest whole steps that fit the room, recomputed every call (no hysteresis)."""

    name = "sliding window (reference)"
    key = "sliding_plain"
    hysteresis = False

    def __call__(self, history: Sequence[ChatMessage], note: str | None) -> list[ChatMessage]:
        self.start = HEAD
        return super().__call__(history, note)


class HysteresisWindow(Windowed):
    """Drops the oldest whole steps down to half the room; holds the start until it overflows."""

    name = "sliding window, hysteresis"
    key = "sliding_hysteresis"


class ClearingParameters:
    """`clear_tool_uses` settings: clear when the request passes `trigger` tokens, keep the
    `keep` newest tool results, clear at least `clear_at_least` tokens."""

    def __init__(self, trigger: int, keep: int, clear_at_least: int) -> None:
        self.trigger = trigger
        self.keep = keep
        self.clear_at_least = clear_at_least

    def describe(self) -> str:
        return f"trigger {self.trigger:,}, keep {self.keep}, clear_at_least {self.clear_at_least:,}"


class ToolResultClearing(Windowed):
    """Anthropic's server-side `clear_tool_uses_20250919`, over the history the client sends.

    While the sent request (tools and messages, cleared results as placeholders) passes
    `trigger` tokens, one activation clears the oldest uncleared tool results, never the `keep`
    newest, until it has freed at least `clear_at_least` tokens; when it cannot free that much it
    clears nothing. Cleared results stay cleared: the client keeps sending its full history, so
    the server clears the same ones again, and the request only changes where a new activation
    clears. (This is the cache-friendliest reading of the documented parameters.)
    """

    name = "tool-result clearing (Anthropic)"
    key = "tool_clearing"

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        ceiling: int,
        note_reserve: int,
        parameters: ClearingParameters,
    ) -> None:
        super().__init__(tools, ceiling, note_reserve)
        self.parameters = parameters
        self._placeholders: dict[str, ChatMessage] = {}
        self.cleared: set[str] = set()
        """Call ids whose results are cleared for good."""
        self.activations = 0

    def placeholder(self, result: ChatMessage) -> ChatMessage:
        """The cleared form of a tool result (one object per call, so its bytes are stable)."""
        call_id = str(result.get("tool_call_id"))
        if call_id not in self._placeholders:
            self._placeholders[call_id] = {
                "role": "tool",
                "tool_call_id": call_id,
                "content": PLACEHOLDER,
            }
        return self._placeholders[call_id]

    def plan(self, sent: Sequence[ChatMessage]) -> tuple[set[str], int]:
        """The call ids cleared in the sent request (the sticky ones and new activations) and
        how many activations that took."""
        parameters = self.parameters
        cleared = set(self.cleared)
        results = [index for index, message in enumerate(sent) if message.get("role") == "tool"]
        older = results[: max(0, len(results) - parameters.keep)]

        def call_id(index: int) -> str:
            return str(sent[index].get("tool_call_id"))

        def saving(index: int) -> int:
            return self.size(sent[index]) - self.size(self.placeholder(sent[index]))

        total = self.tool_tokens + sum(self.size(message) for message in sent)
        total -= sum(saving(index) for index in older if call_id(index) in cleared)
        activations = 0
        while total > parameters.trigger:
            freed = 0
            batch: list[str] = []
            for index in older:
                if call_id(index) in cleared:
                    continue
                freed += saving(index)
                batch.append(call_id(index))
                if freed >= parameters.clear_at_least:
                    break
            if not batch or freed < parameters.clear_at_least:
                break
            cleared.update(batch)
            total -= freed
            activations += 1
        return cleared, activations

    def edited(self, history: Sequence[ChatMessage], start: int) -> list[ChatMessage]:
        sent = super().edited(history, start)
        cleared, _ = self.plan(sent)
        return [
            self.placeholder(message)
            if message.get("role") == "tool" and message.get("tool_call_id") in cleared
            else message
            for message in sent
        ]

    def modelled(self, history: Sequence[ChatMessage], start: int) -> int:
        return sum(self.size(message) for message in self.edited(history, start))

    def __call__(self, history: Sequence[ChatMessage], note: str | None) -> list[ChatMessage]:
        sent = super().__call__(history, note)
        _, activations = self.plan(list(history[:HEAD]) + list(history[self.start :]))
        self.activations += activations
        self.cleared.update(
            str(message.get("tool_call_id"))
            for message in sent
            if message.get("role") == "tool" and message.get("content") == PLACEHOLDER
        )
        return sent


class LangChainClearing(Windowed):
    """LangChain's `ClearToolUsesEdit`, as `ContextEditingMiddleware.wrap_model_call` runs it on
    every model request: on a copy of the full message list (here: the head and the history from
    the held start), counting tokens with the sift's estimate plus the tool definitions.

    Unlike the server-side edit, it stops clearing as soon as it has freed `clear_at_least`
    tokens, and clears what it can when it cannot free that much.
    """

    name = "LangChain ContextEditingMiddleware"
    key = "langchain_clearing"

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        ceiling: int,
        note_reserve: int,
        parameters: ClearingParameters,
    ) -> None:
        from langchain.agents.middleware import ClearToolUsesEdit

        super().__init__(tools, ceiling, note_reserve)
        self.parameters = parameters
        self.edit = ClearToolUsesEdit(
            trigger=parameters.trigger,
            keep=parameters.keep,
            clear_at_least=parameters.clear_at_least,
        )
        self.converter = LangChainSift(ContextSift(SiftSettings(budget=ceiling)))
        self.messages: list[BaseMessage] = []
        self._lc_sizes: dict[int, tuple[BaseMessage, int]] = {}
        self.activations = 0

    def count_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """The middleware's `token_counter`: the sift's estimate, tool definitions included."""
        total = self.tool_tokens
        for message in messages:
            hit = self._lc_sizes.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, estimate_tokens(to_openai_message(message, 0)))
                self._lc_sizes[id(message)] = hit
            total += hit[1]
        return total

    def _grow(self, history: Sequence[ChatMessage]) -> None:
        """Convert the new history messages to LangChain messages, as `TrimMessages` did."""
        while len(self.messages) < len(history):
            message = dict(history[len(self.messages)])
            if message["role"] == "assistant":
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "args": json.loads(call["function"]["arguments"]),
                    }
                    for call in message.get("tool_calls", [])
                ]
            self.messages.extend(convert_to_messages([message]))

    def edited(self, history: Sequence[ChatMessage], start: int) -> list[ChatMessage]:
        self._grow(history)
        # wrap_model_call deep-copies the list; apply only assigns into it, so a list copy is the
        # same and spares copying every message.
        messages: list[Any] = self.messages[:HEAD] + self.messages[start : len(history)]
        self.edit.apply(messages, count_tokens=self.count_tokens)
        return self.converter.to_openai(messages)

    def modelled(self, history: Sequence[ChatMessage], start: int) -> int:
        """The edit's outcome without running it: clear the oldest results but the `keep` newest
        until `clear_at_least` is freed."""
        parameters = self.parameters
        sent = list(history[:HEAD]) + list(history[start:])
        sizes = [self.size(message) for message in sent]
        total = sum(sizes)
        if self.tool_tokens + total <= parameters.trigger:
            return total
        results = [index for index, message in enumerate(sent) if message.get("role") == "tool"]
        freed = 0
        cleared = estimate_tokens({"role": "tool", "content": PLACEHOLDER})
        for index in results[: max(0, len(results) - parameters.keep)]:
            freed += sizes[index] - cleared
            if parameters.clear_at_least > 0 and freed >= parameters.clear_at_least:
                break
        return total - freed

    def __call__(self, history: Sequence[ChatMessage], note: str | None) -> list[ChatMessage]:
        sent = super().__call__(history, note)
        measured = sum(self.size(message) for message in sent[: len(sent) - int(bool(note))])
        assert measured == self.modelled(history, self.start), "the edit's model is off"
        self.activations += any(message.get("content") == PLACEHOLDER for message in sent)
        return sent


def cleared_tool_messages(messages: Sequence[ChatMessage]) -> int:
    """How many tool results of a request were cleared."""
    return sum(
        1
        for message in messages
        if message.get("role") == "tool" and message.get("content") == PLACEHOLDER
    )


def langchain_available() -> str | None:
    """None when LangChain's context-editing middleware imports, else why not."""
    try:
        from langchain.agents.middleware import (  # noqa: F401
            ClearToolUsesEdit,
            ContextEditingMiddleware,
        )
    except ImportError as exc:
        return str(exc)
    return None


Strategy = Callable[[Sequence[ChatMessage], str | None], list[ChatMessage]]
