"""The Interactions payload of a continuous conversation: native steps and buffered inputs.

`payload["steps"]` holds every accepted user input as a `user_input` step and every step the
model generated in an accepted interaction, exactly as returned (thought steps with their opaque
`signature` and readable `summary`, model output steps, unknown fields kept), in the order the
next request sends them; accepted-turn boundaries index into it. `payload["pending"]` holds the
user input steps buffered since the last accepted turn. `payload["system"]` is the session's
system instruction, fixed by its first turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.providers.kit.state import History
from satchel.providers.kit.unwinding import check_boundaries
from satchel.turns import ConfigurationError, NeutralMessage, RuntimeState, StateError, TurnBoundary

Step = dict[str, Any]
PAYLOAD_KEYS = ("pending", "steps", "system")
USER_INPUT = "user_input"


def user_step(message: NeutralMessage, where: str) -> Step:
    """A normalized user message as a `user_input` step of text content."""
    content = message["content"]
    if isinstance(content, str):
        return {"type": USER_INPUT, "content": [{"type": "text", "text": content}]}
    parts = []
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise ConfigurationError(
                f"{where}.content[{index}]: google.interactions.v1 sends text parts only"
            )
        parts.append({"type": "text", "text": str(part.get("text", ""))})
    return {"type": USER_INPUT, "content": parts}


def split_inputs(messages: Sequence[NeutralMessage], where: str) -> tuple[str | None, list[Step]]:
    """The system instruction among `messages` (None when there is none) and the user steps."""
    system = None
    users = []
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "system":
            text = message["content"]
            if not isinstance(text, str):
                raise ConfigurationError(f"{where}[{index}].content: a system prompt is text")
            system = text if system is None else f"{system}\n\n{text}"
        elif role == "user":
            users.append(user_step(message, f"{where}[{index}]"))
        else:
            raise ConfigurationError(
                f"{where}[{index}].role: expected system or user, got {role!r}"
            )
    return system, users


class InteractionsState:
    """The Interactions state handling of a continuous conversation."""

    def empty_payload(self) -> dict[str, Any]:
        return {"system": None, "steps": [], "pending": []}

    def check_payload(self, state: RuntimeState) -> None:
        """Validate an Interactions payload and that boundaries fit inside its steps."""
        payload = state.payload
        keys = sorted(payload)
        if keys != list(PAYLOAD_KEYS):
            raise StateError(
                f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, "
                f"got {', '.join(keys)}"
            )
        if payload["system"] is not None and not isinstance(payload["system"], str):
            raise StateError("RuntimeState.payload.system: expected a system instruction or null")
        for key in ("steps", "pending"):
            steps = payload[key]
            if not isinstance(steps, list):
                raise StateError(f"RuntimeState.payload.{key}: expected a list")
            for index, step in enumerate(steps):
                where = f"RuntimeState.payload.{key}[{index}]"
                if not isinstance(step, dict) or not isinstance(step.get("type"), str):
                    raise StateError(f"{where}: expected a step object with a type")
                if key == "pending" and step["type"] != USER_INPUT:
                    raise StateError(f"{where}: expected a user_input step")
        check_boundaries(state, "steps", "steps")

    def buffered(self, state: RuntimeState, messages: Sequence[NeutralMessage]) -> RuntimeState:
        """`state` with `messages` (user messages) waiting, as steps, for the next request."""
        system, users = split_inputs(messages, "buffered")
        if system is not None:
            raise ConfigurationError("buffered: a system prompt cannot wait for the next request")
        payload = {**state.payload, "pending": [*state.payload["pending"], *users]}
        return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)

    def committed(
        self,
        state: RuntimeState,
        history: History,
        inputs: Sequence[Step],
        output: Sequence[Step],
        reasoning: str | None,
        system: str | None = None,
    ) -> RuntimeState:
        """The provisional state after a completed interaction: the accepted steps, then this
        turn's inputs and every step the model generated, with one more boundary around the
        two."""
        start = len(history.items)
        steps = [*history.items, *inputs, *output]
        shown = tuple(readable(step) for step in steps[start:])
        boundary = TurnBoundary(start, len(steps), shown, reasoning)
        payload = {"system": system, "steps": steps, "pending": []}
        return RuntimeState(state.adapter_id, state.strategy, payload, (*history.turns, boundary))

    def readable(self, item: Step) -> NeutralMessage:
        return readable(item)

    def descriptor(self, index: int, item: Step) -> dict[str, Any]:
        """A step as request records describe it: position and type; never a body."""
        return {"index": index, "type": str(item.get("type"))}


def readable(step: Step) -> NeutralMessage:
    """The readable projection of one step: user input and model output by their text, a
    thought by its summary, any other step by its type. Signatures never appear."""
    kind = step.get("type")
    if kind == USER_INPUT:
        return {"role": "user", "content": content_text(step.get("content"))}
    if kind == "thought":
        return {"role": "assistant", "content": "", "reasoning": content_text(step.get("summary"))}
    if kind == "model_output":
        return {"role": "assistant", "content": content_text(step.get("content"))}
    return {"role": "assistant", "content": f"[{kind} step]"}


def content_text(content: object) -> str:
    """The text parts of a content list, joined."""
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text") or "")
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )
