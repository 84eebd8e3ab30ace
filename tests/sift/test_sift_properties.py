"""Property tests of the sift as a state machine over random tool-using traces."""

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from sift_runs import TOOLS, Run

from satchel.sift import ChatMessage, ContextSift, SiftResult, SiftSettings
from satchel.sift.transcript import find_message


class SiftTraces(RuleBasedStateMachine):
    """Random runs: steps of mixed sizes and tools, nudges, new runs, notes, saves and restores."""

    sift: ContextSift
    run: Run
    previous: SiftResult | None
    result: SiftResult | None

    @initialize(
        budget=st.integers(0, 5000),
        window=st.none() | st.integers(3000, 16000),
        max_messages=st.none() | st.integers(4, 30),
        reads=st.booleans(),
        inline_reads=st.sampled_from((0.0, 0.1, 1.0)),
    )
    def start(
        self,
        budget: int,
        window: int | None,
        max_messages: int | None,
        reads: bool,
        inline_reads: float,
    ) -> None:
        targets = {"read_file": "path"} if reads else {}
        self.settings = SiftSettings(
            budget=budget if window is None else min(budget, window),
            window=window,
            max_messages=max_messages,
            read_targets=targets,
            inline_reads_fraction=inline_reads,
        )
        self.sift = ContextSift(self.settings)
        self.run = Run.start()
        self.sift.begin_run(self.run.history)
        self.previous = self.result = None

    @rule(
        sizes=st.lists(st.integers(0, 2500) | st.integers(2500, 14000), min_size=1, max_size=3),
        tool=st.sampled_from(("grep", "read_file", "run_tests", "artifact_read")),
        path=st.sampled_from(("a.py", "b.py", "c.py")),
        error=st.booleans(),
        then_call=st.booleans(),
    )
    def step(self, sizes: list[int], tool: str, path: str, error: bool, then_call: bool) -> None:
        self.run.step(sizes, tool=tool, path=path, error=error)
        if then_call:
            self.call(None)

    @rule(text=st.text(min_size=1, max_size=400))
    def nudge(self, text: str) -> None:
        self.run.nudge(text)

    @rule(task=st.text(min_size=1, max_size=80))
    def new_run(self, task: str) -> None:
        self.run.answer()
        self.run.history.append({"role": "user", "content": task})
        self.sift.begin_run(self.run.history)

    @rule()
    def relaunch(self) -> None:
        saved = self.sift.save()
        self.sift = ContextSift(self.settings, store=self.sift.store)
        self.sift.restore(saved)

    @rule(note=st.none() | st.text(min_size=1, max_size=60))
    def call(self, note: str | None) -> None:
        trial = self.sift.trial(self.run.history, tools=TOOLS, note=note)
        self.previous, self.result = (
            self.result,
            self.sift.sift(self.run.history, tools=TOOLS, note=note),
        )
        assert self.result == trial
        self.the_prefix_only_changes_where_a_trim_says()
        self.the_system_prompt_and_the_task_are_sent_unchanged()
        self.steps_are_sent_whole_or_as_one_receipt()
        self.the_awaited_step_is_always_sent()

    def the_prefix_only_changes_where_a_trim_says(self) -> None:
        assert self.result is not None
        if self.previous is None:
            return
        before = self.previous.messages[: len(self.previous.messages) - int(self.previous.note)]
        after = self.result.messages
        keep = min([event.first for event in self.result.events] + [len(before)])
        assert after[:keep] == before[:keep]

    def the_system_prompt_and_the_task_are_sent_unchanged(self) -> None:
        assert self.result is not None
        history = self.run.history
        assert self.result.messages[0] is history[0]
        task_id = self.sift.task_id
        assert task_id is not None
        index = find_message(history, task_id)
        assert index is not None
        assert any(message is history[index] for message in self.result.messages)
        assert all(message["role"] != "system" for message in self.result.messages[1:])

    def steps_are_sent_whole_or_as_one_receipt(self) -> None:
        assert self.result is not None
        messages = self.result.messages
        for index, message in enumerate(messages):
            if message["role"] == "assistant" and message.get("tool_calls"):
                calls = [call["id"] for call in message["tool_calls"]]
                results = [
                    m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(calls)]
                ]
                assert sorted(results, key=str) == sorted(calls)
            if message["role"] == "tool":
                assert _call_before(messages, index)

    def the_awaited_step_is_always_sent(self) -> None:
        assert self.result is not None
        history = self.run.history
        last_call = max((i for i, m in enumerate(history) if m.get("tool_calls")), default=None)
        if last_call is None or any(m["role"] == "assistant" for m in history[last_call + 1 :]):
            return
        stored = self.result.messages[: len(self.result.messages) - int(self.result.note)]
        tail = history[last_call:]
        assert [m["role"] for m in stored[-len(tail) :]] == [m["role"] for m in tail]
        assert stored[-len(tail)] is history[last_call]


def _call_before(messages: list[ChatMessage], index: int) -> bool:
    call_id: Any = messages[index]["tool_call_id"]
    for before in range(index - 1, -1, -1):
        if messages[before]["role"] != "tool":
            return call_id in {call["id"] for call in messages[before].get("tool_calls", [])}
    return False


SiftTraces.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_sift_traces = SiftTraces.TestCase
