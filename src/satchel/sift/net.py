"""The overflow net: when the whole sifted request (tool definitions counted) passes its bound,
leave out the fewest oldest whole units that bring it to the target, and hold that cut until the
bound is breached again. The system prompt, the task and the awaited step are never left out, and a
cut leaves a user message first after the system prompt wherever it can."""

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from math import floor, inf

from satchel.sift.events import TrimEvent, TrimReason
from satchel.sift.settings import SiftSettings
from satchel.sift.sifting import Pass
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import Transcript, find_message, message_id

logger = logging.getLogger("satchel.sift")

RunPass = Callable[[Transcript, frozenset[int], SiftState, int], Pass]
"""A sift pass: the transcript, the units left out, the state to update and the tokens sent beside
the messages."""


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
        cuttable = [u for u in range(transcript.awaited) if u != transcript.task]
        held = self._held_cut(transcript, committed.cut, cuttable)
        messages = transcript.messages
        units = transcript.units
        pinned = self._unit_indexes(transcript, committed.cut_pinned)
        held_units = frozenset(u for u in cuttable[:held] if u not in pinned)
        state = committed.copy()
        if held == 0:
            state.cut = None
            state.cut_pinned = []
        done = run(transcript, held_units, state, extra_tokens)
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
                trial = run(transcript, frozenset(cuttable[:cut]), trial_state, extra_tokens)
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
            left_out = sorted(held_units)
            first = (
                bisect_left(done.sources, units[left_out[0]].start)
                if left_out
                else transcript.system_end
            )
            done.events.append(TrimEvent(reason, 0, first, tokens, tokens))
            return Attempt(held, done, state, tokens, False)
        chosen = attempt(len(cuttable))
        if chosen.fits:
            low, high = held + 1, len(cuttable)
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

        keep_from = cuttable[chosen.cut] if chosen.cut < len(cuttable) else transcript.awaited
        chosen.state.cut = message_id(messages, units[keep_from].start)
        task = transcript.task
        chosen.state.cut_pinned = (
            [message_id(messages, units[task].start)]
            if task is not None and task < keep_from
            else []
        )
        newly = [u for u in cuttable[: chosen.cut] if u not in held_units]
        removed = sum(units[u].end - units[u].start for u in newly)
        first = done.sources.index(units[newly[0]].start)
        chosen.done.events.append(TrimEvent(reason, removed, first, tokens, chosen.tokens))
        return chosen

    @staticmethod
    def _opens_with_user(transcript: Transcript, cuttable: list[int], cut: int) -> bool:
        """Whether the first unit kept when `cuttable[:cut]` is left out is a user message: the
        task, the first cuttable unit after the cut or the awaited step, whichever comes first."""
        units = transcript.units
        kept = cuttable[cut : cut + 1]
        if transcript.task is not None:
            kept.append(transcript.task)
        if transcript.awaited < len(units):
            kept.append(transcript.awaited)
        return bool(kept) and transcript.messages[units[min(kept)].start].get("role") == "user"

    @staticmethod
    def _held_cut(transcript: Transcript, cut: str | None, cuttable: list[int]) -> int:
        """How many cuttable units the held cut leaves out (0 when it no longer applies)."""
        if cut is None:
            return 0
        index = find_message(transcript.messages, cut)
        if index is None:
            return 0
        unit = bisect_right(transcript.units, index, key=lambda u: u.start) - 1
        if unit < 0 or transcript.units[unit].start != index:
            return 0
        return bisect_left(cuttable, unit)

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
