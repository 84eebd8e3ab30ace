"""No import cycle anywhere in `src/satchel`, module by module.

`lint-imports` (run by `bash scripts/test` with the contracts in `.importlinter`) checks the
rules between parts and between packages; this test checks the finer grain: no two modules,
however far apart, import each other through any chain, counting imports inside functions and
under `TYPE_CHECKING`.
"""

from __future__ import annotations

import grimp


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The groups of two or more modules that import each other (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            module, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append(
                        (
                            successor,
                            iter(sorted(graph.find_modules_directly_imported_by(successor))),
                        )
                    )
                    advanced = True
                    break
                if successor in on_stack:
                    low[module] = min(low[module], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a.d", imported="a.b")
    assert strongly_connected(graph) == [["a.b", "a.c"]]


def test_no_module_of_satchel_is_part_of_an_import_cycle() -> None:
    graph = grimp.build_graph("satchel", cache_dir=None)
    cycles = strongly_connected(graph)
    assert cycles == [], "modules that import each other: " + "; ".join(
        " <-> ".join(group) for group in cycles
    )
