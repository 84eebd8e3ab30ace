"""The reference integration passes every shipped case, and the suite catches every switch that
breaks one of its rules (a mutation test of the suite itself)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conformance_kit import failed_cases
from satchel.conformance.cases import Case, load_cases
from satchel.conformance.deployment import Deployment
from satchel.conformance.reference.breaks import BREAKS, Break
from satchel.conformance.runner import CaseResult, run_suite

REFERENCE = [sys.executable, "-m", "satchel.conformance.reference"]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return load_cases()


def _run(command: list[str], cases: list[Case], deployment: Deployment) -> list[CaseResult]:
    results = run_suite(command, cases, api=deployment.api, token=deployment.token)
    assert [r.case for r in results] == [c.name for c in cases]
    crashed = [f for r in results for f in r.failures if f.startswith("driver:")]
    assert not crashed, crashed
    return results


def test_the_reference_passes_every_shipped_case(deployment: Deployment) -> None:
    assert failed_cases("reference", deployment) == {}


@pytest.mark.parametrize("switch", BREAKS, ids=[b.name for b in BREAKS])
def test_the_suite_catches_the_broken_variant(
    deployment: Deployment, cases: list[Case], switch: Break
) -> None:
    results = _run([*REFERENCE, "--break", switch.name], cases, deployment)
    failed = {r.case: r for r in results if not r.passed}
    assert failed, f"no case caught {switch.name!r} ({switch.rule})"
    rules = {c.name: c.rule for c in cases}
    for name in switch.caught_by:
        assert name in failed, f"{name} did not catch {switch.name!r}; failed: {sorted(failed)}"
        assert failed[name].rule == rules[name]
        assert failed[name].failures


def test_every_case_named_in_the_table_is_shipped(cases: list[Case]) -> None:
    shipped = {c.name for c in cases}
    assert {name for b in BREAKS for name in b.caught_by} - shipped == set()


def test_every_shipped_case_catches_some_switch(cases: list[Case]) -> None:
    catching = {name for b in BREAKS for name in b.caught_by}
    assert [c.name for c in cases if c.name not in catching] == []


def test_each_switch_has_its_own_name_and_a_rule() -> None:
    names = [b.name for b in BREAKS]
    assert len(set(names)) == len(names)
    assert all(b.rule and b.caught_by for b in BREAKS)


def test_list_breaks_prints_each_switch_and_its_rule() -> None:
    listed = subprocess.run(
        [*REFERENCE, "--list-breaks"], capture_output=True, text=True, check=True, timeout=60
    )
    lines = listed.stdout.splitlines()
    assert lines == [f"{b.name}\t{b.rule}" for b in BREAKS]


def test_an_unknown_switch_is_refused() -> None:
    refused = subprocess.run(
        [*REFERENCE, "--break", "no-such-switch"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert "no-such-switch" in refused.stderr
