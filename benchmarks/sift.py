"""Benchmark: how much of each request the provider can serve from its prompt cache.

Replays one seeded 300-step tool-using trace (mixed result sizes, repeated reads of the same files,
stored nudges and per-call progress notes) through the sift, plain sliding-window trimming and
LangChain's `trim_messages`, every one held to the same 32k-token ceiling on the whole request
(tool definitions and the note counted), then times the sift at 1,000 messages.
Run: `satchel bench sift` or `python benchmarks/sift.py`.
"""

import json
import logging
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages, trim_messages
from rich.console import Console
from rich.table import Table

from satchel.sift import (
    ContextSift,
    Message,
    SiftSettings,
    artifact_tool_definitions,
    estimate_tokens,
    openai_messages,
)
from satchel.sift.langchain import LangChainSift

SEED = 20_260_503
STEPS = 300
BUDGET = 32_000
"""The ceiling of every strategy: no request, tool definitions and note counted, passes it."""
WINDOW = 40_000
"""The sift's context window: its net caps a request at 0.8 of it, the same 32k."""
WIDE_WINDOW = 64_000
"""A wider window, whose net caps a request at 51.2k: what the budget alone does."""
TIMED_MESSAGES = 1_000
BASE_PRICE = 3.00
"""Dollars per million uncached input tokens; cache reads cost 0.1x, cache writes 1.25x."""
CACHE_READ = 0.1
CACHE_WRITE = 1.25

SYSTEM = (
    "You are a careful software engineer working in a Python repository. Use the tools to read, "
    "search, edit and test the code. Keep changes small and run the tests after each edit. "
) * 12
TASK = "The export command writes an empty CSV when the report has more than 500 rows. Fix it."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"} for arg in args},
                "required": list(args),
            },
        },
    }
    for name, description, args in (
        ("read_file", "Read a file of the repository.", ("path",)),
        ("grep", "Search the repository for a pattern.", ("pattern",)),
        ("run_tests", "Run the test suite, or one test file.", ("target",)),
        ("edit_file", "Replace a span of a file.", ("path", "old", "new")),
        ("list_dir", "List a directory.", ("path",)),
    )
] + artifact_tool_definitions()

Strategy = Callable[[list[Message], str | None], list[Message]]


@dataclass(frozen=True)
class Outcome:
    """What one strategy sent over the whole trace."""

    name: str
    cacheable_share: float
    input_tokens: int
    largest_request: int
    breaks: int
    """Calls whose request does not start with the whole previous request (its note aside)."""
    cost: float
    uncached_cost: float


def words(rng: random.Random, count: int) -> list[str]:
    """Plausible identifiers."""
    stems = ("row", "report", "export", "csv", "page", "limit", "writer", "chunk", "flush", "data")
    return [f"{rng.choice(stems)}_{rng.randrange(1000)}" for _ in range(count)]


def source_file(rng: random.Random, lines: int) -> str:
    """A made-up Python source file of about `lines` lines."""
    body = []
    for number in range(lines):
        name, arg, value = words(rng, 3)
        body.append(f"    {name} = compute({arg}, {value})  # line {number}")
        if number % 12 == 0:
            body.append(f"def {name}({arg}):")
    return "\n".join(body)


def generate_trace(steps: int, seed: int = SEED) -> list[list[Message]]:
    """The trace as the messages each step appends: a call, its results, sometimes a nudge."""
    rng = random.Random(seed)
    sizes = (40, 90, 160, 300, 500)
    files = {f"src/report/{name}.py": rng.choice(sizes) for name in words(rng, 24)}
    contents = {path: source_file(rng, lines) for path, lines in files.items()}
    paths = list(files)
    trace: list[list[Message]] = []
    for step in range(steps):
        calls = []
        results = []
        for part in range(2 if rng.random() < 0.2 else 1):
            call_id = f"call_{step:03d}_{part}"
            kind = rng.choices(
                ("read_file", "grep", "run_tests", "edit_file", "list_dir"), (5, 3, 2, 2, 1)
            )[0]
            if kind in ("read_file", "edit_file"):
                path = rng.choice(paths[: 6 + step // 20])
                args: dict[str, Any] = {"path": path}
                if kind == "edit_file":
                    args |= {"old": " ".join(words(rng, 3)), "new": " ".join(words(rng, 4))}
                    output = f"edited {path}: 1 span replaced"
                else:
                    output = contents[path]
            elif kind == "grep":
                args = {"pattern": rng.choice(words(rng, 4))}
                hits = rng.randrange(1, 40)
                output = "\n".join(
                    f"{rng.choice(paths)}:{rng.randrange(900)}: {' '.join(words(rng, 6))}"
                    for _ in range(hits)
                )
            elif kind == "run_tests":
                args = {"target": rng.choice(("tests/", "tests/test_export.py"))}
                failed = rng.random() < 0.4
                lines = rng.randrange(20, 300 if failed else 60)
                log = "\n".join(f"tests/test_{w}.py::test_{w} PASSED" for w in words(rng, lines))
                tail = "FAILED tests/test_export.py::test_many_rows" if failed else "all passed"
                output = ("Error: 1 test failed\n" if failed else "") + log + "\n" + tail
            else:
                args = {"path": "src/report"}
                output = "\n".join(sorted(paths))
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": kind, "arguments": json.dumps(args)},
                }
            )
            results.append({"role": "tool", "tool_call_id": call_id, "content": output})
        thought = f"Step {step}: checking {' '.join(words(rng, rng.randrange(3, 20)))}."
        appended: list[Message] = [{"role": "assistant", "content": thought, "tool_calls": calls}]
        appended += results
        if step % 37 == 36:
            appended.append(
                {"role": "user", "content": f"You have taken {step + 1} steps. Keep it focused."}
            )
        trace.append(appended)
    return trace


def progress_note(step: int) -> str | None:
    """The per-call note some calls carry."""
    return f"Progress: step {step + 1} of {STEPS}." if step % 10 == 9 else None


def tokens_of(message: Message) -> int:
    """One message by the sift's estimate, for every strategy alike."""
    return estimate_tokens(message)


def note_message(note: str | None) -> list[Message]:
    return [{"role": "user", "content": note}] if note else []


TOOL_TOKENS = ceil(
    len(json.dumps(TOOLS, sort_keys=True, ensure_ascii=False, separators=(",", ":"))) / 3.5
)
"""The tool definitions sent with every request, by the estimate the sift uses for them."""
NOTE_RESERVE = max(
    tokens_of(message) for step in range(STEPS) for message in note_message(progress_note(step))
)
"""What the baselines keep free for the per-call note: the longest one."""
MESSAGE_ROOM = BUDGET - TOOL_TOKENS - NOTE_RESERVE
"""The baselines' budget for messages: the ceiling less the tools and the note."""


def sliding_window(history: list[Message], note: str | None) -> list[Message]:
    """System prompt and task, then the newest whole steps (a call with its results, or a single
    message) that fit, so every call keeps its results."""
    head = history[:2]
    room = MESSAGE_ROOM - sum(tokens_of(message) for message in head)
    start = len(history)
    used = 0
    for begin in range(len(history) - 1, 1, -1):
        if history[begin]["role"] == "tool":
            continue
        size = sum(tokens_of(message) for message in history[begin:start])
        if used + size > room:
            break
        used += size
        start = begin
    return head + history[start:] + note_message(note)


class TrimMessages:
    """LangChain's `trim_messages` at the same ceiling, over the same history: the system prompt,
    then the newest messages that fit, starting on a human or an AI message (never on a tool
    result whose call was left out)."""

    def __init__(self) -> None:
        self.converter = LangChainSift(ContextSift(SiftSettings(budget=BUDGET)))
        self.messages: list[BaseMessage] = []

    def __call__(self, history: list[Message], note: str | None) -> list[Message]:
        while len(self.messages) < len(history):
            message = dict(history[len(self.messages)])
            if message["role"] == "assistant":
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "args": json.loads(call["function"]["arguments"]),
                    }
                    for call in message.get("tool_calls", [])
                ]
            self.messages.extend(convert_to_messages([message]))
        trimmed = trim_messages(
            self.messages,
            max_tokens=MESSAGE_ROOM,
            token_counter=self._count,
            strategy="last",
            include_system=True,
            start_on=("human", "ai"),
            allow_partial=False,
        )
        return self.converter.to_openai(trimmed) + note_message(note)

    def _count(self, message: BaseMessage) -> int:
        return tokens_of(self.converter.to_openai([message])[0])


def replay(name: str, strategy: Strategy, trace: Sequence[list[Message]]) -> Outcome:
    """Send the trace through one strategy and price what the cache would have served.

    Each request is rendered as Chat Completions sends it; what the cache can serve is the tool
    definitions and then every message up to the first one whose bytes differ from the previous
    request's, counted in tokens.
    """
    history: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    previous: list[str] = []
    previous_stored = 0
    total = cacheable = largest = breaks = 0
    cost = 0.0
    for step, appended in enumerate(trace):
        history.extend(appended)
        note = progress_note(step)
        request = openai_messages(strategy(history, note))
        bodies = [json.dumps(message, sort_keys=True) for message in request]
        sizes = [tokens_of(message) for message in request]
        common = 0
        while common < min(len(bodies), len(previous)) and bodies[common] == previous[common]:
            common += 1
        breaks += common < previous_stored
        read = (TOOL_TOKENS if previous else 0) + sum(sizes[:common])
        sent = TOOL_TOKENS + sum(sizes)
        total += sent
        largest = max(largest, sent)
        cacheable += read
        cost += (read * CACHE_READ + (sent - read) * CACHE_WRITE) * BASE_PRICE / 1e6
        previous = bodies
        previous_stored = len(bodies) - int(note is not None)
    return Outcome(name, cacheable / total, total, largest, breaks, cost, total * BASE_PRICE / 1e6)


def new_sift(window: int = WINDOW) -> ContextSift:
    return ContextSift(
        SiftSettings(budget=BUDGET, window=window, read_targets={"read_file": "path"})
    )


class SiftStrategy:
    """The sift at the 32k budget, counting its trims by reason."""

    def __init__(self, window: int) -> None:
        self.sift = new_sift(window)
        self.trims: Counter[str] = Counter()

    def __call__(self, history: list[Message], note: str | None) -> list[Message]:
        if self.sift.task_id is None:
            self.sift.begin_run(history)
        result = self.sift.sift(history, tools=TOOLS, note=note)
        self.trims.update(event.reason for event in result.events)
        return result.messages


def time_sift(messages: int) -> float:
    """Milliseconds per sift call while the history grows through `messages` messages."""
    trace = generate_trace(messages, seed=SEED + 1)
    sift = new_sift()
    history: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    sift.begin_run(history)
    timings: list[float] = []
    for step, appended in enumerate(trace):
        history.extend(appended)
        started = time.perf_counter()
        sift.sift(history, tools=TOOLS, note=progress_note(step))
        elapsed = time.perf_counter() - started
        if len(history) >= messages:
            timings.append(elapsed)
            if len(timings) == 200:
                break
    return statistics.mean(timings) * 1000


class WarningCount(logging.Handler):
    """Counts the net's warnings instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def main() -> None:
    net_warnings = WarningCount()
    sift_logger = logging.getLogger("satchel.sift")
    sift_logger.addHandler(net_warnings)
    sift_logger.propagate = False
    console = Console(width=140)
    trace = generate_trace(STEPS)
    messages = 2 + sum(len(appended) for appended in trace)
    console.print(
        f"sift benchmark: {STEPS} steps ({messages} messages), ceiling {BUDGET} tokens per "
        f"request ({TOOL_TOKENS} of tool definitions), sift budget {BUDGET} and window {WINDOW} "
        f"(or {WIDE_WINDOW}), seed {SEED}, base price ${BASE_PRICE:.2f}/M input tokens"
    )
    sifts = [SiftStrategy(WINDOW), SiftStrategy(WIDE_WINDOW)]
    outcomes = [
        replay(f"sift, window {WINDOW // 1000}k", sifts[0], trace),
        replay(f"sift, window {WIDE_WINDOW // 1000}k", sifts[1], trace),
        replay("sliding window", sliding_window, trace),
        replay("trim_messages", TrimMessages(), trace),
    ]
    ms_per_call = time_sift(TIMED_MESSAGES)
    table = Table(title=f"{STEPS} requests, one per step")
    table.add_column("strategy", no_wrap=True)
    for column in (
        "cacheable share",
        "input tokens",
        "mean request",
        "largest request",
        "prefix breaks",
        "cost with cache",
        "cost without",
    ):
        table.add_column(column, justify="right")
    for outcome in outcomes:
        table.add_row(
            outcome.name,
            f"{outcome.cacheable_share:.3f}",
            f"{outcome.input_tokens:,}",
            f"{outcome.input_tokens // STEPS:,}",
            f"{outcome.largest_request:,}",
            f"{outcome.breaks}",
            f"${outcome.cost:.2f}",
            f"${outcome.uncached_cost:.2f}",
        )
    console.print(table)
    for outcome, sift in zip(outcomes[:2], sifts, strict=True):
        console.print(
            f"{outcome.name}: {sift.trims['token_budget']} eviction batches, "
            f"{sift.trims['overflow'] + sift.trims['fit_to_window']} overflow cuts"
        )
    console.print(
        f"sift time per call at {TIMED_MESSAGES} messages: {ms_per_call:.2f} ms; "
        f"calls where the net could not reach its target: {net_warnings.count}"
    )
    named = zip(("sift", "sift_window_64k", "sliding", "trim_messages"), outcomes, strict=True)
    summary: dict[str, float | int] = {"ceiling_tokens": BUDGET}
    for key, outcome in named:
        summary |= {
            f"{key}_cacheable_share": round(outcome.cacheable_share, 4),
            f"{key}_largest_request": outcome.largest_request,
            f"{key}_input_tokens": outcome.input_tokens,
            f"{key}_prefix_breaks": outcome.breaks,
            f"{key}_cost_usd": round(outcome.cost, 4),
        }
    summary["sift_batches"] = sifts[0].trims["token_budget"]
    summary["sift_overflow_cuts"] = sifts[0].trims["overflow"] + sifts[0].trims["fit_to_window"]
    summary["sift_ms_per_call"] = round(ms_per_call, 3)
    summary["net_warnings"] = net_warnings.count
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
