"""Sub-group policies on random clusters: whatever allocate binds respects every constraint.

Invariants from Volcano's allocate (allocateForJob / allocateForSubJob): a job with a hard
``networkTopology`` has all its placed tasks inside one HyperNode of tier <= its limit; each
sub-group with a hard limit likewise inside one HyperNode of tier <= its own; a job that binds
anything binds at least minMember and has at least ``minSubGroups`` sub-groups whole.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import hypernode, make_conf, node, only, pod, podgroup, queue, snapshot
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.hypernodes import HyperNodeTree

GANG = only(
    "gang", "enableJobOrder", "enableJobReady", "enableJobPipelined", "enabledSubJobReady", "enabledSubJobOrder"
)
CONF = make_conf(
    "allocate",
    [GANG, only("predicates", "enablePredicate")],
    [only("network-topology-aware", "enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")],
)
KEY = "volcano.sh/partition-id"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """Leaves of 1-3 nodes under 1-2 tier-2 HyperNodes; 1-3 jobs of partitions."""
    objs: list[Any] = [queue("q1")]
    spines: dict[str, list[str]] = defaultdict(list)
    for leaf in range(draw(st.integers(2, 5))):
        names = [f"l{leaf}-n{i}" for i in range(draw(st.integers(1, 3)))]
        objs += [node(n, cpu=str(draw(st.sampled_from([2, 4]))), memory="16Gi") for n in names]
        objs.append(hypernode(f"l{leaf}", 1, nodes=names))
        spines[f"s{draw(st.integers(0, 1))}"].append(f"l{leaf}")
    objs += [hypernode(s, 2, hypernodes=leaves) for s, leaves in spines.items()]
    jobs: dict[str, dict[str, Any]] = {}
    for j in range(draw(st.integers(1, 3))):
        parts, size = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        sub_tier = draw(st.sampled_from([None, 1, 2]))
        job_tier = draw(st.sampled_from([None, 2, 3]))
        min_groups = draw(st.integers(0, parts))
        policy: dict[str, Any] = {
            "name": "p",
            "subGroupSize": size,
            "minSubGroups": min_groups,
            "matchLabelKeys": [KEY],
        }
        if sub_tier is not None:
            policy["networkTopology"] = {"mode": "hard", "highestTierAllowed": sub_tier}
        topology = {"mode": "hard", "highestTierAllowed": job_tier} if job_tier is not None else None
        min_member = draw(st.integers(1, parts * size))
        objs.append(
            podgroup(f"j{j}", queue="q1", min_member=min_member, network_topology=topology, sub_group_policy=[policy])
        )
        for t in range(parts * size):
            labels = {KEY: str(t // size)}
            objs.append(pod(f"j{j}-{t}", group=f"j{j}", cpu=str(draw(st.sampled_from([1, 2]))), labels=labels))
        jobs[f"default/j{j}"] = {
            "sub_tier": sub_tier,
            "job_tier": job_tier,
            "size": size,
            "min_groups": min_groups,
            "min_member": min_member,
        }
    return objs, jobs


def lowest_holding(tree: HyperNodeTree, nodes: set[str]) -> int:
    """The tier of the lowest HyperNode holding all ``nodes``."""
    found = ""
    for n in nodes:
        found = tree.lca(found, tree.leaf_of(n))
    return tree.tier(found)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_bound_sub_groups_respect_their_topology(case: tuple[list[Any], dict[str, dict[str, Any]]]) -> None:
    objs, jobs = case
    snap = snapshot(objs)
    result = run_session(snap, CONF, seed=0)
    tree = snap.hypernodes
    by_job: dict[str, dict[str, str]] = defaultdict(dict)
    for task, where in result.binds:
        by_job[task.job][task.name] = where
    for uid, placed in by_job.items():
        spec = jobs[uid]
        assert len(placed) >= spec["min_member"], (uid, placed)
        if spec["job_tier"] is not None:
            assert lowest_holding(tree, set(placed.values())) <= spec["job_tier"], (uid, placed)
        groups: dict[str, set[str]] = defaultdict(set)
        for name, where in placed.items():
            groups[str(int(name.rsplit("-", 1)[1]) // spec["size"])].add(where)
        if spec["sub_tier"] is not None:
            for part, nodes in groups.items():
                assert lowest_holding(tree, nodes) <= spec["sub_tier"], (uid, part, nodes)
        whole = sum(
            1
            for part in groups
            if sum(1 for n in placed if int(n.rsplit("-", 1)[1]) // spec["size"] == int(part)) >= spec["size"]
        )
        assert whole >= spec["min_groups"], (uid, placed)
