"""The browser the page tests use: it runs, and it notices what a page should not do."""

from __future__ import annotations

from browser_kit import Watched


def test_a_request_off_the_machine_is_refused_and_noted(watched: Watched) -> None:
    watched.page.set_content('<p id="text">kept</p><img src="http://192.0.2.1/pixel.png">')
    watched.page.wait_for_timeout(200)
    assert watched.page.inner_text("#text") == "kept"
    assert watched.refused == ["http://192.0.2.1/pixel.png"]
    try:
        watched.assert_only_loopback()
    except AssertionError:
        pass
    else:
        raise AssertionError("a request off the machine passed the loopback check")


def test_a_script_that_runs_is_noticed(watched: Watched) -> None:
    watched.page.set_content("<script>console.log('ran'); alert('ran')</script>")
    assert watched.dialogs == ["ran"]
    assert watched.console == ["log: ran"]
