"""Which completed steps a batch may evict, oldest first, and what evicting each frees."""

from collections.abc import Sequence
from dataclasses import dataclass

from satchel.sift.artifacts import Artifact
from satchel.sift.messages import ChatMessage, call_name, content_text, tool_calls
from satchel.sift.rendering import StepRenderer
from satchel.sift.settings import SiftSettings
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript


@dataclass(frozen=True, slots=True)
class Candidate:
    """A step a batch may evict: its unit, the tokens its receipt frees, the receipt text and the
    artifacts of its outputs."""

    unit: int
    freed: int
    receipt: str
    artifacts: tuple[Artifact, ...]


def candidates(
    renderer: StepRenderer,
    transcript: Transcript,
    kept: Sequence[int],
    state: SiftState,
    sizes: list[int],
    budget: int,
) -> list[Candidate]:
    """Completed steps that may be evicted, oldest first, with what evicting each frees."""
    settings = renderer.settings
    end = transcript.active if transcript.active is not None else len(transcript.units)
    protected = _inline_reads(settings, transcript, kept, end, state, sizes, budget)
    found: list[Candidate] = []
    for u in kept:
        if u >= end:
            break
        unit = transcript.units[u]
        step = unit.step
        if step is None or step.id in state.receipts:
            continue
        if u in protected or calls_kept_tool(settings, transcript.messages[unit.start]):
            continue
        text, artifacts = renderer.draft(transcript.messages, unit, state.artifact_prefix)
        freed = sizes[u] - renderer.size(renderer.receipt(step.id, text))
        if freed > 0:
            found.append(Candidate(u, freed, text, artifacts))
    return found


def evictable(renderer: StepRenderer, transcript: Transcript, u: int, state: SiftState) -> bool:
    """Whether a later batch may evict the step of unit `u`: not a receipt yet, not of a kept
    tool, not holding the newest read of a target short enough to stay inline, and larger
    than its receipt."""
    unit = transcript.units[u]
    assert unit.step is not None
    settings = renderer.settings
    if unit.step.id in state.receipts or calls_kept_tool(settings, transcript.messages[unit.start]):
        return False
    if unit.step.reads and _holds_newest_read(settings, transcript, u):
        return False
    text, _ = renderer.draft(transcript.messages, unit, state.artifact_prefix)
    receipt = renderer.receipt(unit.step.id, text)
    return renderer.step_size(transcript.messages, unit, state) > renderer.size(receipt)


def calls_kept_tool(settings: SiftSettings, assistant: ChatMessage) -> bool:
    """Whether a step calls one of the `kept_tools`, so it is never evicted."""
    kept = settings.kept_tools
    return bool(kept) and any(call_name(call) in kept for call in tool_calls(assistant))


def _inline_reads(
    settings: SiftSettings,
    transcript: Transcript,
    kept: Sequence[int],
    end: int,
    state: SiftState,
    sizes: list[int],
    budget: int,
) -> set[int]:
    """Completed steps that hold the newest read of a target short enough to keep inline,
    newest first, while together they fit `inline_reads_fraction` of the message budget."""
    room = settings.inline_reads_fraction * budget
    used = 0
    protected: set[int] = set()
    for u in reversed(kept):
        if u >= end:
            continue
        step = transcript.units[u].step
        if step is None or not step.reads or step.id in state.receipts:
            continue
        if not _holds_newest_read(settings, transcript, u):
            continue
        if used + sizes[u] > room:
            break
        used += sizes[u]
        protected.add(u)
    return protected


def _holds_newest_read(settings: SiftSettings, transcript: Transcript, u: int) -> bool:
    """Whether a step holds the newest read of a target with a result short enough to keep."""
    unit = transcript.units[u]
    assert unit.step is not None
    messages = transcript.messages
    for key, call_id in unit.step.reads:
        if transcript.newest_reads.get(key) != u:
            continue
        for index in range(unit.start + 1, unit.end):
            result = messages[index]
            if result.get("tool_call_id") == call_id:
                text = content_text(result.get("content"))
                if len(text) <= settings.bounded_chars:
                    return True
    return False
