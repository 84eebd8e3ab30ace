"""ContextSift: decides what a tool-using agent sends on each call, so that between two eviction
batches every request is the previous request plus new content, byte for byte."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from satchel.sift.artifacts import ArtifactStore
from satchel.sift.events import TrimEvent
from satchel.sift.messages import ChatMessage, TokenCounter
from satchel.sift.net import Net
from satchel.sift.result import SiftResult
from satchel.sift.settings import SiftSettings, settings_refusal
from satchel.sift.sifting import Sifter
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import TranscriptReader, last_user_message, message_id


class ContextSift:
    """The context manager of one agent. Not thread-safe: one sift at a time."""

    def __init__(
        self,
        settings: SiftSettings,
        *,
        store: ArtifactStore | None = None,
        counter: TokenCounter | None = None,
        on_trim: Callable[[TrimEvent], None] | None = None,
    ) -> None:
        if not isinstance(settings, SiftSettings):
            raise TypeError(settings_refusal(settings))
        self.settings = settings
        self.store = store if store is not None else ArtifactStore()
        self.counter = counter
        self.on_trim = on_trim
        self._state = SiftState()
        self._sizer = Sizer(counter)
        self._sifter = Sifter(settings, self._sizer)
        self._net = Net(settings, self._sizer)
        self._reader = TranscriptReader(settings.read_targets)

    @property
    def task_id(self) -> str | None:
        """The id of the pinned task, recorded by `begin_run`."""
        return self._state.task_id

    @property
    def state(self) -> SiftState:
        """A copy of the sticky state."""
        return self._state.copy()

    def begin_run(self, history: Sequence[ChatMessage]) -> str:
        """Record the task at run start: the newest user message of `history`. Returns its id."""
        index = last_user_message(history)
        if index is None:
            raise ValueError("begin_run needs a history whose newest user message is the task")
        self._state.task_id = message_id(history, index)
        return self._state.task_id

    def sift(
        self,
        history: Sequence[ChatMessage],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        note: str | None = None,
    ) -> SiftResult:
        """The request for this call; its evictions, bounded results and cut become sticky."""
        return self._run(history, tools, note, commit=True)

    def trial(
        self,
        history: Sequence[ChatMessage],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        note: str | None = None,
    ) -> SiftResult:
        """What `sift` would return, leaving the manager unchanged."""
        return self._run(history, tools, note, commit=False)

    def compacted(self) -> None:
        """Tell the sift the stored history was compacted: the cut is cleared."""
        self._state.cut = None
        self._state.cut_pinned = []
        self._state.previous_length = None
        self._state.previous_stable_end = None

    def child(self) -> "ContextSift":
        """A manager for a sub-agent: every setting copied, the same store, fresh evictions."""
        self._state.children += 1
        child = ContextSift(
            self.settings, store=self.store, counter=self.counter, on_trim=self.on_trim
        )
        child._state.artifact_prefix = f"{self._state.artifact_prefix}sub{self._state.children}."
        return child

    def save(self) -> str:
        """The sticky state as JSON, for `restore` after a relaunch."""
        return self._state.to_json()

    def restore(self, saved: str) -> None:
        """Continue from a state written by `save`; the same settings give the same requests."""
        self._state = SiftState.from_json(saved)
        self._sifter = Sifter(self.settings, self._sizer)

    def _run(
        self,
        history: Sequence[ChatMessage],
        tools: Sequence[Mapping[str, Any]] | None,
        note: str | None,
        *,
        commit: bool,
    ) -> SiftResult:
        transcript = self._reader.read(history, self._state.task_id)
        note_message: ChatMessage | None = None
        extra_tokens = self._sizer.tools(tools)
        if note is not None:
            note_message = {"role": "user", "content": note}
            extra_tokens += self._sizer(note_message)
        chosen = self._net.fit(
            transcript, self._state, self._sifter.run, extra_tokens, int(note is not None)
        )
        done, state = chosen.done, chosen.state
        previous = self._state.previous_length
        unchanged = not done.events and state.cut == self._state.cut
        previous_end = (
            previous - 1
            if unchanged and previous is not None and 0 < previous <= len(done.messages)
            else None
        )
        state.previous_length = len(done.messages)
        changed_from = min((event.first for event in done.events), default=None)
        stable = self._state.previous_stable_end
        reused_end = (
            stable
            if changed_from is not None and stable is not None and stable < changed_from
            else None
        )
        state.previous_stable_end = done.stable_end
        messages = list(done.messages)
        sources: list[int | None] = list(done.sources)
        if note_message is not None:
            messages.append(note_message)
            sources.append(None)
        if commit:
            self._state = state
            for artifact in done.artifacts:
                self.store.put(artifact)
            self._sizer.forget_beyond(4 * len(history) + 64)
            if self.on_trim is not None:
                for event in done.events:
                    self.on_trim(event)
        return SiftResult(
            messages=messages,
            sources=tuple(sources),
            events=tuple(done.events),
            tokens=chosen.tokens,
            previous_end=previous_end,
            note=note_message is not None,
            stable_end=done.stable_end,
            changed_from=changed_from,
            reused_end=reused_end,
        )
