"""The README's set-up installs what every documented command needs: `bash scripts/satchel` runs
`scripts/bootstrap serve`, and the set-up block's `bash scripts/bootstrap LEVEL` lines install
more; together their install specs must hold the extra each shown satchel command checks for
(`satchel.cli.extras.require`, and a shipped conformance driver's framework), so no command shown
after the set-up stops on a missing extra.
"""

from __future__ import annotations

import ast
import re

from doc_cli import flag
from doc_pages import ROOT, SRC, inline_spans, pages, satchel_args, shell_invocations

from satchel.cli.extras import EXTRA_MODULES
from satchel.conformance.drivers import SHIPPED

SETUP_LEVEL = "serve"
"""The level of `scripts/bootstrap` that `bash scripts/satchel` installs."""


def bootstrap_extras(level: str) -> set[str]:
    """The extras `scripts/bootstrap LEVEL` installs, read from its `LEVEL) spec=".[...]"` line."""
    script = (ROOT / "scripts" / "bootstrap").read_text(encoding="utf-8")
    found = re.search(rf'^\s*{level}\) spec="\.\[([\w,]+)\]"', script, re.M)
    assert found, f"scripts/bootstrap has no {level} level"
    return set(found.group(1).split(","))


def extra_of_command() -> dict[tuple[str, ...], str]:
    """Each command that checks for an extra: the `require(EXTRA, COMMAND)` calls of the CLI."""
    needs: dict[tuple[str, ...], str] = {}
    for module in (SRC / "satchel" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "require"
                and all(isinstance(arg, ast.Constant) for arg in node.args)
            ):
                extra, command = (ast.literal_eval(arg) for arg in node.args)
                needs[tuple(command.split())] = extra
    for driver in SHIPPED:
        if driver.extra is not None:
            needs[("conformance", "--driver", driver.name)] = driver.extra
    return needs


def setup_extras() -> set[str]:
    """The extras the README's set-up block installs: `bash scripts/satchel` at SETUP_LEVEL, and
    each `bash scripts/bootstrap LEVEL` line of the block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "bash scripts/satchel" in block, "the README's first shell block is its set-up"
    levels = {SETUP_LEVEL, *re.findall(r"^bash scripts/bootstrap (\w+)", block, re.M)}
    return set().union(*(bootstrap_extras(level) for level in levels))


def shown_commands() -> list[tuple[str, list[str]]]:
    """Every satchel command line of the README and docs: in shell blocks and inline code spans
    written to be run (`.venv/bin/satchel ...`, `bash scripts/satchel ...`)."""
    shown = [
        (call.where, args)
        for call in shell_invocations()
        if (args := satchel_args(call)) is not None
    ]
    for page in pages():
        for line, span in inline_spans(page):
            if found := re.fullmatch(r"(?:\.venv/bin/|bash scripts/)satchel (.+)", span):
                shown.append((page.where(line), found.group(1).split()))
    return shown


def test_the_cli_checks_only_extras_it_knows() -> None:
    needs = extra_of_command()
    assert {
        ("serve",),
        ("run",),
        ("tokens", "create"),
        ("conformance", "--driver", "langgraph"),
    } <= set(needs)
    assert set(needs.values()) <= set(EXTRA_MODULES)


def test_the_setup_level_installs_the_extra_of_every_shown_command() -> None:
    installed = setup_extras()
    needs = extra_of_command()
    missing: list[str] = []
    checked = 0
    for where, args in shown_commands():
        words = tuple(flag(word) for word in args)
        for command, extra in needs.items():
            if words[: len(command)] == command:
                checked += 1
                if extra not in installed:
                    missing.append(f"{where}: satchel {' '.join(command)} needs the {extra} extra")
    assert checked > 10
    assert not missing, f"the README's set-up installs only {installed}:\n" + "\n".join(missing)


def test_the_dev_level_installs_every_extra_through_the_dev_extra() -> None:
    assert bootstrap_extras("dev") == {"dev"}
