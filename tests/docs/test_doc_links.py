"""Every relative link (and its `#anchor`) and every repository path in inline code exists, and
every Python block compiles with its `satchel` imports (and `python -m satchel...` modules)
resolving."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from doc_pages import REPO_DIRS, ROOT, inline_spans, module_path, pages, read_page


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
