"""The examples in docs/examples run as written."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[2] / "docs" / "examples").glob("sift_*.py"))


def test_every_integration_has_an_example() -> None:
    assert {path.stem for path in EXAMPLES} >= {"sift_basic", "sift_langchain", "sift_pydantic_ai"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_the_example_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(path), run_name="__main__")
    printed = capsys.readouterr().out
    assert printed.strip()
    if path.stem == "sift_basic":
        assert "trims: token_budget" in printed and "extends the previous request: True" in printed
    if path.stem == "sift_langchain":
        assert "[receipt call_0: read_log(day=0) OK:" in printed
    if path.stem == "sift_pydantic_ai":
        assert "messages in the run's history: 32" in printed
