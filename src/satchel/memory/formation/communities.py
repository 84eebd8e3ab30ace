"""Communities of entities: the graph joined by current facts, partitioned by networkx's Louvain
method level by level, each community named by its level and sorted members."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

SEED = 40  # Louvain's random order, fixed: the same graph gives the same partition
MAX_MEMBERS = 48  # a community larger than this is no theme: only its finer levels are reported

Edge = tuple[uuid.UUID, uuid.UUID, int]  # two entities and the number of facts joining them


@dataclass(frozen=True, slots=True)
class Community:
    """Entities grouped at `level` (0: the coarsest partition), inside `parent` (the level above's
    community holding them, None at level 0)."""

    id: str
    level: int
    parent: str | None
    members: tuple[uuid.UUID, ...]


def community_id(level: int, members: Iterable[uuid.UUID]) -> str:
    """A name that depends on the level and the member set alone."""
    text = f"{level}:" + ",".join(sorted(str(member) for member in members))
    return "community-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def graph_of(edges: Iterable[Edge]) -> nx.Graph[uuid.UUID]:
    """The weighted graph, its nodes and edges added in sorted order (Louvain's result depends on
    the order, so the same edges always make the same graph)."""
    joined: dict[tuple[uuid.UUID, uuid.UUID], int] = {}
    for one, other, weight in edges:
        if one != other:
            pair = (min(one, other), max(one, other))
            joined[pair] = joined.get(pair, 0) + weight
    graph: nx.Graph[uuid.UUID] = nx.Graph()
    graph.add_nodes_from(sorted({node for pair in joined for node in pair}))
    for (one, other), weight in sorted(joined.items()):
        graph.add_edge(one, other, weight=weight)
    return graph


def communities(edges: Iterable[Edge]) -> list[Community]:
    """Every community of two or more entities at every level, coarsest level first; a finer
    community with the same members as its parent is the parent, not listed again."""
    graph = graph_of(edges)
    if graph.number_of_edges() == 0:
        return []
    levels = [
        [frozenset(part) for part in partition]
        for partition in nx.community.louvain_partitions(graph, weight="weight", seed=SEED)
    ]
    levels.reverse()  # Louvain merges upwards: its last partition is the coarsest
    found: list[Community] = []
    above: dict[uuid.UUID, Community] = {}
    for level, partition in enumerate(levels):
        here: dict[uuid.UUID, Community] = {}
        for part in sorted(partition, key=lambda members: sorted(members)):
            parent = above.get(next(iter(part)))
            if parent is not None and frozenset(parent.members) == part:
                community = parent
            else:
                members = tuple(sorted(part))
                community = Community(
                    community_id(level, members),
                    level,
                    parent.id if parent else None,
                    members,
                )
                if len(members) > 1:
                    found.append(community)
            here.update(dict.fromkeys(part, community))
        above = here
    return found
