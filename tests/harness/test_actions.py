"""`parse_action`: strict JSON first, else the last available action named in free text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from satchel.harness.actions import Action, parse_action
from satchel.turns import InvalidAnswer

NAMES = ["RESET", *(f"ACTION{n}" for n in range(1, 8))]
AVAILABLE = ["ACTION1", "ACTION2", "ACTION6", "RESET"]


def strict(*entries: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"actions": list(entries), **extra})


# --- the strict JSON path -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (strict({"action_type": "ACTION1"}), Action("ACTION1")),
        (strict({"action_type": "ACTION2"}), Action("ACTION2")),
        (strict({"action_type": "RESET"}), Action("RESET")),
        (strict({"action_type": "ACTION6", "x": 12, "y": 40}), Action("ACTION6", 12, 40)),
        (strict({"action_type": "ACTION6", "x": 0, "y": 0}), Action("ACTION6", 0, 0)),
        (strict({"action_type": "ACTION6", "x": 63, "y": 63}), Action("ACTION6", 63, 63)),
        (strict({"y": 7, "x": 3, "action_type": "ACTION6"}), Action("ACTION6", 3, 7)),
        ("\n  " + strict({"action_type": "ACTION1"}) + "  \n", Action("ACTION1")),
        (json.dumps({"actions": [{"action_type": "ACTION2"}]}, indent=2), Action("ACTION2")),
        (
            "Let me think.\n```json\n" + strict({"action_type": "ACTION2"}) + "\n```\nDone.",
            Action("ACTION2"),
        ),
        (
            "```\n" + strict({"action_type": "ACTION6", "x": 5, "y": 9}) + "\n```",
            Action("ACTION6", 5, 9),
        ),
        (
            # the last fenced block is the answer
            "```json\n"
            + strict({"action_type": "ACTION1"})
            + "\n```\nNo, rather:\n```json\n"
            + strict({"action_type": "ACTION2"})
            + "\n```",
            Action("ACTION2"),
        ),
    ],
)
def test_a_strict_json_answer_is_parsed(text: str, expected: Action) -> None:
    assert parse_action(text, AVAILABLE) == expected


INVALID_STRICT = {
    "two entries": strict({"action_type": "ACTION1"}, {"action_type": "ACTION2"}),
    "zero entries": strict(),
    "actions not a list": json.dumps({"actions": {"action_type": "ACTION1"}}),
    "entry not an object": json.dumps({"actions": ["ACTION1"]}),
    "extra top-level key": strict({"action_type": "ACTION1"}, why="it is left"),
    "no actions key": json.dumps({"action": [{"action_type": "ACTION1"}]}),
    "extra entry key": strict({"action_type": "ACTION1", "note": "left"}),
    "extra key on ACTION6": strict({"action_type": "ACTION6", "x": 1, "y": 2, "z": 3}),
    "missing x": strict({"action_type": "ACTION6", "y": 2}),
    "missing y": strict({"action_type": "ACTION6", "x": 2}),
    "missing x and y": strict({"action_type": "ACTION6"}),
    "x and y on a simple action": strict({"action_type": "ACTION1", "x": 1, "y": 2}),
    "x on a simple action": strict({"action_type": "ACTION2", "x": 1}),
    "bool x": strict({"action_type": "ACTION6", "x": True, "y": 2}),
    "bool y": strict({"action_type": "ACTION6", "x": 2, "y": False}),
    "float x": strict({"action_type": "ACTION6", "x": 12.0, "y": 2}),
    "fractional y": strict({"action_type": "ACTION6", "x": 12, "y": 2.5}),
    "string x": strict({"action_type": "ACTION6", "x": "12", "y": 2}),
    "null y": strict({"action_type": "ACTION6", "x": 12, "y": None}),
    "list x": strict({"action_type": "ACTION6", "x": [12], "y": 2}),
    "x below range": strict({"action_type": "ACTION6", "x": -1, "y": 2}),
    "x above range": strict({"action_type": "ACTION6", "x": 64, "y": 2}),
    "y above range": strict({"action_type": "ACTION6", "x": 2, "y": 1000}),
    "unknown action_type": strict({"action_type": "ACTION9"}),
    "lowercase action_type": strict({"action_type": "action1"}),
    "made-up action_type": strict({"action_type": "JUMP"}),
    "numeric action_type": strict({"action_type": 1}),
    "no action_type": strict({"name": "ACTION1"}),
    "action not available": strict({"action_type": "ACTION3"}),
    "coordinate action not available": strict({"action_type": "ACTION7"}),
    "fenced two entries": "```json\n"
    + strict({"action_type": "ACTION1"}, {"action_type": "ACTION2"})
    + "\n```\nI pick ACTION1.",
    "fenced extra key": "```json\n" + strict({"action_type": "ACTION1", "why": "x"}) + "\n```",
    "fenced unavailable": "I pick ACTION2.\n```json\n"
    + strict({"action_type": "ACTION3"})
    + "\n```",
    "fenced out of range": "```json\n"
    + strict({"action_type": "ACTION6", "x": 64, "y": 1})
    + "\n```",
    "JSON array": "[1, 2]",
    "JSON number": "42",
    "JSON null": "null",
    "JSON string": '"left"',
    "JSON true": "true",
    "empty object": "{}",
    "empty text": "",
    "whitespace only": "  \n\t ",
}


@pytest.mark.parametrize("text", list(INVALID_STRICT.values()), ids=list(INVALID_STRICT))
def test_an_answer_that_breaks_the_strict_format_is_invalid(text: str) -> None:
    with pytest.raises(InvalidAnswer):
        parse_action(text, AVAILABLE)


def test_an_unavailable_reset_is_invalid_in_json() -> None:
    with pytest.raises(InvalidAnswer):
        parse_action(strict({"action_type": "RESET"}), ["ACTION1", "ACTION2"])


def test_a_json_answer_that_fails_does_not_fall_back_to_the_names_in_it() -> None:
    # The free-text rule would find ACTION2 in it, but a JSON object is judged as JSON only.
    text = strict({"action_type": "ACTION1", "note": "ACTION2"})
    with pytest.raises(InvalidAnswer):
        parse_action(text, AVAILABLE)


# --- the free-text fallback -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "available", "expected"),
    [
        ("I will press ACTION2.", AVAILABLE, Action("ACTION2")),
        ("ACTION1 first? No: ACTION2 is better.", AVAILABLE, Action("ACTION2")),
        ("ACTION2, then again ACTION1", AVAILABLE, Action("ACTION1")),
        ("ACTION1 would work; ACTION3 is not offered", AVAILABLE, Action("ACTION1")),
        ("ACTION1, or ACTION3, or ACTION7", AVAILABLE, Action("ACTION1")),
        ("ACTION6 12 40", AVAILABLE, Action("ACTION6", 12, 40)),
        ("I click ACTION6 0 63 now", AVAILABLE, Action("ACTION6", 0, 63)),
        ("ACTION6 12, 40", AVAILABLE, Action("ACTION6", 12, 40)),
        ("ACTION6\t5\t6", AVAILABLE, Action("ACTION6", 5, 6)),
        ("ACTION1 or ACTION6 8 9", AVAILABLE, Action("ACTION6", 8, 9)),
        ("ACTION6 8 9 or ACTION1", AVAILABLE, Action("ACTION1")),
        ("ACTION6 8 9, not ACTION3", AVAILABLE, Action("ACTION6", 8, 9)),
        ("RESET", AVAILABLE, Action("RESET")),
        ("ACTION1? RESET.", AVAILABLE, Action("RESET")),
        ("RESET is not offered, so ACTION2", ["ACTION2"], Action("ACTION2")),
        ("ACTION2, or RESET if it were offered", ["ACTION2"], Action("ACTION2")),
        ("ACTION1.", AVAILABLE, Action("ACTION1")),
        ("(ACTION2)", AVAILABLE, Action("ACTION2")),
        ('{"actions": [{"action_type": "ACTION1"}], }', AVAILABLE, Action("ACTION1")),  # bad JSON
    ],
)
def test_free_text_answers_with_the_last_available_action_named(
    text: str, available: list[str], expected: Action
) -> None:
    assert parse_action(text, available) == expected


@pytest.mark.parametrize(
    ("text", "available"),
    [
        ("I will press ACTION6.", AVAILABLE),
        ("ACTION6 12", AVAILABLE),
        ("ACTION6 at 12 40", AVAILABLE),
        ("ACTION1 then ACTION6", AVAILABLE),  # the last available mention has no coordinates
        ("ACTION6 64 3", AVAILABLE),
        ("ACTION6 3 99", AVAILABLE),
        ("ACTION6 -1 5", AVAILABLE),
        ("action1", AVAILABLE),
        ("Action2 please", AVAILABLE),
        ("reset", AVAILABLE),
        ("ACTION12", AVAILABLE),
        ("XACTION1", AVAILABLE),
        ("ACTION1x", AVAILABLE),
        ("ACTION3", AVAILABLE),
        ("ACTION7 or ACTION3", AVAILABLE),
        ("RESET", ["ACTION1", "ACTION2"]),
        ("Let us RESET.", ["ACTION6"]),
        ("I have no idea what to do.", AVAILABLE),
        ("ACTION1", []),
        ("ACTION6 \u0661\u0662 \u0663", AVAILABLE),  # Arabic-Indic digits are not coordinates
    ],
)
def test_free_text_without_an_available_action_is_invalid(text: str, available: list[str]) -> None:
    with pytest.raises(InvalidAnswer):
        parse_action(text, available)


# --- properties -----------------------------------------------------------------------------

coordinate = st.integers(min_value=0, max_value=63)


@st.composite
def offered_and_chosen(draw: st.DrawFn) -> tuple[list[str], Action]:
    available = draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    name = draw(st.sampled_from(available))
    if name == "ACTION6":
        return available, Action(name, draw(coordinate), draw(coordinate))
    return available, Action(name)


def rendering(action: Action) -> dict[str, Any]:
    entry: dict[str, Any] = {"action_type": action.name}
    if action.name == "ACTION6":
        entry |= {"x": action.x, "y": action.y}
    return {"actions": [entry]}


@given(offered_and_chosen(), st.sampled_from(["plain", "indented", "fenced", "padded"]))
def test_the_strict_rendering_of_an_available_action_parses_back_to_it(
    case: tuple[list[str], Action], style: str
) -> None:
    available, action = case
    document = rendering(action)
    text = {
        "plain": json.dumps(document),
        "indented": json.dumps(document, indent=4),
        "fenced": f"Thinking.\n```json\n{json.dumps(document)}\n```",
        "padded": f"\n\n {json.dumps(document, separators=(',', ':'))} \n",
    }[style]
    assert parse_action(text, available) == action


def check_answer(text: str, available: list[str]) -> None:
    try:
        action = parse_action(text, available)
    except InvalidAnswer:
        return
    assert isinstance(action, Action)
    assert action.name in available
    if action.name == "ACTION6":
        assert type(action.x) is int and type(action.y) is int
        assert 0 <= action.x <= 63 and 0 <= action.y <= 63
    else:
        assert action.x is None and action.y is None


available_lists = st.lists(st.sampled_from(NAMES), unique=True)


@given(st.text(), available_lists)
def test_arbitrary_text_is_an_available_action_or_invalid(text: str, available: list[str]) -> None:
    check_answer(text, available)


TOKENS = [
    *NAMES,
    "action1",
    " ",
    "\t",
    "\n",
    ",",
    "0",
    "7",
    "12",
    "63",
    "64",
    "-3",
    "1.5",
    "{",
    "}",
    "[",
    "]",
    ":",
    '"',
    '"actions"',
    '"action_type"',
    '"x"',
    '"y"',
    "true",
    "null",
    "```",
    "```json",
    '{"actions": [{"action_type": "ACTION6", "x": ',
    '{"actions": [{"action_type": "ACTION1"}]}',
]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join), available_lists)
def test_text_made_of_answer_fragments_is_an_available_action_or_invalid(
    text: str, available: list[str]
) -> None:
    check_answer(text, available)


# Answers a model could send, on which the parser must answer InvalidAnswer (a retry) and not
# crash the game with another exception.


def test_deeply_nested_json_is_invalid_not_a_crash() -> None:
    text = '{"actions": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(InvalidAnswer):
        parse_action(text, AVAILABLE)


def test_a_coordinate_with_thousands_of_digits_is_invalid_not_a_crash() -> None:
    with pytest.raises(InvalidAnswer):
        parse_action("ACTION6 " + "1" * 5000 + " 2", AVAILABLE)
