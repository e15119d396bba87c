"""``lahar simulate`` on a dump with a 3-tier HyperNode tree: jobs with networkTopology are placed
as Volcano's allocate places them (pkg/scheduler/actions/allocate/allocate_test.go
TestAllocateWithNetWorkTopologies: a hard job stays inside one HyperNode of tier ≤
highestTierAllowed, the lowest tier that can hold it first), and a refusal names the tier and the
HyperNodes tried."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_simulate_dumps import Run

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""


def node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def hypernode(name: str, tier: int, members: list[str], member_type: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def gang(name: str, n: int, tier: int, created: str) -> list[dict[str, Any]]:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
        "spec": {"minMember": n, "queue": "default", "networkTopology": {"mode": "hard", "highestTierAllowed": tier}},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": "ml",
                "creationTimestamp": created,
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
            },
        }
        for i in range(n)
    ]
    return [pg, *pods]


def tree(node_docs: Callable[[str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """spine (tier 3) > pod-a, pod-b (tier 2) > leaves a1, a2, b1, b2 (tier 1) > 2 nodes each,
    each node's objects from ``node_docs``."""
    docs: list[dict[str, Any]] = []
    for leaf in ("a1", "a2", "b1", "b2"):
        names = [f"{leaf}-n1", f"{leaf}-n2"]
        for n in names:
            docs += node_docs(n)
        docs.append(hypernode(leaf, 1, names, "Node"))
    docs += [hypernode("pod-a", 2, ["a1", "a2"], "HyperNode"), hypernode("pod-b", 2, ["b1", "b2"], "HyperNode")]
    docs.append(hypernode("spine", 3, ["pod-a", "pod-b"], "HyperNode"))
    return docs


def cluster() -> list[dict[str, Any]]:
    return tree(lambda n: [node(n)])


@pytest.fixture
def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path, capsys)


def test_three_tier_tree_places_and_explains_by_tier(simulate: Run, tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    docs = [
        *cluster(),
        *gang("leaf", 2, 1, "2024-01-01T00:00:00Z"),  # fits one leaf (2 nodes of 4 cpu)
        *gang("rack", 4, 2, "2024-01-01T00:00:01Z"),  # needs a whole tier-2 pod: pod-b is free
        *gang("wide", 3, 1, "2024-01-01T00:00:02Z"),  # no leaf holds 3 tasks
    ]
    code, out, _ = simulate(docs, "--conf", str(conf))
    assert code == 0, simulate.stderr
    binds = out["binds"]
    leaf = {binds[f"ml/leaf-{i}"].split("-")[0] for i in range(2)}
    rack = {binds[f"ml/rack-{i}"][0] for i in range(4)}
    assert len(leaf) == 1  # one leaf
    assert rack == {"b"} or (rack == {"a"} and leaf <= {"b1", "b2"})  # one tier-2 pod, not the leaf's
    assert not any(k.startswith("ml/wide-") for k in binds)
    why = out["conditions"]["ml/wide"]
    assert "network-topology-aware" in why
    assert "no single hypernode of tier <= 1 can hold 3 tasks" in why


def test_table_output_names_the_tier(simulate: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lahar.cli.main import main

    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    import yaml

    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump_all([*cluster(), *gang("wide", 3, 1, "2024-01-01T00:00:00Z")]))
    with pytest.raises(SystemExit):
        main(["simulate", str(f), "--conf", str(conf)])
    out = capsys.readouterr().out
    assert "ml/wide" in out and "tier <= 1" in out


def test_explain_lists_each_hypernode_tried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from lahar.cli.main import main

    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    default = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump_all([*cluster(), default, *gang("wide", 3, 1, "2024-01-01T00:00:00Z")]))
    with pytest.raises(SystemExit):
        main(["explain", "podgroup", "ml/wide", "-f", str(f), "--conf", str(conf)])
    out = capsys.readouterr().out
    assert "plugin network-topology-aware" in out
    for leaf in ("a1", "a2", "b1", "b2"):
        assert f"tier 1 hypernode {leaf}: 2 of 3 pending tasks fit, 3 needed" in out
    assert "raise highestTierAllowed" in out


def partitioned(name: str, parts: int, size: int, tier: int, created: str) -> list[dict[str, Any]]:
    """A gang split into ``parts`` sub-groups of ``size`` (volcano.sh/partition-id), each hard at
    ``tier``, as the controller renders a Job task's partitionPolicy."""
    docs = gang(name, parts * size, 3, created)
    docs[0]["spec"]["subGroupPolicy"] = [
        {
            "name": "worker",
            "subGroupSize": size,
            "minSubGroups": parts,
            "matchLabelKeys": ["volcano.sh/partition-id"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": tier},
        }
    ]
    for i, pod in enumerate(docs[1:]):
        pod["metadata"]["labels"] = {"volcano.sh/partition-id": str(i // size)}
    return docs


def test_sub_groups_each_inside_one_leaf_and_refusal_explained(simulate: Run, tmp_path: Path) -> None:
    # allocate_test.go TestAllocateWithPartitionPolicyNetworkTopology on a dump: "train" has
    # partitions of 2 that each need one leaf; "huge" has partitions of 3, which no leaf holds.
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    docs = [
        *cluster(),
        *partitioned("train", 3, 2, 1, "2024-01-01T00:00:00Z"),
        *partitioned("huge", 1, 3, 1, "2024-01-01T00:00:01Z"),
    ]
    code, out, _ = simulate(docs, "--conf", str(conf))
    assert code == 0, simulate.stderr
    binds = out["binds"]
    leaves = [{binds[f"ml/train-{2 * p + i}"].split("-")[0] for i in range(2)} for p in range(3)]
    assert all(len(one) == 1 for one in leaves) and len(set().union(*leaves)) == 3
    assert not any(k.startswith("ml/huge-") for k in binds)
    why = out["conditions"]["ml/huge"]
    assert "sub-group policy: the job's 1 sub-group could not be placed together" in why
