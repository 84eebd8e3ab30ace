"""The sift's timings live on one page, docs/benchmarks.md: the README and docs/sift.md point
there rather than quote a timing that would drift from it."""

from __future__ import annotations

import re

from doc_pages import ROOT, pages

TIMING = re.compile(r"\b\d[\d.,]*\s?(?:ms|µs)\b")
FIGURES = ROOT / "docs" / "benchmarks.md"
POINTING = (ROOT / "README.md", ROOT / "docs" / "sift.md")


def test_the_readme_and_the_sift_page_quote_no_timing() -> None:
    quoted = [
        f"{page.where(page.prose.count(chr(10), 0, found.start()) + 1)}: {found.group(0)}"
        for page in pages()
        if page.path in POINTING
        for found in TIMING.finditer(page.prose)
    ]
    assert not quoted, "\n".join(quoted)


def test_the_benchmarks_page_holds_the_sifts_worst_call() -> None:
    prose = next(page.prose for page in pages() if page.path == FIGURES)
    assert re.search(r"sift, ms a call: mean / worst", prose)
