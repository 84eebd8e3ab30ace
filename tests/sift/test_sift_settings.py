"""The sift refuses settings it cannot honour, with a message naming the values and the fix."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from satchel.sift import ContextSift, SiftSettings


@pytest.mark.parametrize("given_settings", [{"budget": 1000}, None, 1000])
def test_the_sift_takes_a_settings_object_and_says_so(given_settings: object) -> None:
    with pytest.raises(TypeError) as raised:
        ContextSift(given_settings)  # type: ignore[arg-type]
    message = str(raised.value)
    assert type(given_settings).__name__ in message
    assert "SiftSettings(budget=" in message
    assert "\n" not in message


def test_a_mapping_of_settings_is_pointed_at_the_keyword_form() -> None:
    with pytest.raises(TypeError, match=re.escape("SiftSettings(**settings)")):
        ContextSift({"budget": 1000})  # type: ignore[arg-type]


def test_a_budget_past_the_window_is_refused_naming_both() -> None:
    with pytest.raises(ValueError) as raised:
        SiftSettings(budget=32_000, window=16_000)
    message = str(raised.value)
    assert "budget (32000)" in message and "window (16000)" in message


def test_the_output_reserve_counts_against_the_window() -> None:
    with pytest.raises(ValueError, match=r"output_reserve \(2000\)"):
        SiftSettings(budget=15_000, window=16_000, output_reserve=2000)
    assert SiftSettings(budget=14_000, window=16_000, output_reserve=2000).usable_window == 14_000


@given(
    budget=st.integers(0, 10**7),
    window=st.none() | st.integers(1, 10**7),
    reserve=st.integers(0, 10**6),
)
def test_settings_are_accepted_exactly_when_the_budget_fits_the_usable_window(
    budget: int, window: int | None, reserve: int
) -> None:
    fits = window is None or (window > reserve and budget <= window - reserve)
    try:
        settings = SiftSettings(budget=budget, window=window, output_reserve=reserve)
    except ValueError as refused:
        assert not fits
        assert str(window) in str(refused)
        assert "\n" not in str(refused)
    else:
        assert fits
        assert settings.usable_window is None or settings.budget <= settings.usable_window
