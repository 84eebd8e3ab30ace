"""The providers' import graph: no cycle, families apart, and nothing of satchel but `turns`."""

from __future__ import annotations

from functools import cache

import grimp
import pytest

PACKAGE = "satchel.providers"
FAMILIES = ("chat", "responses", "anthropic", "google")


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("satchel")


def imports(module: str) -> set[str]:
    return set(graph().find_modules_directly_imported_by(module))


def providers_modules() -> list[str]:
    return sorted(m for m in graph().modules if m == PACKAGE or m.startswith(f"{PACKAGE}."))


def test_providers_import_nothing_of_satchel_but_turns() -> None:
    for module in providers_modules():
        outside = {
            m
            for m in imports(module)
            if m.startswith("satchel.")
            and not m.startswith((f"{PACKAGE}.", "satchel.turns"))
            and m != PACKAGE
        }
        assert not outside, f"{module} imports {sorted(outside)}"


def test_there_is_no_import_cycle_in_the_providers() -> None:
    modules = providers_modules()
    edges = {m: {n for n in imports(m) if n in modules} for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in edges[module]:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_imports_the_kit_and_itself_only(family: str) -> None:
    prefix = f"{PACKAGE}.{family}"
    for module in providers_modules():
        if module != prefix and not module.startswith(f"{prefix}."):
            continue
        others = {
            m
            for m in imports(module)
            if m.startswith(f"{PACKAGE}.")
            and not m.startswith((f"{prefix}.", f"{PACKAGE}.kit"))
            and m != prefix
        }
        assert not others, f"{module} imports {sorted(others)}"


def test_profiles_import_no_adapter_module() -> None:
    family_modules = {m for m in imports(f"{PACKAGE}.profiles") if m.startswith(f"{PACKAGE}.")}
    assert family_modules <= {f"{PACKAGE}.registry", f"{PACKAGE}.kit.spec"}


def test_the_kit_imports_no_family() -> None:
    for module in providers_modules():
        if module.startswith(f"{PACKAGE}.kit"):
            leaked = {m for m in imports(module) if m.startswith(f"{PACKAGE}.") and ".kit" not in m}
            assert not leaked, f"{module} imports {sorted(leaked)}"
