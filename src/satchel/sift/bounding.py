"""Bounding long tool results: the active step's new ones, the active step's share of the room,
and those of steps kept after a batch. A bounded result's full output becomes an artifact."""

from collections.abc import Mapping, Sequence
from math import floor
from typing import Any

from satchel.sift.artifacts import Artifact
from satchel.sift.messages import ChatMessage, call_arguments, call_name, content_text, tool_calls
from satchel.sift.receipts import argument_hint
from satchel.sift.rendering import StepRenderer
from satchel.sift.settings import SiftSettings
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript, Unit

MIN_SHARE_CHARS = 400
"""Results of the active step are never cut below this many characters to share its room."""


def bound_active(
    renderer: StepRenderer,
    transcript: Transcript,
    engaged: bool,
    state: SiftState,
    sizes: list[int],
    stored: list[Artifact],
) -> int:
    """Bound the active step's new long results when sifting is engaged; return the change."""
    assert transcript.active is not None
    unit = transcript.units[transcript.active]
    whole: set[str] = set()
    bounded_any = False
    for index, call in long_results(renderer.settings, transcript.messages, unit, state):
        call_id = str(call.get("id"))
        if engaged and call_id not in state.whole:
            bound(transcript.messages[index], call, state, stored)
            bounded_any = True
        else:
            whole.add(call_id)
    state.whole = whole
    if not bounded_any:
        return 0
    before = sizes[transcript.active]
    sizes[transcript.active] = renderer.step_size(transcript.messages, unit, state)
    return sizes[transcript.active] - before


def share_room(
    renderer: StepRenderer,
    transcript: Transcript,
    budget: int,
    state: SiftState,
    sizes: list[int],
    stored: list[Artifact],
) -> int:
    """Hold the active step's results to `awaited_fraction` of the message budget: the longest
    not sent whole are cut to one common length (at least `MIN_SHARE_CHARS`); return the
    change. Only the results are measured, so how the model spaced its arguments does not
    move the cut."""
    assert transcript.active is not None
    settings = renderer.settings
    size = renderer.size
    active = transcript.active
    unit = transcript.units[active]
    messages = transcript.messages
    room = floor(settings.awaited_fraction * budget)
    results = sum(size(renderer.shown(messages[i], state)) for i in range(unit.start + 1, unit.end))
    if results <= room:
        return 0
    calls = {str(call.get("id")): call for call in tool_calls(messages[unit.start])}
    shown: dict[int, int] = {}
    shown_tokens = 0
    for index in range(unit.start + 1, unit.end):
        call_id = str(messages[index].get("tool_call_id"))
        call = calls.get(call_id)
        # Sent whole, or already cut to a common length: sent as it was (the same bytes,
        # though a note now takes some of the room).
        if call is None or call_id in state.whole or call_id in state.limits:
            continue
        if call_name(call) in settings.retrieval_tools:
            continue
        length = len(content_text(messages[index].get("content")))
        if call_id in state.bounded:
            length = min(length, settings.bounded_chars)
        if length > MIN_SHARE_CHARS:
            shown[index] = length
            shown_tokens += size(renderer.shown(messages[index], state))
    if not shown or shown_tokens <= 0:
        return 0
    chars = sum(shown.values())
    goal = chars - (results - room) * chars / shown_tokens
    limit = max(_water_level(sorted(shown.values()), goal), MIN_SHARE_CHARS)
    changed = False
    for index, length in shown.items():
        if length > limit:
            call = calls[str(messages[index].get("tool_call_id"))]
            bound(messages[index], call, state, stored)
            state.limits[str(call.get("id"))] = limit
            changed = True
    if not changed:
        return 0
    before = sizes[active]
    sizes[active] = renderer.step_size(messages, unit, state)
    return sizes[active] - before


def bound_after(
    renderer: StepRenderer,
    transcript: Transcript,
    kept: Sequence[int],
    first_batch: int,
    state: SiftState,
    sizes: list[int],
    stored: list[Artifact],
) -> int:
    """Bound long results of kept steps after the batch's first evicted step; return saving."""
    saved = 0
    for u in kept:
        unit = transcript.units[u]
        if u <= first_batch or unit.step is None or unit.step.id in state.receipts:
            continue
        found = long_results(renderer.settings, transcript.messages, unit, state)
        if not found:
            continue
        for index, call in found:
            bound(transcript.messages[index], call, state, stored)
        before = sizes[u]
        sizes[u] = renderer.step_size(transcript.messages, unit, state)
        saved += before - sizes[u]
    return saved


def long_results(
    settings: SiftSettings, messages: Sequence[ChatMessage], unit: Unit, state: SiftState
) -> list[tuple[int, Mapping[str, Any]]]:
    """Results of a step longer than the bound and not bounded yet, with their calls."""
    found: list[tuple[int, Mapping[str, Any]]] = []
    for index in range(unit.start + 1, unit.end):
        message = messages[index]
        call_id = message.get("tool_call_id")
        if call_id in state.bounded:
            continue
        if len(content_text(message.get("content"))) <= settings.bounded_chars:
            continue
        for call in tool_calls(messages[unit.start]):
            if call.get("id") == call_id and call_name(call) not in settings.retrieval_tools:
                found.append((index, call))
    return found


def bound(
    result: ChatMessage, call: Mapping[str, Any], state: SiftState, stored: list[Artifact]
) -> None:
    """Show a result bounded from now on, its full output going to the store."""
    call_id = str(call.get("id"))
    state.bounded.add(call_id)
    artifact = Artifact(
        state.artifact_prefix + call_id,
        call_name(call),
        argument_hint(call_arguments(call)),
        content_text(result.get("content")),
    )
    keep_artifacts((artifact,), state, stored)


def keep_artifacts(artifacts: Sequence[Artifact], state: SiftState, stored: list[Artifact]) -> None:
    """Add to `stored` each artifact not stored before."""
    for artifact in artifacts:
        if artifact.id not in state.artifacts:
            state.artifacts.add(artifact.id)
            stored.append(artifact)


def _water_level(lengths: Sequence[int], goal: float) -> int:
    """The largest common length L such that `sum(min(length, L))` stays within `goal`, given
    the lengths in ascending order."""
    below = 0
    for count, length in enumerate(lengths):
        rest = len(lengths) - count
        if below + length * rest > goal:
            return max(int((goal - below) // rest), 0)
        below += length
    return lengths[-1] if lengths else 0
