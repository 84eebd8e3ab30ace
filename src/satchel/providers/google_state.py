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

from satchel.providers.unwinding import check_boundaries
from satchel.turns import ConfigurationError, Message, RuntimeState, StateError, TurnBoundary

Step = dict[str, Any]
PAYLOAD_KEYS = ("pending", "steps", "system")
USER_INPUT = "user_input"


def empty_payload() -> dict[str, Any]:
    return {"system": None, "steps": [], "pending": []}


def user_step(message: Message, where: str) -> Step:
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


def split_inputs(messages: Sequence[Message], where: str) -> tuple[str | None, list[Step]]:
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


def check_payload(state: RuntimeState) -> None:
    """Validate an Interactions payload and that boundaries fit inside its steps."""
    payload = state.payload
    keys = sorted(payload)
    if keys != list(PAYLOAD_KEYS):
        raise StateError(
            f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, got {', '.join(keys)}"
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


def buffered(state: RuntimeState, messages: Sequence[Message]) -> RuntimeState:
    """`state` with `messages` (user messages) waiting, as steps, for the next request."""
    system, users = split_inputs(messages, "buffered")
    if system is not None:
        raise ConfigurationError("buffered: a system prompt cannot wait for the next request")
    payload = {**state.payload, "pending": [*state.payload["pending"], *users]}
    return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)


def committed(
    state: RuntimeState,
    system: str | None,
    inputs: Sequence[Step],
    output: Sequence[Step],
    reasoning: str | None,
) -> RuntimeState:
    """The provisional state after a completed interaction: the accepted steps, then this turn's
    inputs and every step the model generated, with one more boundary around the two."""
    start = len(state.payload["steps"])
    steps = [*state.payload["steps"], *inputs, *output]
    shown = tuple(readable(step) for step in steps[start:])
    boundary = TurnBoundary(start, len(steps), shown, reasoning)
    payload = {"system": system, "steps": steps, "pending": []}
    return RuntimeState(
        state.adapter_id, state.strategy, payload, (*state.accepted_turns, boundary)
    )


def readable(step: Step) -> Message:
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


def descriptor(index: int, step: Step) -> dict[str, Any]:
    """A step as request records describe it: position and type; never a body."""
    return {"index": index, "type": str(step.get("type"))}
