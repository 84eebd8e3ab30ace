"""Every command line the README and docs show names a satchel command, flag, benchmark or
driver that exists, and runs satchel and Python as they are installed in the project (`bash
scripts/satchel ...`, `.venv/bin/satchel ...`, `.venv/bin/python`), so it works from the project
root."""

from __future__ import annotations

import re
from pathlib import Path

from doc_cli import cli_problems, every_flag, flag
from doc_pages import (
    ROOT,
    Invocation,
    inline_spans,
    module_path,
    pages,
    satchel_args,
    shell_invocations,
)


def command_problems(call: Invocation) -> list[str]:
    """How a shell block's command line would not work as written from the project root."""
    program, args = call.program, call.args
    problems: list[str] = []
    if Path(program).name == "satchel" and satchel_args(call) is None:
        problems.append(f"`{program}`: write .venv/bin/satchel or bash scripts/satchel")
    if program in ("python", "python3", "pip", "pip3"):
        problems.append(f"`{program}`: write .venv/bin/{program}")
    if program.startswith("bash ") and not (ROOT / program.removeprefix("bash ")).is_file():
        problems.append(f"`{program}` names no script")
    if not program.endswith("python") or not args:
        return problems
    if args[0].endswith(".py") and not (ROOT / args[0]).is_file():
        problems.append(f"{args[0]} does not exist")
    module = args[1] if args[0] == "-m" and len(args) > 1 else ""
    if module.startswith("satchel.") and module_path(module) is None:
        problems.append(f"no module {module}")
    return problems


def test_every_shell_command_runs_satchel_and_python_from_the_project() -> None:
    wrong = [f"{call.where}: {p}" for call in shell_invocations() for p in command_problems(call)]
    assert not wrong, "\n".join(wrong)


def test_the_shell_blocks_run_satchel() -> None:
    """The parse finds the commands it checks (a guard that checks nothing would pass too)."""
    found = [satchel_args(call) for call in shell_invocations()]
    commands = {args[0] for args in found if args}
    assert {"serve", "tokens", "conformance", "worker"} <= commands


def test_every_satchel_command_in_a_shell_block_exists() -> None:
    wrong = [
        f"{call.where}: {problem}"
        for call in shell_invocations()
        if (args := satchel_args(call)) is not None
        for problem in cli_problems(args)
    ]
    assert not wrong, "\n".join(wrong)


SATCHEL_SPAN = re.compile(r"(?:bash scripts/|\.venv/bin/)?satchel ((?:[a-z|\[-]).*)")


def test_every_satchel_command_in_the_prose_exists() -> None:
    wrong: list[str] = []
    checked = 0
    for page in pages():
        for line, span in inline_spans(page):
            if found := SATCHEL_SPAN.fullmatch(span):
                checked += 1
                wrong += [f"{page.where(line)}: {p}" for p in cli_problems(found.group(1).split())]
    assert checked > 20
    assert not wrong, "\n".join(wrong)


def test_every_flag_named_alone_in_the_prose_exists() -> None:
    wrong = [
        f"{page.where(line)}: no command has {flag(span.split()[0])}"
        for page in pages()
        for line, span in inline_spans(page)
        if re.fullmatch(r"--[a-z][\w-]*(=\S*)?( \S+)?", span)
        and flag(span.split()[0]) not in every_flag()
    ]
    assert not wrong, "\n".join(wrong)


def test_a_renamed_flag_or_command_would_be_caught() -> None:
    assert cli_problems(["serve", "--role", "api", "--port", "8080"]) == []
    assert cli_problems(["serve", "--roles", "api"]) == ["`satchel serve` has no --roles"]
    assert cli_problems(["tokens", "remove", "x"]) == ["`satchel tokens remove` is not a command"]
    assert cli_problems(["bench", "turns", "--repeats", "5"]) == [
        "benchmarks/turns.py has no --repeats"
    ]
    assert cli_problems(["conformance", "--driver", "langchain"]) == [
        "no shipped driver 'langchain'"
    ]
    assert cli_problems(["tokens", "list|revoke"]) == []
    assert "--data-dir" in every_flag() and "--data-directory" not in every_flag()
    assert "--list-breaks" in every_flag() and "--warmup" in every_flag()
