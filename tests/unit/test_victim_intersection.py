"""A tier's victims (framework/points.py): each permitting plugin's list intersects the running
list, unless it names the very same tasks in the same order (then the list stands as it is).
Against the plain intersection, on random tiers: lists of equal, reordered, fewer or other
tasks, abstentions, empty lists (a veto), an empty intersection (Volcano's re-seed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lahar_scheduler.framework.points import tier_victims, victim_intersection
from lahar_scheduler.framework.types import Vote

TASKS = [SimpleNamespace(name=f"t{i}") for i in range(6)]


def plain(fns: list[Any], args: tuple[Any, ...]) -> list[Any] | None:
    victims: list[Any] | None = None
    init = False
    for fn in fns:
        got, v = fn(*args)
        if v == Vote.ABSTAIN:
            continue
        if not got:
            return None
        if not init:
            victims = list(got)
            init = True
        else:
            keep = {id(t) for t in got}
            victims = [t for t in victims or [] if id(t) in keep]
        if not victims:
            init = False
    return victims


answers = st.tuples(
    st.lists(st.sampled_from(TASKS), max_size=6),
    st.sampled_from([Vote.PERMIT, Vote.PERMIT, Vote.ABSTAIN]),
)


@st.composite
def tiers(draw: st.DrawFn) -> list[list[Any]]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        tier = []
        for _ in range(draw(st.integers(0, 4))):
            got, vote = draw(answers)
            if draw(st.booleans()):  # the candidates as they came: the same list again
                got = list(TASKS[: draw(st.integers(1, 6))])
            tier.append(lambda *_, got=got, vote=vote: (list(got), vote))
        out.append(tier)
    return out


@settings(max_examples=400, deadline=None, derandomize=True)
@given(tiers())
def test_a_tier_intersects_as_the_plain_loop(chain: list[list[Any]]) -> None:
    for tier in chain:
        assert tier_victims(tier, ()) == plain(tier, ())
    want: list[Any] = []
    for tier in chain:
        got = plain(tier, ())
        if got:
            want = got
            break
    assert victim_intersection(chain, ()) == want
