"""Saving and restoring the sticky state as JSON."""

import json

import pytest
from sift_runs import TOOLS, replay

from satchel.sift import ContextSift, SiftSettings, SiftState


def test_the_saved_state_holds_everything_a_relaunch_needs() -> None:
    sift = ContextSift(SiftSettings(budget=4000, window=8000, awaited_fraction=1.0))
    for _ in replay(sift, 37):
        pass
    saved = json.loads(sift.save())
    assert set(saved) == {
        "version",
        "task_id",
        "receipts",
        "bounded",
        "limits",
        "artifacts",
        "whole",
        "cut",
        "cut_pinned",
        "previous_length",
        "previous_stable_end",
        "artifact_prefix",
        "children",
    }
    assert saved["task_id"] == "#1" and saved["cut"] is not None
    assert saved["receipts"] and saved["bounded"] and saved["artifacts"]
    assert all(text.startswith("Step ") for _, text in saved["receipts"])
    assert SiftState.from_json(sift.save()) == sift.state


def test_a_restored_sift_continues_with_the_same_request() -> None:
    settings = SiftSettings(budget=4000, window=8000)
    sift = ContextSift(settings)
    *_, (run, _) = replay(sift, 37)
    restored = ContextSift(settings)
    restored.restore(sift.save())
    run.step(500)
    assert restored.sift(run.history, tools=TOOLS) == sift.sift(run.history, tools=TOOLS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "saved sift state is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"version": 2}', "has version 2; expected 1"),
        ('{"version": 1, "receipts": {}}', "`receipts` must be a list"),
        ('{"version": 1, "receipts": [["a"]]}', r"list of \[step id, text\] pairs"),
    ],
)
def test_a_malformed_state_is_refused_with_the_field(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SiftState.from_json(text)


def test_each_field_is_checked() -> None:
    good = json.loads(SiftState(task_id="#1", cut="#5", previous_length=3).to_json())
    for field, value, message in [
        ("bounded", [1], "`bounded` must be a list of strings"),
        ("cut", 5, "`cut` must be a string or null"),
        ("previous_length", "3", "`previous_length` must be an integer or null"),
        ("children", None, "`children` must be an integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            SiftState.from_json(json.dumps(good | {field: value}))
    assert SiftState.from_json(json.dumps(good)) == SiftState(
        task_id="#1", cut="#5", previous_length=3
    )
