"""The documentation as the doc tests read it: pages, their fenced blocks and inline code spans,
the command lines of their shell blocks, and where a `satchel` module's source lives."""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = ROOT / "docs" / "examples"
SRC = ROOT / "src"
SHELL = {"bash", "sh", "shell", "console"}
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


def module_path(dotted: str) -> Path | None:
    """The source file of a `satchel...` module, or None when there is none."""
    base = SRC.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None
