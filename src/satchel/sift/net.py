"""The overflow net: when the whole sifted request (tool definitions counted) passes its bound,
leave out the fewest oldest whole units that bring it to the target, and hold that cut until the
bound is breached again. The system prompt, the task and the awaited step are never left out, and a
cut leaves a user message first after the system prompt wherever it can."""

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from math import floor, inf

from satchel.sift.artifacts import Artifact
from satchel.sift.events import TrimEvent, TrimReason
from satchel.sift.messages import call_arguments, call_name, content_text, tool_calls
from satchel.sift.receipts import argument_hint
from satchel.sift.settings import SiftSettings
from satchel.sift.sifting import Cut, Pass
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript, find_message, message_id

logger = logging.getLogger("satchel.sift")

RunPass = Callable[[Transcript, Cut, SiftState, int], Pass]
"""A sift pass: the transcript, the units left out, the state to update and the tokens sent beside
the messages."""


@dataclass(frozen=True, slots=True)
class Cuttable:
    """The units the net may leave out, oldest first: those before the awaited step, except the
    task. Indexed without building the list, so a call costs what the kept units cost."""

    awaited: int
    task: int | None

    def __len__(self) -> int:
        return self.awaited - int(self.task is not None and self.task < self.awaited)

    def unit(self, position: int) -> int:
        """The unit at `position`."""
        skips = self.task is not None and self.task <= position
        return position + int(skips)

    def end(self, count: int) -> int:
        """The unit from which nothing is left out when the oldest `count` are."""
        return self.unit(count) if count < len(self) else self.awaited

    def count_before(self, unit: int) -> int:
        """How many cuttable units come before `unit`."""
        unit = min(unit, self.awaited)
        return unit - int(self.task is not None and self.task < unit)

    def cut(self, count: int, kept: frozenset[int] = frozenset()) -> Cut:
        """The oldest `count` units left out, save `kept` (and the task)."""
        keep = kept | {self.task} if self.task is not None else kept
        return Cut(self.end(count), frozenset(keep))


@dataclass(frozen=True, slots=True)
class Attempt:
    """One sift with the oldest `cut` cuttable units left out, on its own copy of the state."""

    cut: int
    done: Pass
    state: SiftState
    tokens: int
    fits: bool


class Net:
    """Measures requests and chooses, holds and renews the cut."""

    def __init__(self, settings: SiftSettings, sizer: Sizer) -> None:
        self.settings = settings
        self.size = sizer

    def measure(self, done: Pass, extra_tokens: int) -> int:
        """Tokens of a sifted request plus what is sent beside its messages."""
        return sum(self.size(message) for message in done.messages) + extra_tokens

    def fit(
        self,
        transcript: Transcript,
        committed: SiftState,
        run: RunPass,
        extra_tokens: int,
        extra_messages: int,
    ) -> Attempt:
        """Sift under the held cut; when that breaches the bound, choose a new cut."""
        settings = self.settings
        usable = settings.usable_window
        cuttable = Cuttable(transcript.awaited, transcript.task)
        held = self._held_cut(transcript, committed.cut, cuttable)
        messages = transcript.messages
        units = transcript.units
        pinned = self._unit_indexes(transcript, committed.cut_pinned)
        held_cut = cuttable.cut(held, frozenset(pinned))
        state = committed.copy()
        if held == 0:
            state.cut = None
            state.cut_pinned = []
        done = run(transcript, held_cut, state, extra_tokens)
        tokens = self.measure(done, extra_tokens)
        count = len(done.messages) + extra_messages
        over_tokens = usable is not None and tokens > usable * settings.overflow_fraction
        cap = settings.max_messages
        over_count = cap is not None and count > cap
        if not (over_tokens or over_count):
            return Attempt(held, done, state, tokens, True)

        token_target = inf if usable is None else usable * settings.overflow_target_fraction
        count_target = (
            inf
            if cap is None
            else floor(cap * settings.overflow_target_fraction / settings.overflow_fraction)
        )
        tried: dict[int, Attempt] = {}

        def attempt(cut: int) -> Attempt:
            if cut not in tried:
                trial_state = committed.copy()
                trial = run(transcript, cuttable.cut(cut), trial_state, extra_tokens)
                trial_tokens = self.measure(trial, extra_tokens)
                fits = (
                    trial_tokens <= token_target
                    and len(trial.messages) + extra_messages <= count_target
                )
                tried[cut] = Attempt(cut, trial, trial_state, trial_tokens, fits)
            return tried[cut]

        reason: TrimReason = "message_cap"
        if usable is not None and tokens > usable:
            reason = "fit_to_window"
        elif over_tokens:
            reason = "overflow"
        if held >= len(cuttable):
            self._warn(tokens, count, token_target, count_target)
            left_out = next(held_cut.left_out(), None)
            first = (
                bisect_left(done.sources, units[left_out].start)
                if left_out is not None
                else transcript.system_end
            )
            done.events.append(TrimEvent(reason, 0, first, tokens, tokens))
            return Attempt(held, done, state, tokens, False)
        guess = self._guess(
            transcript, cuttable, held, done, tokens - token_target, count - count_target
        )
        low, high = self._bracket(attempt, held, len(cuttable), guess)
        chosen = attempt(high)
        if chosen.fits:
            while low < high:
                middle = (low + high) // 2
                if attempt(middle).fits:
                    high = middle
                else:
                    low = middle + 1
            opening = (
                cut
                for cut in range(high, len(cuttable) + 1)
                if self._opens_with_user(transcript, cuttable, cut)
            )
            chosen = attempt(next(opening, high))
        else:
            count = len(chosen.done.messages) + extra_messages
            self._warn(chosen.tokens, count, token_target, count_target)

        keep_from = cuttable.end(chosen.cut)
        chosen.state.cut = message_id(messages, units[keep_from].start)
        task = transcript.task
        chosen.state.cut_pinned = (
            [message_id(messages, units[task].start)]
            if task is not None and task < keep_from
            else []
        )
        newly = [u for u in cuttable.cut(chosen.cut).left_out() if not held_cut.leaves_out(u)]
        chosen.done.artifacts.extend(self._outputs(transcript, newly, chosen.state))
        _forget(chosen.state, transcript, newly)
        removed = sum(units[u].end - units[u].start for u in newly)
        first = done.sources.index(units[newly[0]].start)
        chosen.done.events.append(TrimEvent(reason, removed, first, tokens, chosen.tokens))
        return chosen

    def _outputs(
        self, transcript: Transcript, left_out: list[int], state: SiftState
    ) -> list[Artifact]:
        """Full outputs of the steps a cut leaves out that no receipt or bound stored yet, so the
        model can still read them (`artifact_list` names them)."""
        found: list[Artifact] = []
        messages = transcript.messages
        for u in left_out:
            unit = transcript.units[u]
            if unit.step is None:
                continue
            calls = {str(call.get("id")): call for call in tool_calls(messages[unit.start])}
            for index in range(unit.start + 1, unit.end):
                call = calls.get(str(messages[index].get("tool_call_id")))
                text = content_text(messages[index].get("content"))
                if call is None or not text or call_name(call) in self.settings.retrieval_tools:
                    continue
                artifact_id = state.artifact_prefix + str(call.get("id"))
                if artifact_id not in state.artifacts:
                    hint = argument_hint(call_arguments(call))
                    found.append(Artifact(artifact_id, call_name(call), hint, text))
        return found

    def _guess(
        self,
        transcript: Transcript,
        cuttable: Cuttable,
        held: int,
        done: Pass,
        tokens: float,
        messages: float,
    ) -> int:
        """How many cuttable units leaving out frees `tokens` and `messages` from `done`, by the
        sizes it rendered them at: where the search for the fewest that fit starts."""
        rendered: dict[int, int] = {}
        for message, source in zip(done.messages, done.sources, strict=True):
            rendered[source] = rendered.get(source, 0) + self.size(message)
        units = transcript.units
        count = held
        while count < len(cuttable) and (tokens > 0 or messages > 0):
            unit = units[cuttable.unit(count)]
            for index in range(unit.start, unit.end):
                if index in rendered:
                    tokens -= rendered[index]
                    messages -= 1
            count += 1
        return max(count, held + 1)

    @staticmethod
    def _bracket(
        attempt: Callable[[int], Attempt], held: int, most: int, guess: int
    ) -> tuple[int, int]:
        """A range `[low, high]` holding the fewest cut that fits, found from the guess in as few
        trials as its accuracy allows; `high` fits unless even leaving out all `most` does not."""
        guess = min(guess, most)
        if attempt(guess).fits:
            if guess - 1 <= held or not attempt(guess - 1).fits:
                return guess, guess
            return held + 1, guess - 1
        low, step = guess + 1, 1
        high = min(guess + step, most)
        while high < most and not attempt(high).fits:
            low = high + 1
            step *= 2
            high = min(guess + step, most)
        return min(low, high), high

    @staticmethod
    def _opens_with_user(transcript: Transcript, cuttable: Cuttable, cut: int) -> bool:
        """Whether the first unit kept when `cuttable[:cut]` is left out is a user message: the
        task, the first cuttable unit after the cut or the awaited step, whichever comes first."""
        units = transcript.units
        kept = [cuttable.unit(cut)] if cut < len(cuttable) else []
        if transcript.task is not None:
            kept.append(transcript.task)
        if transcript.awaited < len(units):
            kept.append(transcript.awaited)
        return bool(kept) and transcript.messages[units[min(kept)].start].get("role") == "user"

    @staticmethod
    def _held_cut(transcript: Transcript, cut: str | None, cuttable: Cuttable) -> int:
        """How many cuttable units the held cut leaves out (0 when it no longer applies)."""
        if cut is None:
            return 0
        index = find_message(transcript.messages, cut)
        if index is None:
            return 0
        unit = bisect_right(transcript.units, index, key=lambda u: u.start) - 1
        if unit < 0 or transcript.units[unit].start != index:
            return 0
        return cuttable.count_before(unit)

    @staticmethod
    def _unit_indexes(transcript: Transcript, ids: list[str]) -> set[int]:
        """The units that start with the messages of these ids."""
        found: set[int] = set()
        for wanted in ids:
            index = find_message(transcript.messages, wanted)
            if index is None:
                continue
            unit = bisect_right(transcript.units, index, key=lambda u: u.start) - 1
            if unit >= 0 and transcript.units[unit].start == index:
                found.add(unit)
        return found

    @staticmethod
    def _warn(tokens: int, count: int, token_target: float, count_target: float) -> None:
        logger.warning(
            "the overflow net cannot bring the request down to its target (%s tokens, %s "
            "messages): %d tokens in %d messages remain with every unit it may leave out left out",
            "any" if token_target == inf else int(token_target),
            "any" if count_target == inf else int(count_target),
            tokens,
            count,
        )


def _forget(state: SiftState, transcript: Transcript, left_out: list[int]) -> None:
    """Drop what the state keeps for steps a cut leaves out for good, so that copying and saving
    it cost what the kept units cost; their artifacts stay in the store."""
    for u in left_out:
        step = transcript.units[u].step
        if step is None:
            continue
        state.receipts.pop(step.id, None)
        for call_id in step.call_ids:
            state.bounded.discard(call_id)
            state.limits.pop(call_id, None)
            state.artifacts.discard(state.artifact_prefix + call_id)
