"""One sift pass: what the model sees this call, given the transcript, the units the net leaves
out and the sticky state. The pass updates the state it is given and nothing else."""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import floor
from typing import Any

from satchel.sift.artifacts import Artifact
from satchel.sift.bounded import bounded_result
from satchel.sift.events import TrimEvent
from satchel.sift.hysteresis import plan_batch
from satchel.sift.messages import (
    ChatMessage,
    call_arguments,
    call_name,
    content_text,
    image_parts,
    tool_calls,
)
from satchel.sift.receipts import CallRecord, argument_hint, looks_like_error, receipt_text
from satchel.sift.settings import SiftSettings
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript, Unit

MIN_SHARE_CHARS = 400
"""Results of the active step are never cut below this many characters to share its room."""


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


@dataclass(frozen=True, slots=True)
class _Candidate:
    unit: int
    freed: int
    receipt: str
    artifacts: tuple[Artifact, ...]


class Sifter:
    """Runs sift passes, remembering receipts and bounded results it already rendered."""

    def __init__(self, settings: SiftSettings, sizer: Sizer) -> None:
        self.settings = settings
        self.size = sizer
        self._receipts: dict[str, ChatMessage] = {}
        self._drafts: dict[str, tuple[ChatMessage, str, tuple[Artifact, ...]]] = {}
        self._bounded: dict[str, tuple[ChatMessage, int, ChatMessage]] = {}

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
        for u in kept:
            unit = units[u]
            step = unit.step
            if step is None:
                sizes[u] = self.size(messages[unit.start])
            elif step.id in state.receipts:
                sticky = True
                sizes[u] = self.size(self._receipt(step.id, state.receipts[step.id]))
            else:
                sizes[u] = self._step_size(messages, unit, state)
            total += sizes[u]

        done = Pass(messages=[], sources=[])
        if transcript.active is not None:
            engaged = sticky or total > budget
            total += self._bound_active(transcript, engaged, state, sizes, done)
            if engaged:
                total += self._share_room(transcript, budget, state, sizes, done)
        else:
            state.whole = set()

        first_batch: int | None = None
        before = total
        removed = 0
        if total > budget:
            candidates = self._candidates(transcript, kept, state, sizes, budget)
            count = plan_batch(
                budget,
                total,
                [candidate.freed for candidate in candidates],
                target_fraction=settings.target_fraction,
                min_batch_fraction=settings.min_batch_fraction,
                slack_fraction=settings.slack_fraction,
            )
            for candidate in candidates[:count]:
                unit = units[candidate.unit]
                assert unit.step is not None
                state.receipts[unit.step.id] = candidate.receipt
                self._keep_artifacts(candidate.artifacts, state, done)
                total -= candidate.freed
                removed += unit.end - unit.start
            if count:
                first_batch = candidates[0].unit
                total -= self._bound_after(transcript, kept, first_batch, state, sizes, done)

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
                and self._evictable(transcript, u, state)
            ):
                stable = False
                done.stable_end = len(out) - 1 if out else None
            if step is None:
                out.append(messages[unit.start])
                sources.append(unit.start)
            elif step.id in state.receipts:
                out.append(self._receipt(step.id, state.receipts[step.id]))
                sources.append(unit.start)
            else:
                out.append(messages[unit.start])
                sources.append(unit.start)
                for index in range(unit.start + 1, unit.end):
                    message = messages[index]
                    call_id = message.get("tool_call_id")
                    if call_id in bounded:
                        message = self._bounded_message(message, state)
                    out.append(message)
                    sources.append(index)
        return first_index

    def _step_size(self, messages: Sequence[ChatMessage], unit: Unit, state: SiftState) -> int:
        size = self.size(messages[unit.start])
        for index in range(unit.start + 1, unit.end):
            size += self.size(self._shown(messages[index], state))
        return size

    def _bound_active(
        self,
        transcript: Transcript,
        engaged: bool,
        state: SiftState,
        sizes: list[int],
        done: Pass,
    ) -> int:
        """Bound the active step's new long results when sifting is engaged; return the change."""
        assert transcript.active is not None
        unit = transcript.units[transcript.active]
        whole: set[str] = set()
        bounded_any = False
        for index, call in self._long_results(transcript.messages, unit, state):
            call_id = str(call.get("id"))
            if engaged and call_id not in state.whole:
                self._bound(transcript.messages[index], call, state, done)
                bounded_any = True
            else:
                whole.add(call_id)
        state.whole = whole
        if not bounded_any:
            return 0
        before = sizes[transcript.active]
        sizes[transcript.active] = self._step_size(transcript.messages, unit, state)
        return sizes[transcript.active] - before

    def _share_room(
        self, transcript: Transcript, budget: int, state: SiftState, sizes: list[int], done: Pass
    ) -> int:
        """Hold the active step's results to `awaited_fraction` of the message budget: the longest
        not sent whole are cut to one common length (at least `MIN_SHARE_CHARS`); return the
        change. Only the results are measured, so how the model spaced its arguments does not
        move the cut."""
        assert transcript.active is not None
        active = transcript.active
        unit = transcript.units[active]
        messages = transcript.messages
        room = floor(self.settings.awaited_fraction * budget)
        results = sum(
            self.size(self._shown(messages[i], state)) for i in range(unit.start + 1, unit.end)
        )
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
            if call_name(call) in self.settings.retrieval_tools:
                continue
            length = len(content_text(messages[index].get("content")))
            if call_id in state.bounded:
                length = min(length, self.settings.bounded_chars)
            if length > MIN_SHARE_CHARS:
                shown[index] = length
                shown_tokens += self.size(self._shown(messages[index], state))
        if not shown or shown_tokens <= 0:
            return 0
        chars = sum(shown.values())
        goal = chars - (results - room) * chars / shown_tokens
        limit = max(_water_level(sorted(shown.values()), goal), MIN_SHARE_CHARS)
        changed = False
        for index, length in shown.items():
            if length > limit:
                call = calls[str(messages[index].get("tool_call_id"))]
                self._bound(messages[index], call, state, done)
                state.limits[str(call.get("id"))] = limit
                changed = True
        if not changed:
            return 0
        before = sizes[active]
        sizes[active] = self._step_size(messages, unit, state)
        return sizes[active] - before

    def _bound_after(
        self,
        transcript: Transcript,
        kept: Sequence[int],
        first_batch: int,
        state: SiftState,
        sizes: list[int],
        done: Pass,
    ) -> int:
        """Bound long results of kept steps after the batch's first evicted step; return saving."""
        saved = 0
        for u in kept:
            unit = transcript.units[u]
            if u <= first_batch or unit.step is None or unit.step.id in state.receipts:
                continue
            long_results = self._long_results(transcript.messages, unit, state)
            if not long_results:
                continue
            for index, call in long_results:
                self._bound(transcript.messages[index], call, state, done)
            before = sizes[u]
            sizes[u] = self._step_size(transcript.messages, unit, state)
            saved += before - sizes[u]
        return saved

    def _long_results(
        self, messages: Sequence[ChatMessage], unit: Unit, state: SiftState
    ) -> list[tuple[int, Mapping[str, Any]]]:
        """Results of a step longer than the bound and not bounded yet, with their calls."""
        found: list[tuple[int, Mapping[str, Any]]] = []
        for index in range(unit.start + 1, unit.end):
            message = messages[index]
            call_id = message.get("tool_call_id")
            if call_id in state.bounded:
                continue
            if len(content_text(message.get("content"))) <= self.settings.bounded_chars:
                continue
            for call in tool_calls(messages[unit.start]):
                if (
                    call.get("id") == call_id
                    and call_name(call) not in self.settings.retrieval_tools
                ):
                    found.append((index, call))
        return found

    def _bound(
        self, result: ChatMessage, call: Mapping[str, Any], state: SiftState, done: Pass
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
        self._keep_artifacts((artifact,), state, done)

    @staticmethod
    def _keep_artifacts(artifacts: Sequence[Artifact], state: SiftState, done: Pass) -> None:
        for artifact in artifacts:
            if artifact.id not in state.artifacts:
                state.artifacts.add(artifact.id)
                done.artifacts.append(artifact)

    def _candidates(
        self,
        transcript: Transcript,
        kept: Sequence[int],
        state: SiftState,
        sizes: list[int],
        budget: int,
    ) -> list[_Candidate]:
        """Completed steps that may be evicted, oldest first, with what evicting each frees."""
        end = transcript.active if transcript.active is not None else len(transcript.units)
        protected = self._inline_reads(transcript, kept, end, state, sizes, budget)
        candidates: list[_Candidate] = []
        for u in kept:
            if u >= end:
                break
            unit = transcript.units[u]
            step = unit.step
            if step is None or step.id in state.receipts:
                continue
            if u in protected or self._kept(transcript.messages[unit.start]):
                continue
            text, artifacts = self._draft(transcript.messages, unit, state.artifact_prefix)
            freed = sizes[u] - self.size(self._receipt(step.id, text))
            if freed > 0:
                candidates.append(_Candidate(u, freed, text, artifacts))
        return candidates

    def _evictable(self, transcript: Transcript, u: int, state: SiftState) -> bool:
        """Whether a later batch may evict the step of unit `u`: not a receipt yet, not of a kept
        tool, not holding the newest read of a target short enough to stay inline, and larger
        than its receipt."""
        unit = transcript.units[u]
        assert unit.step is not None
        if unit.step.id in state.receipts or self._kept(transcript.messages[unit.start]):
            return False
        if unit.step.reads and self._holds_newest_read(transcript, u):
            return False
        text, _ = self._draft(transcript.messages, unit, state.artifact_prefix)
        receipt = self._receipt(unit.step.id, text)
        return self._step_size(transcript.messages, unit, state) > self.size(receipt)

    def _kept(self, assistant: ChatMessage) -> bool:
        """Whether a step calls one of the `kept_tools`, so it is never evicted."""
        kept = self.settings.kept_tools
        return bool(kept) and any(call_name(call) in kept for call in tool_calls(assistant))

    def _inline_reads(
        self,
        transcript: Transcript,
        kept: Sequence[int],
        end: int,
        state: SiftState,
        sizes: list[int],
        budget: int,
    ) -> set[int]:
        """Completed steps that hold the newest read of a target short enough to keep inline,
        newest first, while together they fit `inline_reads_fraction` of the message budget."""
        room = self.settings.inline_reads_fraction * budget
        used = 0
        protected: set[int] = set()
        for u in reversed(kept):
            if u >= end:
                continue
            step = transcript.units[u].step
            if step is None or not step.reads or step.id in state.receipts:
                continue
            if not self._holds_newest_read(transcript, u):
                continue
            if used + sizes[u] > room:
                break
            used += sizes[u]
            protected.add(u)
        return protected

    def _holds_newest_read(self, transcript: Transcript, u: int) -> bool:
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
                    if len(text) <= self.settings.bounded_chars:
                        return True
        return False

    def _draft(
        self, messages: Sequence[ChatMessage], unit: Unit, prefix: str
    ) -> tuple[str, tuple[Artifact, ...]]:
        """The receipt text of a step and the artifacts its outputs go to."""
        assert unit.step is not None
        assistant = messages[unit.start]
        cached = self._drafts.get(unit.step.id)
        if cached is not None and cached[0] is assistant:
            return cached[1], cached[2]
        results = {
            str(messages[index].get("tool_call_id")): messages[index]
            for index in range(unit.start + 1, unit.end)
        }
        records: list[CallRecord] = []
        artifacts: list[Artifact] = []
        for call in tool_calls(assistant):
            call_id = str(call.get("id"))
            tool = call_name(call)
            arguments = call_arguments(call)
            result = results.get(call_id, {})
            text = content_text(result.get("content"))
            images = len(image_parts(result.get("content")))
            stored = bool(text) and tool not in self.settings.retrieval_tools
            artifact_id = prefix + call_id if stored else None
            if artifact_id is not None:
                artifacts.append(Artifact(artifact_id, tool, argument_hint(arguments), text))
            error = looks_like_error(result, text)
            records.append(CallRecord(call_id, tool, arguments, text, images, error, artifact_id))
        receipt = receipt_text(
            content_text(assistant.get("content")), records, self.settings.summary_chars
        )
        self._drafts[unit.step.id] = (assistant, receipt, tuple(artifacts))
        return receipt, tuple(artifacts)

    def _receipt(self, step_id: str, text: str) -> ChatMessage:
        cached = self._receipts.get(step_id)
        if cached is not None and cached["content"] == text:
            return cached
        receipt: ChatMessage = {"role": "assistant", "content": text}
        self._receipts[step_id] = receipt
        return receipt

    def _shown(self, message: ChatMessage, state: SiftState) -> ChatMessage:
        """A result as this pass shows it: bounded when its call id is bounded."""
        if message.get("tool_call_id") in state.bounded:
            return self._bounded_message(message, state)
        return message

    def _bounded_message(self, message: ChatMessage, state: SiftState) -> ChatMessage:
        call_id = str(message.get("tool_call_id"))
        limit = state.limits.get(call_id, self.settings.bounded_chars)
        cached = self._bounded.get(call_id)
        if cached is not None and cached[0] is message and cached[1] == limit:
            return cached[2]
        bounded = bounded_result(message, limit, state.artifact_prefix + call_id)
        self._bounded[call_id] = (message, limit, bounded)
        return bounded


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
