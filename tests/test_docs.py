"""README and docs/ stay true to the code: examples run, commands and flags exist, links resolve.

- Every example in docs/examples that needs no server runs to completion, and
  `turns_offline.py` prints exactly the output the README shows; the README's turn-state snippet
  itself runs against the offline example's scripted model server.
- Every command line in a fenced `bash` block runs satchel as `bash scripts/satchel ...` or
  `.venv/bin/satchel ...` (and Python as `.venv/bin/python`), so it works from the project root.
- Every satchel subcommand and flag named in a code block or an inline code span exists in the
  matching `satchel ... --help`; a benchmark's flags exist in its script; a shipped driver's name
  is in `satchel conformance --list-drivers`.
- Every relative link (and its `#anchor`) and every repository path in inline code exists, and
  every `satchel` import or `python -m satchel...` module in the pages resolves.
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

import satchel.providers
from satchel.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = ROOT / "docs" / "examples"
SRC = ROOT / "src"
SHELL = {"bash", "sh", "shell", "console"}
NEEDS_DEPLOYMENT = {
    "conformance_driver": "a conformance driver: run by `satchel conformance` (tests/conformance)",
    "memory_agent_framework": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_langgraph": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_openai_agents": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
    "memory_pydantic_ai": "needs SATCHEL_MEMORY_URL and SATCHEL_TOKEN",
}
SHELL_KEYWORDS = {"until", "while", "do", "done", "if", "then", "else", "fi", "!", "time"}
SEPARATORS = set("();<>|&\n")
REPO_DIRS = ("src/", "docs/", "tests/", "benchmarks/", "scripts/")
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str


@dataclass(frozen=True)
class Page:
    path: Path
    blocks: tuple[Block, ...]
    prose: str  # the page with every fenced block blanked out

    def where(self, line: int) -> str:
        return f"{self.path.relative_to(ROOT)}:{line}"


def read_page(path: Path) -> Page:
    """A page's fenced blocks (dedented, with their info string) and the prose around them."""
    blocks: list[Block] = []
    prose: list[str] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    index = 0
    while index < len(lines):
        opening = re.match(r"\s*(`{3,})(\S*)", lines[index])
        if not opening:
            prose.append(lines[index])
            index += 1
            continue
        fence, lang, start = opening.group(1), opening.group(2).lower(), index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index])
            index += 1
        blocks.append(Block(path, start + 1, lang, textwrap.dedent("\n".join(body))))
        prose.extend([""] * (index - start + 1))
        index += 1
    return Page(path, tuple(blocks), "\n".join(prose))


@cache
def pages() -> tuple[Page, ...]:
    return tuple(read_page(path) for path in PAGES)


# --- shell command lines ---------------------------------------------------------------------


def strip_comments(script: str) -> str:
    """The script without its `#` comments (quotes respected)."""
    out: list[str] = []
    quote = ""
    previous = "\n"
    skipping = False
    for char in script:
        if skipping:
            if char == "\n":
                skipping = False
                out.append(char)
            previous = char
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and previous.isspace():
            skipping = True
            continue
        out.append(char)
        previous = char
    return "".join(out)


def simple_commands(script: str) -> Iterator[list[str]]:
    """Each simple command of a shell script as its words, assignments and keywords dropped."""
    lexer = shlex.shlex(
        strip_comments(script.replace("\\\n", " ")), posix=True, punctuation_chars="();<>|&\n"
    )
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    for token in [*lexer, "\n"]:
        if set(token) <= SEPARATORS:
            while words and (
                words[0] in SHELL_KEYWORDS or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0], re.S)
            ):
                words.pop(0)
            if words:
                yield words
            words = []
        else:
            words.append(token)


@dataclass(frozen=True)
class Invocation:
    """One command line of a shell block: the program as written and what it was given."""

    program: str
    args: list[str]
    where: str


def shell_invocations() -> Iterator[Invocation]:
    for page in pages():
        for block in page.blocks:
            if block.lang in SHELL:
                for words in simple_commands(block.text):
                    if words[0] == "bash" and len(words) > 1:
                        yield Invocation(f"bash {words[1]}", words[2:], page.where(block.line))
                    else:
                        yield Invocation(words[0], words[1:], page.where(block.line))


def satchel_args(invocation: Invocation) -> list[str] | None:
    """What a satchel command line gives the CLI, or None when it does not run satchel."""
    if invocation.program in ("bash scripts/satchel", ".venv/bin/satchel"):
        return invocation.args
    if invocation.program.endswith("python") and invocation.args[:2] == ["-m", "satchel"]:
        return invocation.args[2:]
    return None


# --- the satchel CLI, as its --help tells it -----------------------------------------------

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


# --- Python: modules and names ---------------------------------------------------------------


def module_path(dotted: str) -> Path | None:
    """The source file of a `satchel...` module, or None when there is none."""
    base = SRC.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return frozenset(names)


def import_problems(code: str) -> list[str]:
    problems: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("satchel"):
            module = node.module or ""
            path = module_path(module)
            if path is None:
                problems.append(f"no module {module}")
                continue
            for alias in node.names:
                if alias.name not in top_level_names(path) and not module_path(
                    f"{module}.{alias.name}"
                ):
                    problems.append(f"{module} has no {alias.name}")
        elif isinstance(node, ast.Import):
            problems += [
                f"no module {a.name}"
                for a in node.names
                if a.name.startswith("satchel") and not module_path(a.name)
            ]
    return problems


# --- the checks --------------------------------------------------------------------------------


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


def inline_spans(page: Page) -> Iterator[tuple[int, str]]:
    """Inline code spans of the prose, and those inside unlabelled blocks (diagrams)."""
    for found in re.finditer(r"(?<!`)`([^`]+)`(?!`)", page.prose):
        line = page.prose.count("\n", 0, found.start()) + 1
        yield line, " ".join(found.group(1).split())
    for block in page.blocks:
        if block.lang in ("", "text"):
            for offset, text in enumerate(block.text.splitlines()):
                for span in re.findall(r"`([^`]+)`", text):
                    yield block.line + 1 + offset, span


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


def anchors(path: Path) -> set[str]:
    """The `#anchors` GitHub gives a page's headings."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", read_page(path).prose, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_every_relative_link_points_at_something_that_exists() -> None:
    wrong: list[str] = []
    checked = 0
    for page in pages():
        prose = re.sub(r"`[^`]*`", "", page.prose)
        links = re.findall(r"\]\(([^)\s]+)\)", prose)
        links += re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", prose, re.M)
        for link in links:
            if re.match(r"[a-z][\w+.-]*:", link):
                continue
            checked += 1
            target, _, anchor = link.partition("#")
            path = (page.path.parent / target).resolve() if target else page.path
            if not path.exists():
                wrong.append(f"{page.path.relative_to(ROOT)}: {link} does not exist")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                wrong.append(f"{page.path.relative_to(ROOT)}: {link} has no such heading")
    assert checked > 30
    assert not wrong, "\n".join(wrong)


def test_every_repository_path_in_the_prose_exists() -> None:
    wrong: list[str] = []
    for page in pages():
        for line, span in inline_spans(page):
            candidate = span.split()[0].rstrip(".,:;")
            placeholder = re.search(r"[*{<]|[A-Z]{3,}", candidate)
            real = candidate.startswith(REPO_DIRS) and not placeholder
            if real and not (ROOT / candidate).exists():
                wrong.append(f"{page.where(line)}: {candidate} does not exist")
    assert not wrong, "\n".join(wrong)


def test_every_python_block_compiles_and_its_satchel_imports_resolve() -> None:
    wrong: list[str] = []
    for page in pages():
        for block in page.blocks:
            if block.lang != "python":
                continue
            try:
                compile(block.text, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            except SyntaxError as error:
                wrong.append(f"{page.where(block.line)}: {error}")
                continue
            wrong += [f"{page.where(block.line)}: {p}" for p in import_problems(block.text)]
        for line, span in inline_spans(page):
            found = re.fullmatch(r"(?:\.venv/bin/)?python -m (satchel[\w.]*)\b.*", span)
            if found and module_path(found.group(1)) is None:
                wrong.append(f"{page.where(line)}: no module {found.group(1)}")
    assert not wrong, "\n".join(wrong)


# --- the examples ------------------------------------------------------------------------------


def example_names() -> list[str]:
    return sorted(path.stem for path in EXAMPLES.glob("*.py"))


def readme_offline_output() -> str:
    """The output the README shows under its `turns_offline.py` command."""
    blocks = read_page(README).blocks
    for index, block in enumerate(blocks):
        if block.lang in SHELL and "docs/examples/turns_offline.py" in block.text:
            shown = blocks[index + 1]
            assert shown.lang == "text", "the README shows the output in a `text` block next"
            return shown.text.strip("\n") + "\n"
    raise AssertionError("the README does not run docs/examples/turns_offline.py")


def test_the_examples_left_out_here_exist() -> None:
    """Only the examples that need a deployment are left out, and each of them exists."""
    assert set(NEEDS_DEPLOYMENT) <= set(example_names())
    assert "turns_offline" in example_names()


def test_the_examples_that_need_no_server_run_to_completion() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    runs = {
        name: subprocess.Popen(
            [sys.executable, str(EXAMPLES / f"{name}.py")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in example_names()
        if name not in NEEDS_DEPLOYMENT
    }
    printed: dict[str, str] = {}
    for name, run in runs.items():
        try:
            out, err = run.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            pytest.fail(f"docs/examples/{name}.py did not finish")
        assert run.returncode == 0, f"docs/examples/{name}.py failed:\n{err}"
        assert out.strip(), f"docs/examples/{name}.py printed nothing"
        printed[name] = out
    assert printed["turns_offline"] == readme_offline_output()


def test_the_readme_turn_snippet_runs_against_the_offline_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snippet = next(
        block.text
        for block in read_page(README).blocks
        if block.lang == "python" and "Session(" in block.text
    )
    offline = runpy.run_path(str(EXAMPLES / "turns_offline.py"), run_name="turns_offline")
    monkeypatch.setattr(
        satchel.providers, "build_adapter", lambda profile, **_: offline["offline_adapter"](profile)
    )
    exec(compile(snippet, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert printed.startswith("ACTION1 2 Usage(input_tokens=100, output_tokens=20,"), printed
