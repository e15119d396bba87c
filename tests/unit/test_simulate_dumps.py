"""``lahar simulate`` on real dumps: Volcano's default Queue is added when missing, and everything
it ignores or leaves out is reported, one warning line per kind of problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.cli.main import main

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
}
PREFIX = "lahar simulate: warning: "


def podgroup(
    name: str, queue: str | None = None, *, api: str = "scheduling.volcano.sh/v1beta1", kind: str = "PodGroup"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1}
    if queue is not None:
        spec["queue"] = queue
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


def pod(name: str, group: str | None) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def queue(name: str, weight: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


class Run:
    """``lahar simulate`` run in this process on objects written to a file."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp_path, self.capsys = tmp_path, capsys
        self.file = tmp_path / "dump.yaml"
        self.stderr = ""

    def __call__(
        self, docs: list[dict[str, Any]], *extra: str, case: bool = False
    ) -> tuple[int, dict[str, Any], list[str]]:
        """Exit code, the JSON output and the warning lines on stderr."""
        if case:
            self.file.write_text(
                yaml.safe_dump({"name": "c", "schedulerConf": "actions: enqueue, allocate", "objects": docs})
            )
        else:
            self.file.write_text(yaml.safe_dump_all(docs))
        with pytest.raises(SystemExit) as info:
            main(["simulate", str(self.file), "--output", "json", *extra])
        out, self.stderr = self.capsys.readouterr()
        warnings = [line.removeprefix(PREFIX) for line in self.stderr.splitlines() if line.startswith(PREFIX)]
        return int(info.value.code or 0), json.loads(out) if out else {}, warnings


@pytest.fixture
def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path, capsys)


DEFAULT_NOTE = "no 'default' Queue in the files: added one (weight 1, reclaimable), as a Volcano cluster always has it"


def test_a_dump_without_a_default_queue_gets_one_and_says_so(simulate: Run) -> None:
    code, out, warnings = simulate([NODE, podgroup("pg"), pod("p", "pg")])
    assert code == 0
    assert out["binds"] == {"ml/p": "n1"}  # schedulable only because the queue was added
    assert warnings == [DEFAULT_NOTE]
    assert out["warnings"] == warnings


def test_a_default_queue_in_the_dump_is_kept_and_nothing_is_said(simulate: Run) -> None:
    code, out, warnings = simulate([NODE, queue("default", 3), podgroup("pg"), pod("p", "pg")])
    assert (code, out["binds"], warnings, out["warnings"]) == (0, {"ml/p": "n1"}, [], [])


def test_a_conformance_case_gets_no_default_queue(simulate: Run) -> None:
    # A case reproduces a Volcano unit test's cache, which holds exactly the queues it lists.
    code, out, warnings = simulate([NODE, podgroup("pg"), pod("p", "pg")], case=True)
    assert code == 0 and out["binds"] == {}
    assert warnings == ["queue 'default' is not in the files: 1 PodGroup in it is not scheduled: ml/pg"]


def test_misspelled_kinds_and_old_groups_are_reported_with_their_place(simulate: Run) -> None:
    docs = [
        NODE,
        queue("default"),
        podgroup("typo", kind="Podgroup"),
        podgroup("old", api="scheduling.incubator.k8s.io/v1alpha1"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ml"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1", "namespace": "ml"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2", "namespace": "ml"}},
        {"metadata": {"name": "nothing"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k8s-job", "namespace": "ml"}},
    ]
    code, out, warnings = simulate(docs)
    f = simulate.file
    assert code == 0
    assert warnings == [
        "ignored 1 object of kind 'Podgroup' apiVersion 'scheduling.volcano.sh/v1beta1' "
        f"(not a kind Lahar reads: did you mean 'PodGroup'?): ml/typo, first in {f}: document 3",
        "ignored 1 object of kind 'PodGroup' apiVersion 'scheduling.incubator.k8s.io/v1alpha1' "
        "(scheduling.incubator.k8s.io is kube-batch's group; Lahar reads PodGroup from scheduling.volcano.sh): "
        f"ml/old, first in {f}: document 4",
        "ignored 1 object of kind '(none)' apiVersion '(none)' (no apiVersion or kind): "
        f"nothing, first in {f}: document 8",
        "ignored 4 objects of kinds the scheduler does not read: "
        "2 Deployment (apps/v1), 1 Service (v1), 1 Job (batch/v1)",
    ]
    assert out["warnings"] == warnings


def test_many_ignored_objects_are_one_line_with_a_count(simulate: Run) -> None:
    docs = [NODE, queue("default"), *(podgroup(f"pg{i}", kind="podgroup") for i in range(7))]
    _, _, warnings = simulate(docs)
    assert warnings == [
        "ignored 7 objects of kind 'podgroup' apiVersion 'scheduling.volcano.sh/v1beta1' "
        "(not a kind Lahar reads: did you mean 'PodGroup'?): ml/pg0, ml/pg1, ml/pg2, ml/pg3, ml/pg4 and 2 more, "
        f"first in {simulate.file}: document 3"
    ]


def test_missing_podgroups_queues_and_groups_are_reported(simulate: Run) -> None:
    docs = [
        NODE,
        podgroup("ok"),
        podgroup("lost", "research"),
        podgroup("lost2", "research"),
        podgroup("alone", "ops"),
        pod("p-ok", "ok"),
        pod("a1", "gone"),
        pod("a2", "gone"),
        pod("b1", "vanished"),
        pod("bare", None),
    ]
    code, out, warnings = simulate(docs)
    assert code == 0 and out["binds"] == {"ml/p-ok": "n1"}
    assert warnings == [
        DEFAULT_NOTE,
        "3 pods name 2 PodGroups not in the files; their jobs are not scheduled: ml/gone (2 pods), ml/vanished (1 pod)",
        "1 pending pod of scheduler lahar/volcano names no PodGroup (Volcano's controller would make one each; "
        "simulate does not), so it is not scheduled: ml/bare",
        "queue 'ops' is not in the files: 1 PodGroup in it is not scheduled: ml/alone",
        "queue 'research' is not in the files: 2 PodGroups in it are not scheduled: ml/lost, ml/lost2",
    ]


def test_volcano_jobs_and_resource_quotas_are_reported_as_ignored(simulate: Run) -> None:
    docs = [
        NODE,
        queue("default"),
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml"}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq", "namespace": "ml"}},
    ]
    _, _, warnings = simulate(docs)
    assert warnings == [
        "ignored 1 Volcano Job: simulate does not run the job controller, so only the PodGroups and pods "
        "in the files are scheduled: ml/j",
        "ignored 1 ResourceQuota: the configuration does not enable the resourcequota plugin: ml/rq",
    ]


def test_plugins_volcano_has_and_lahar_lacks_are_left_out_with_a_warning(simulate: Run) -> None:
    conf = simulate.tmp_path / "conf.yaml"
    conf.write_text(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: usage\n"
        "- plugins:\n  - name: predicates\n  - name: rescheduling\n"
    )
    code, out, warnings = simulate([NODE, queue("default"), podgroup("pg"), pod("p", "pg")], "--conf", str(conf))
    assert code == 0 and out["binds"] == {"ml/p": "n1"}
    assert warnings == [
        f"{conf}: tiers[0].plugins[1].name: plugin 'usage' is not supported yet "
        "(filters and scores nodes by their measured usage); left out of this run",
        f"{conf}: tiers[1].plugins[1].name: plugin 'rescheduling' is not supported yet "
        "(evicts pods from busy nodes to rebalance (low node utilisation)); left out of this run",
    ]


def test_a_truly_unknown_plugin_is_still_an_error_naming_the_field(simulate: Run) -> None:
    conf = simulate.tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: numa-awarre\n")
    code, out, _ = simulate([NODE], "--conf", str(conf))
    assert code == 2 and out == {}
    assert (
        f"lahar simulate: {conf}: invalid scheduler configuration:\n"
        "  tiers[0].plugins[0].name: unknown plugin 'numa-awarre' (known: " in simulate.stderr
    )


GPU_NUMA_CONF = (
    "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
    "- plugins:\n  - name: predicates\n  - name: deviceshare\n    arguments: {deviceshare.GPUSharingEnable: true}\n"
    "  - name: numa-aware\n"
)


def _limited(p: dict[str, Any], amounts: dict[str, str]) -> dict[str, Any]:
    p["spec"]["containers"][0]["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    return p


def test_gpus_shared_by_memory_and_numa_nodes(simulate: Run) -> None:
    """A dump with a 2-card GPU node (8000 per card, 6000 already used on card 0) and a NUMA node
    (single-numa-node, 4 cpus per NUMA node, cpus 0-1 taken).  Jobs go in name order: big (7000)
    takes card 1, the lowest card with room (gpushare's Allocate); huge (2500) fits no card (2000
    and 1000 free, though 3000 in all); small (2000) fills card 0.  five (5 Guaranteed cpus) fits no single NUMA node
    (2 and 4 free); four fits NUMA node 1.  Each refusal says what the cards and NUMA nodes have
    free; the other node of each kind refuses for lack of cards or NUMA information."""
    simulate.tmp_path.joinpath("conf.yaml").write_text(GPU_NUMA_CONF)
    gpu = {"cpu": "32", "memory": "64Gi", "pods": "110", "volcano.sh/gpu-memory": "16000", "volcano.sh/gpu-number": "2"}
    numa_node = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "g1"},
            "status": {"allocatable": gpu, "capacity": gpu},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "c1"},
            "status": {"allocatable": numa_node, "capacity": numa_node},
        },
        {
            "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
            "kind": "Numatopology",
            "metadata": {"name": "c1"},
            "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                "numares": {"cpu": {"allocatable": "2-7", "capacity": 8}},
                "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c} for c in range(8)},
            },
        },
        queue("default"),
        podgroup("used"),
        _limited(pod("used-0", "used"), {"cpu": "1", "memory": "1Gi", "volcano.sh/gpu-memory": "6000"}),
    ]
    docs[-1]["spec"]["nodeName"] = "g1"
    docs[-1]["metadata"]["annotations"]["volcano.sh/gpu-index"] = "0"
    docs[-1]["status"] = {"phase": "Running"}
    for name, mem in (("small", "2000"), ("big", "7000"), ("huge", "2500")):
        docs += [
            podgroup(name),
            _limited(pod(f"{name}-0", name), {"cpu": "1", "memory": "1Gi", "volcano.sh/gpu-memory": mem}),
        ]
    for name, cpus in (("four", "4"), ("five", "5")):
        p = _limited(pod(f"{name}-0", name), {"cpu": cpus, "memory": "1Gi"})
        p["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] = "single-numa-node"
        docs += [podgroup(name), p]
    code, out, warnings = simulate(docs, "--conf", str(simulate.tmp_path / "conf.yaml"))
    assert code == 0 and warnings == []
    assert {k: v for k, v in out["binds"].items() if k != "ml/used-0"} == {
        "ml/small-0": "g1",
        "ml/big-0": "g1",
        "ml/four-0": "c1",
    }
    assert out["cards"] == {"ml/big-0": "1", "ml/small-0": "0"}
    huge = out["conditions"]["ml/huge"]
    assert "1 GpuShare no enough gpu memory (asks 2500 on one card, the freest card has 2000)" in huge
    five = out["conditions"]["ml/five"]
    assert "container c cannot be assigned by numa (free cpus per NUMA node 0: 2, 1: 4)" in five


def test_pod_disruption_budgets_are_read_only_with_the_pdb_plugin(simulate: Run) -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    _, _, warnings = simulate([NODE, queue("default"), pdb])
    assert warnings == ["ignored 1 PodDisruptionBudget: the configuration does not enable the pdb plugin: ml/web"]
    conf = simulate.tmp_path / "pdb.yaml"
    conf.write_text("actions: allocate, preempt\ntiers:\n- plugins:\n  - name: priority\n  - name: pdb\n")
    _, _, warnings = simulate([NODE, queue("default"), pdb], "--conf", str(conf))
    assert warnings == []
