"""The satchel CLI as its `--help` tells it: which subcommands and flags a documented command line
names that the CLI, a benchmark script or the shipped drivers do not have."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache

from doc_pages import PLACEHOLDER, ROOT, SRC, module_path
from typer.testing import CliRunner

from satchel.cli import app

runner = CliRunner()


@dataclass(frozen=True)
class Help:
    options: frozenset[str]
    commands: frozenset[str]


@cache
def help_of(path: tuple[str, ...]) -> Help | None:
    """The options and subcommands `satchel <path> --help` lists, or None for no such command."""
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    if result.exit_code != 0:
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    options = frozenset(re.findall(r"(?<![\w-])--[a-z][\w-]*", text))
    commands: set[str] = set()
    section = False
    for line in text.splitlines():
        if re.match(r"\s*(╭─ )?Commands\b", line):
            section = True
        elif section and (not line.strip() or line.lstrip().startswith("╰")):
            section = False
        elif section and (found := re.match(r"(?:│ | {2})([a-z][\w-]*)(?:\s{2,}|\s*│?$)", line)):
            commands.add(found.group(1))
    return Help(options, frozenset(commands))


@cache
def shipped_drivers() -> frozenset[str]:
    result = runner.invoke(app, ["conformance", "--list-drivers"])
    assert result.exit_code == 0, result.output
    return frozenset(line.split("\t")[0] for line in result.output.splitlines() if line)


def benchmark_flags(name: str) -> set[str] | None:
    script = ROOT / "benchmarks" / f"{name}.py"
    if not script.is_file():
        return None
    return set(re.findall(r"""["'](--[a-z][\w-]*)["']""", script.read_text(encoding="utf-8")))


def cli_problems(args: list[str]) -> list[str]:
    """What in `satchel ARGS` the CLI does not have: a subcommand, a flag, a benchmark, a driver.

    Upper-case words (NAME, DIR) are placeholders; `a|b` offers alternatives; `[...]` is optional.
    """
    words = [word.strip("[]") for word in args if word.strip("[]")]
    path: tuple[str, ...] = ()
    index = 0
    while True:
        known = help_of(path)
        assert known is not None, path
        if not known.commands or index >= len(words) or words[index].startswith("-"):
            break
        if PLACEHOLDER.fullmatch(words[index]):
            return []
        choices = words[index].split("|")
        missing = [c for c in choices if help_of((*path, c)) is None or c not in known.commands]
        if missing:
            return [f"`satchel {' '.join((*path, *missing))}` is not a command"]
        if len(choices) > 1:
            return [p for c in choices for p in cli_problems([*path, c, *words[index + 1 :]])]
        path += (choices[0],)
        index += 1
    rest = words[index:]
    problems: list[str] = []
    if path == ("bench",) and rest and not rest[0].startswith("-"):
        name, extra = rest[0], rest[1:]
        if PLACEHOLDER.fullmatch(name):
            return []
        flags = benchmark_flags(name)
        if flags is None:
            return [f"`satchel bench {name}`: no benchmarks/{name}.py"]
        return [
            f"benchmarks/{name}.py has no {flag(w)}"
            for w in extra
            if w.startswith("--") and flag(w) not in flags
        ]
    options = help_of(path)
    assert options is not None
    for position, word in enumerate(rest):
        if word.startswith("--") and flag(word) not in options.options:
            problems.append(f"`satchel {' '.join(path)}` has no {flag(word)}")
        if word == "--driver" and position + 1 < len(rest):
            problems += driver_problems(rest[position + 1])
    return problems


def flag(word: str) -> str:
    return word.split("=", 1)[0]


def driver_problems(driver: str) -> list[str]:
    """A driver is a shipped name, or a command line whose script or module exists."""
    if PLACEHOLDER.fullmatch(driver):
        return []
    if " " not in driver:
        return [] if driver in shipped_drivers() else [f"no shipped driver {driver!r}"]
    words = shlex.split(driver)
    if words[0] == "python" and words[1:2] == ["-m"]:
        return [] if module_path(words[2]) else [f"driver module {words[2]} does not exist"]
    if words[0] == "python" and not (ROOT / words[1]).is_file():
        return [f"driver script {words[1]} does not exist"]
    return []


@cache
def every_flag() -> frozenset[str]:
    """Every flag of every satchel command, benchmark and module command line."""
    found: set[str] = set()
    pending: list[tuple[str, ...]] = [()]
    while pending:
        path = pending.pop()
        known = help_of(path)
        assert known is not None
        found |= known.options
        pending += [(*path, command) for command in known.commands]
    scripts = [*(ROOT / "benchmarks").glob("*.py"), *SRC.rglob("*.py")]
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        found.update(re.findall(r"""add_argument\(\s*["'](--[a-z][\w-]*)["']""", text))
    return frozenset(found)
