"""One sift pass: what the model sees this call, given the transcript, the units the net leaves
out and the sticky state. The pass updates the state it is given and nothing else."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import floor

from satchel.sift.artifacts import Artifact
from satchel.sift.bounding import bound_active, bound_after, keep_artifacts, share_room
from satchel.sift.events import TrimEvent
from satchel.sift.eviction import candidates, evictable
from satchel.sift.hysteresis import plan_batch
from satchel.sift.messages import ChatMessage
from satchel.sift.rendering import StepRenderer
from satchel.sift.settings import SiftSettings
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript


@dataclass(slots=True)
class Pass:
    """The outcome of one sift pass."""

    messages: list[ChatMessage]
    sources: list[int]
    """History index of each message; a receipt points at its step's assistant message."""
    events: list[TrimEvent] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    """Full outputs to store when this pass is committed."""
    stable_end: int | None = None
    """Index of the last message before the first step that is not a receipt: the next batch
    changes nothing up to it."""


@dataclass(frozen=True, slots=True)
class Cut:
    """What the net leaves out: every unit before `end` except those in `kept`."""

    end: int = 0
    kept: frozenset[int] = frozenset()

    def units(self, count: int) -> list[int]:
        """The units kept of `count`, in order."""
        before = sorted(u for u in self.kept if u < self.end)
        return before + list(range(min(self.end, count), count))

    def leaves_out(self, unit: int) -> bool:
        """Whether `unit` is left out."""
        return unit < self.end and unit not in self.kept

    def left_out(self) -> Iterator[int]:
        """The units left out, oldest first."""
        return (u for u in range(self.end) if u not in self.kept)


class Sifter:
    """Runs sift passes, remembering receipts and bounded results it already rendered."""

    def __init__(self, settings: SiftSettings, sizer: Sizer) -> None:
        self.settings = settings
        self.size = sizer
        self._renderer = StepRenderer(settings, sizer)

    def run(self, transcript: Transcript, cut: Cut, state: SiftState, extra_tokens: int) -> Pass:
        """Sift `transcript` without the units in `cut`, updating `state`.

        `extra_tokens` is what the request sends beside its messages (the tool definitions and the
        note); like the system prompt, it is taken off the budget.
        """
        settings = self.settings
        messages = transcript.messages
        units = transcript.units
        system_tokens = sum(self.size(messages[i]) for i in range(transcript.system_end))
        budget = max(
            floor(settings.budget * settings.min_message_budget_fraction),
            settings.budget - system_tokens - extra_tokens,
        )
        kept = cut.units(len(units))
        sizes = [0] * len(units)
        total = 0
        sticky = False
        renderer = self._renderer
        for u in kept:
            unit = units[u]
            step = unit.step
            if step is None:
                sizes[u] = self.size(messages[unit.start])
            elif step.id in state.receipts:
                sticky = True
                sizes[u] = self.size(renderer.receipt(step.id, state.receipts[step.id]))
            else:
                sizes[u] = renderer.step_size(messages, unit, state)
            total += sizes[u]

        done = Pass(messages=[], sources=[])
        if transcript.active is not None:
            engaged = sticky or total > budget
            total += bound_active(renderer, transcript, engaged, state, sizes, done.artifacts)
            if engaged:
                total += share_room(renderer, transcript, budget, state, sizes, done.artifacts)
        else:
            state.whole = set()

        first_batch: int | None = None
        before = total
        removed = 0
        if total > budget:
            found = candidates(renderer, transcript, kept, state, sizes, budget)
            count = plan_batch(
                budget,
                total,
                [candidate.freed for candidate in found],
                target_fraction=settings.target_fraction,
                min_batch_fraction=settings.min_batch_fraction,
                slack_fraction=settings.slack_fraction,
            )
            for candidate in found[:count]:
                unit = units[candidate.unit]
                assert unit.step is not None
                state.receipts[unit.step.id] = candidate.receipt
                keep_artifacts(candidate.artifacts, state, done.artifacts)
                total -= candidate.freed
                removed += unit.end - unit.start
            if count:
                first_batch = found[0].unit
                total -= bound_after(
                    renderer, transcript, kept, first_batch, state, sizes, done.artifacts
                )

        first_index = self._render(transcript, kept, first_batch, state, done)
        if first_batch is not None:
            done.events.append(TrimEvent("token_budget", removed, first_index, before, total))
        return done

    def _render(
        self,
        transcript: Transcript,
        kept: Sequence[int],
        first_batch: int | None,
        state: SiftState,
        done: Pass,
    ) -> int:
        messages = transcript.messages
        out = done.messages
        sources = done.sources
        out.extend(messages[: transcript.system_end])
        sources.extend(range(transcript.system_end))
        first_index = -1
        bounded = state.bounded
        renderer = self._renderer
        stable = True
        for u in kept:
            unit = transcript.units[u]
            step = unit.step
            if u == first_batch:
                first_index = len(out)
            if (
                stable
                and step is not None
                and step.id not in state.receipts
                and evictable(renderer, transcript, u, state)
            ):
                stable = False
                done.stable_end = len(out) - 1 if out else None
            if step is None:
                out.append(messages[unit.start])
                sources.append(unit.start)
            elif step.id in state.receipts:
                out.append(renderer.receipt(step.id, state.receipts[step.id]))
                sources.append(unit.start)
            else:
                out.append(messages[unit.start])
                sources.append(unit.start)
                for index in range(unit.start + 1, unit.end):
                    message = messages[index]
                    call_id = message.get("tool_call_id")
                    if call_id in bounded:
                        message = renderer.bounded_message(message, state)
                    out.append(message)
                    sources.append(index)
        return first_index
