"""Seeded agent sessions for the sift benchmark, each with a simulated clock.

A trace is the messages each step appends (an assistant call with its results, sometimes a user
message), the time each step's request is sent, and a progress note on every 10th call.

- `coding`: the 300-step bug-fix session of the earlier benchmark, content unchanged.
- `long-outputs`: a 220-step CI-repair session with long tool outputs (test and build logs, large
  file reads, JSON API dumps) and wide fan-outs of parallel reads and greps.

The clock: each step takes the model's latency (2 to 25 s) plus its tool time (the slowest of
its parallel calls: 0.1 to 3 s for reads, greps and edits, up to 40 s for test runs and builds).
The long-outputs session also waits three times for 6 to 12 minutes (two CI runs and one human
reply), longer than a cache entry's 5-minute life.
"""

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from satchel.sift import ChatMessage, SiftSettings

CODING_SEED = 20_260_503
CODING_CLOCK_SEED = 7_110_503
LONG_SEED = 20_260_611
LONG_CLOCK_SEED = 7_110_611

CODING_SYSTEM = (
    "You are a careful software engineer working in a Python repository. Use the tools to read, "
    "search, edit and test the code. Keep changes small and run the tests after each edit. "
) * 12
CODING_TASK = (
    "The export command writes an empty CSV when the report has more than 500 rows. Fix it."
)


def function_tools(specs: Sequence[tuple[str, str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """OpenAI function tools with string arguments, all required."""
    return [
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
        for name, description, args in specs
    ]


CODING_TOOLS = function_tools(
    (
        ("read_file", "Read a file of the repository.", ("path",)),
        ("grep", "Search the repository for a pattern.", ("pattern",)),
        ("run_tests", "Run the test suite, or one test file.", ("target",)),
        ("edit_file", "Replace a span of a file.", ("path", "old", "new")),
        ("list_dir", "List a directory.", ("path",)),
    )
)


@dataclass(frozen=True)
class Trace:
    """One agent session: what each step appends, when its request is sent, and its note."""

    name: str
    key: str
    """The trace's name in JSON keys."""
    system: str
    task: str
    tools: list[dict[str, Any]]
    steps: list[list[ChatMessage]]
    times: list[float]
    """Seconds since the run began at which each step's request is sent."""
    ceiling: int
    """No request of any strategy may pass this many tokens (tools and note counted)."""
    settings: SiftSettings
    pauses: list[int] = field(default_factory=list)
    """Steps whose request waited out a long pause (CI or a human)."""

    def note(self, step: int) -> str | None:
        """The per-call note: a progress line on every 10th call."""
        return f"Progress: step {step + 1} of {len(self.steps)}." if step % 10 == 9 else None

    def head(self) -> list[ChatMessage]:
        """The history before the first step: the system prompt and the task."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.task}]

    @property
    def messages(self) -> int:
        """Messages in the full history, the head counted."""
        return 2 + sum(len(step) for step in self.steps)


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


def generate_trace(steps: int, seed: int = CODING_SEED) -> list[list[ChatMessage]]:
    """The coding trace as the messages each step appends: a call, its results, sometimes a
    nudge."""
    rng = random.Random(seed)
    sizes = (40, 90, 160, 300, 500)
    files = {f"src/report/{name}.py": rng.choice(sizes) for name in words(rng, 24)}
    contents = {path: source_file(rng, lines) for path, lines in files.items()}
    paths = list(files)
    trace: list[list[ChatMessage]] = []
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
        appended: list[ChatMessage] = [
            {"role": "assistant", "content": thought, "tool_calls": calls}
        ]
        appended += results
        if step % 37 == 36:
            appended.append(
                {"role": "user", "content": f"You have taken {step + 1} steps. Keep it focused."}
            )
        trace.append(appended)
    return trace


SLOW_TOOLS = {"run_tests": (5.0, 40.0), "run_build": (10.0, 40.0), "ci_logs": (1.0, 6.0)}
"""Tool time ranges in seconds; every other tool takes 0.1 to 3 s."""


def step_tools(step: Sequence[ChatMessage]) -> list[str]:
    """The tool names a step calls."""
    names: list[str] = []
    for message in step:
        for call in message.get("tool_calls") or ():
            names.append(str(call["function"]["name"]))
    return names


def clock(
    steps: Sequence[Sequence[ChatMessage]], seed: int, pauses: Sequence[int] = ()
) -> list[float]:
    """When each step's request is sent: the model's latency plus the slowest call's tool time,
    plus 6 to 12 minutes before each step in `pauses`."""
    rng = random.Random(seed)
    now = 0.0
    times: list[float] = []
    for index, step in enumerate(steps):
        latency = min(25.0, max(2.0, rng.lognormvariate(1.9, 0.55)))
        tool_time = 0.0
        for name in step_tools(step):
            low, high = SLOW_TOOLS.get(name, (0.1, 3.0))
            tool_time = max(tool_time, rng.uniform(low, high))
        now += latency + tool_time
        if index in pauses:
            now += rng.uniform(360.0, 720.0)
        times.append(round(now, 3))
    return times


def sift_settings(ceiling: int) -> SiftSettings:
    """The sift held to `ceiling` as docs/sift.md recommends: the budget half of it, the net's
    bound (0.8 of the window) the ceiling itself, a cut down to 0.4 of the window."""
    return SiftSettings(
        budget=ceiling // 2,
        window=ceiling * 5 // 4,
        overflow_target_fraction=0.4,
        read_targets={"read_file": "path"},
    )


def coding_trace() -> Trace:
    """The 300-step coding session at a 32k ceiling."""
    steps = generate_trace(300)
    return Trace(
        name="coding",
        key="coding",
        system=CODING_SYSTEM,
        task=CODING_TASK,
        tools=CODING_TOOLS,
        steps=steps,
        times=clock(steps, CODING_CLOCK_SEED),
        ceiling=32_000,
        settings=sift_settings(32_000),
    )


LONG_SYSTEM = (
    "You are an autonomous engineer on the payments service, a large Python and TypeScript "
    "monorepo. Work through the tools: read and search the code, run the tests and the build, "
    "query the internal APIs, and edit files. Prefer many parallel reads and searches when you "
    "explore. Run the relevant tests after every change and explain what you found. "
) * 6
LONG_TASK = (
    "CI has been red on main since the dependency upgrade in #4812: the settlement tests fail "
    "intermittently and the web build warns about a changed API. Find the regression, fix it, "
    "and get CI green. Report the root cause when you are done."
)
LONG_TOOLS = function_tools(
    (
        ("read_file", "Read a file of the repository.", ("path",)),
        ("grep", "Search the repository for a pattern.", ("pattern", "path")),
        ("list_dir", "List a directory.", ("path",)),
        ("edit_file", "Replace a span of a file.", ("path", "old", "new")),
        ("run_tests", "Run tests: a directory, a file or a test id.", ("target",)),
        ("run_build", "Build one package of the monorepo.", ("package",)),
        ("http_get", "GET an internal API endpoint; returns its JSON.", ("url",)),
        ("ci_logs", "Wait for the CI run of a commit and return its log.", ("commit",)),
    )
)
MODULES = (
    "settlement",
    "ledger",
    "payouts",
    "fx",
    "invoices",
    "refunds",
    "webhooks",
    "risk",
    "accounts",
    "reconcile",
)
LONG_STEP_CHARS = 240_000
"""The harness caps one step's combined tool output at this many characters."""


class LongSession:
    """Content of the long-outputs session: a fixed repository, read again and again."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.small_files: dict[str, str] = {}
        self.large_files: dict[str, str] = {}
        for module in MODULES:
            for name in words(rng, 3):
                path = f"services/{module}/{name}.py"
                self.small_files[path] = source_file(rng, rng.randrange(3, 25))
        for module in MODULES:
            for name in words(rng, 2):
                path = f"services/{module}/{name}_core.py"
                self.large_files[path] = source_file(rng, self._lines(12_000, 110_000))
        self.hot = rng.sample(sorted(self.large_files), 4) + rng.sample(sorted(self.small_files), 8)
        """The files the session keeps coming back to."""

    def _lines(self, low: int, high: int) -> int:
        """Source lines for a file of about low to high characters (log-uniform)."""
        chars = low * (high / low) ** self.rng.random()
        return int(chars / 42)

    def long_chars(self) -> int:
        """The size of a long output: 10k to 120k characters, log-uniform."""
        return int(10_000 * 12 ** self.rng.random())

    def read(self, large: bool) -> tuple[dict[str, Any], str]:
        rng = self.rng
        pool = self.large_files if large else self.small_files
        hot = [path for path in self.hot if path in pool]
        path = rng.choice(hot) if hot and rng.random() < 0.5 else rng.choice(sorted(pool))
        return {"path": path}, pool[path]

    def grep(self) -> tuple[dict[str, Any], str]:
        rng = self.rng
        paths = sorted(self.small_files) + sorted(self.large_files)
        pattern = rng.choice(("settle_batch", "Decimal(", "round_half", "fx_rate", "retry", "TODO"))
        scope = rng.choice(("services/", f"services/{rng.choice(MODULES)}/"))
        hits = [
            f"{rng.choice(paths)}:{rng.randrange(2000)}: {' '.join(words(rng, 5))} {pattern}"
            for _ in range(rng.randrange(1, 20))
        ]
        return {"pattern": pattern, "path": scope}, "\n".join(hits)

    def list_dir(self) -> tuple[dict[str, Any], str]:
        module = self.rng.choice(MODULES)
        names = [
            path
            for path in sorted(self.small_files) + sorted(self.large_files)
            if f"/{module}/" in path
        ]
        return {"path": f"services/{module}"}, "\n".join(names)

    def edit(self) -> tuple[dict[str, Any], str]:
        rng = self.rng
        path = rng.choice(self.hot)
        old, new = " ".join(words(rng, 3)), " ".join(words(rng, 5))
        return {"path": path, "old": old, "new": new}, f"edited {path}: 1 span replaced"

    def test_log(self, chars: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        module = rng.choice(MODULES[:4])
        target = rng.choice((f"services/{module}/tests/", "services/", f"services/{module}/"))
        lines: list[str] = [f"============ test session starts: {target} ============"]
        size = 0
        failed = 0
        while size < chars:
            name = "_".join(words(rng, 2))
            if rng.random() < 0.02:
                failed += 1
                block = [f"{target}test_{name}.py::test_{name} FAILED"]
                block += [f"    {' '.join(words(rng, 7))}" for _ in range(rng.randrange(8, 30))]
                block.append("E   AssertionError: Decimal('10.005') != Decimal('10.01')")
            else:
                block = [f"{target}test_{name}.py::test_{name} PASSED"]
            lines += block
            size += sum(len(line) + 1 for line in block)
        lines.append(f"======= {failed} failed, {len(lines) - 1 - failed} passed =======")
        head = "Error: tests failed\n" if failed else ""
        return {"target": target}, head + "\n".join(lines)

    def build_log(self, chars: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        package = rng.choice(("web", "api-client", "dashboard", "sdk"))
        lines = [f"> build {package}"]
        size = 0
        while size < chars:
            file = "/".join(words(rng, 3))
            if rng.random() < 0.1:
                line = f"warning: {file}.ts: `formatAmount` is deprecated; use `formatMoney`"
            else:
                line = f"compiled {file}.ts in {rng.randrange(2, 900)} ms"
            lines.append(line)
            size += len(line) + 1
        lines.append("build finished with warnings")
        return {"package": package}, "\n".join(lines)

    def api_dump(self, chars: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        resource = rng.choice(("settlements", "payouts", "ledger/entries", "fx/rates"))
        records: list[dict[str, Any]] = []
        size = 0
        while size < chars:
            record = {
                "id": f"{resource.split('/')[0][:3]}_{rng.randrange(10**9)}",
                "amount": f"{rng.randrange(10**7) / 100:.2f}",
                "currency": rng.choice(("EUR", "USD", "GBP", "JPY")),
                "status": rng.choice(("settled", "pending", "failed")),
                "batch": "_".join(words(rng, 2)),
            }
            records.append(record)
            size += len(json.dumps(record)) + 4
        return {"url": f"https://internal/api/v2/{resource}?since=-7d"}, json.dumps(
            {"data": records, "count": len(records)}, indent=1
        )

    def ci_log(self, commit: str, chars: int) -> tuple[dict[str, Any], str]:
        _, log = self.test_log(chars)
        return {"commit": commit}, f"CI run for {commit}\n{log}"


def long_call(session: LongSession, room: int) -> tuple[str, dict[str, Any], str]:
    """One call of the long-outputs session: its tool, arguments and output."""
    rng = session.rng
    kind = rng.choices(
        ("read_small", "read_large", "grep", "list_dir", "edit", "tests", "build", "api"),
        (28, 13, 22, 6, 8, 11, 4, 7),
    )[0]
    chars = min(session.long_chars(), room)
    if kind == "read_large" and room >= 110_000:
        return "read_file", *session.read(True)
    if kind in ("read_small", "read_large"):
        return "read_file", *session.read(False)
    if kind == "grep":
        return "grep", *session.grep()
    if kind == "list_dir":
        return "list_dir", *session.list_dir()
    if kind == "edit":
        return "edit_file", *session.edit()
    if room < 10_000:
        return "grep", *session.grep()
    if kind == "tests":
        return "run_tests", *session.test_log(chars)
    if kind == "build":
        return "run_build", *session.build_log(chars)
    return "http_get", *session.api_dump(chars)


def long_step(
    session: LongSession, step: int, pause: str | None, total_steps: int
) -> list[ChatMessage]:
    """One step: 1 to 10 parallel calls (wide fan-outs of reads and greps now and then)."""
    rng = session.rng
    calls: list[dict[str, Any]] = []
    results: list[ChatMessage] = []
    room = LONG_STEP_CHARS
    picks: list[tuple[str, dict[str, Any], str]] = []
    if pause == "ci":
        commit = f"{rng.randrange(16**7):07x}"
        picks.append(("ci_logs", *session.ci_log(commit, min(session.long_chars(), room))))
    elif rng.random() < 0.12:
        for _ in range(rng.randrange(8, 11)):
            picks.append(
                ("read_file", *session.read(False))
                if rng.random() < 0.6
                else ("grep", *session.grep())
            )
    else:
        count = min(10, max(1, round(rng.gammavariate(2.2, 1.45))))
        for _ in range(count):
            picks.append(long_call(session, room))
            room = max(0, room - len(picks[-1][2]))
    for part, (tool, args, output) in enumerate(picks):
        call_id = f"call_{step:03d}_{part}"
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)},
            }
        )
        results.append({"role": "tool", "tool_call_id": call_id, "content": output})
    thought = f"Step {step}: {' '.join(words(rng, rng.randrange(4, 30)))}."
    appended: list[ChatMessage] = [{"role": "assistant", "content": thought, "tool_calls": calls}]
    appended += results
    if step % 40 == 39:
        appended.append(
            {
                "role": "user",
                "content": f"You have taken {step + 1} of {total_steps} steps. Stay on the "
                "regression; do not refactor.",
            }
        )
    if pause == "human":
        appended.append(
            {
                "role": "user",
                "content": "Reviewer here: the rounding change looks right, but keep the old "
                "behaviour for JPY, which has no minor unit. Carry on.",
            }
        )
    return appended


def long_outputs_trace(steps: int = 220) -> Trace:
    """The long-outputs session at a 100k ceiling."""
    rng = random.Random(LONG_SEED)
    session = LongSession(rng)
    pauses = {61: "ci", 127: "human", 183: "ci"}
    trace = [long_step(session, step, pauses.get(step), steps) for step in range(steps)]
    return Trace(
        name="long-outputs",
        key="long_outputs",
        system=LONG_SYSTEM,
        task=LONG_TASK,
        tools=LONG_TOOLS,
        steps=trace,
        times=clock(trace, LONG_CLOCK_SEED, sorted(pauses)),
        ceiling=100_000,
        settings=sift_settings(100_000),
        pauses=sorted(pauses),
    )


TRACES: tuple[Callable[[], Trace], ...] = (coding_trace, long_outputs_trace)
