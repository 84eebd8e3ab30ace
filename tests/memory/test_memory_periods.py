"""The calendar periods a question names, for passage search."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from satchel.memory.passages.periods import named_periods


def day(year: int, month: int, number: int) -> datetime:
    return datetime(year, month, number, tzinfo=UTC)


@pytest.mark.parametrize(
    "question",
    [
        "What did Maria plan on 7 July, 2023?",
        "What happened on July 7, 2023?",
        "And on the 7th of July 2023?",
        "Anything on Jul. 7th, 2023?",
        "What was logged for 2023-07-07?",
    ],
)
def test_a_named_day_is_that_day(question: str) -> None:
    assert named_periods(question) == [(day(2023, 7, 7), day(2023, 7, 8))]


def test_a_named_month_is_the_whole_month_and_december_ends_the_year() -> None:
    assert named_periods("What did Dave take up in October 2023?") == [
        (day(2023, 10, 1), day(2023, 11, 1))
    ]
    assert named_periods("Plans for December, 2022?") == [(day(2022, 12, 1), day(2023, 1, 1))]


def test_an_impossible_day_counts_as_its_month() -> None:
    assert named_periods("What happened on 31 February, 2023?") == [
        (day(2023, 2, 1), day(2023, 3, 1))
    ]


def test_days_win_over_months_and_every_day_counts() -> None:
    periods = named_periods("Between 3 August, 2023 and August 9, 2023, in August 2023?")
    assert periods == [(day(2023, 8, 3), day(2023, 8, 4)), (day(2023, 8, 9), day(2023, 8, 10))]


@pytest.mark.parametrize(
    "question",
    [
        "What may Nate cook next?",
        "When did Jon open the studio?",
        "Which year did Audrey adopt the dogs?",
        "What was logged for 2023-13-01?",
    ],
)
def test_no_real_date_names_no_period(question: str) -> None:
    assert named_periods(question) == []
