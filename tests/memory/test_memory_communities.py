"""Communities: the same graph, whatever the order its facts come in, gives the same communities
and ids; every community is a partition's part of two or more entities inside its parent."""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from satchel.memory.formation.communities import communities, community_id

NODES = [uuid.UUID(int=n) for n in range(1, 13)]
edges = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(NODES), st.integers(1, 3)),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(edges, st.randoms(use_true_random=False))
def test_the_same_graph_gives_the_same_communities(
    found: list[tuple[uuid.UUID, uuid.UUID, int]], shuffler: random.Random
) -> None:
    shuffled = [(b, a, w) if shuffler.random() < 0.5 else (a, b, w) for a, b, w in found]
    shuffler.shuffle(shuffled)
    first, again = communities(found), communities(shuffled)
    assert first == again
    by_id = {c.id: c for c in first}
    for community in first:
        assert len(community.members) >= 2
        assert community.id == community_id(community.level, reversed(community.members))
        if community.parent is not None:
            assert set(community.members) < set(by_id[community.parent].members)
    for level in {c.level for c in first}:
        members = [m for c in first if c.level == level for m in c.members]
        assert len(members) == len(set(members))  # disjoint at one level
