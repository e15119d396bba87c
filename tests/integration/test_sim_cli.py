"""The command line: ``lahar sim`` as a process, node specs, and apply/get/delete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lahar.sim import SimProcess
from lahar.sim.nodes import NodeSpecError, build_nodes, load_nodes_file, parse_spec


def lahar(*args: str, kubeconfig: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "lahar", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=60,
    )


@pytest.fixture
def kubeconfig(sim, tmp_path: Path) -> Path:
    return sim.write_kubeconfig(tmp_path / "kubeconfig")


def test_sim_process_serves_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: special}\n"
        "status: {capacity: {cpu: '2', memory: 4Gi, pods: '10'}}\n"
    )
    sim = SimProcess(
        [
            "--nodes",
            "3:cpu=4,name=small",
            "--nodes",
            "2:cpu=64,label.tier=big",
            "--nodes-file",
            str(nodes_file),
        ]
    ).start()
    assert sim.proc is not None
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        names = [n["metadata"]["name"] for n in http.get("/api/v1/nodes").json()["items"]]
    assert names == ["node-0001", "node-0002", "small-0001", "small-0002", "small-0003", "special"]
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.proc.wait(10) == 0
    sim.stop()


def test_bad_nodes_spec_is_a_clear_cli_error() -> None:
    result = lahar("sim", "--port", "0", "--nodes", "10:cpu=lots")
    assert result.returncode == 2
    assert "--nodes '10:cpu=lots': cpu: 'lots' is not a quantity" in result.stderr
    result = lahar("sim", "--port", "0", "--error-rate", "binding=7")
    assert result.returncode == 2 and "between 0 and 1" in result.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x:cpu=1", "COUNT 'x' is not a whole number"),
        ("0:cpu=1", "at least 1"),
        ("2:colour=red", "unknown key"),
        ("2:taint.a=b:Sometimes", "effect 'Sometimes'"),
        ("2:name=Bad_Name", "name 'Bad_Name'"),
        ("2:cpu", "not key=value"),
    ],
)
def test_node_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(NodeSpecError, match=message):
        parse_spec(spec)


def test_node_spec_builds_nodes() -> None:
    nodes = build_nodes(
        [
            parse_spec("2:cpu=32,memory=128Gi,nvidia.com/gpu=8,label.zone=a,taint.dedicated=gpu:NoSchedule"),
            parse_spec("1:name=cpu,taint.spot=:PreferNoSchedule"),
        ]
    )
    assert [n["metadata"]["name"] for n in nodes] == ["node-0001", "node-0002", "cpu-0001"]
    first = nodes[0]
    assert first["status"]["allocatable"] == {
        "cpu": "32",
        "memory": "128Gi",
        "pods": "110",
        "nvidia.com/gpu": "8",
    }
    assert first["metadata"]["labels"]["zone"] == "a"
    assert first["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}]
    assert nodes[2]["spec"]["taints"] == [{"key": "spot", "effect": "PreferNoSchedule"}]


def test_nodes_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: x}\n")
    with pytest.raises(NodeSpecError, match="not a Node"):
        load_nodes_file(str(bad))
    with pytest.raises(NodeSpecError, match="cannot read"):
        load_nodes_file(str(tmp_path / "missing.yaml"))


MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: cli-gold}
spec: {weight: 3}
"""


def test_apply_get_delete(kubeconfig: Path, ns: str) -> None:
    result = lahar("apply", "-n", ns, "-f", "-", kubeconfig=kubeconfig, stdin=MANIFEST)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["pod/web created", "queue.scheduling.volcano.sh/cli-gold created"]
    result = lahar("apply", "-n", ns, "-f", "-", kubeconfig=kubeconfig, stdin=MANIFEST)
    assert result.stdout.splitlines() == [
        "pod/web unchanged",
        "queue.scheduling.volcano.sh/cli-gold unchanged",
    ]
    changed = MANIFEST.replace("weight: 3", "weight: 5")
    result = lahar("apply", "-n", ns, "-f", "-", kubeconfig=kubeconfig, stdin=changed)
    assert result.stdout.splitlines() == [
        "pod/web unchanged",
        "queue.scheduling.volcano.sh/cli-gold configured",
    ]

    result = lahar("get", "pods", "-n", ns, kubeconfig=kubeconfig)
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:3] == ["web", "0/1", "Pending"]
    assert (
        lahar("get", "q", "cli-gold", "-o", "name", kubeconfig=kubeconfig).stdout
        == "queue.scheduling.volcano.sh/cli-gold\n"
    )
    result = lahar("get", "queue", "cli-gold", "-o", "json", kubeconfig=kubeconfig)
    assert '"weight": 5' in result.stdout
    assert "kind: Pod" in lahar("get", "po", "web", "-n", ns, "-o", "yaml", kubeconfig=kubeconfig).stdout
    wide = lahar("get", "nodes", "-o", "wide", "-l", "zone=b", kubeconfig=kubeconfig).stdout.splitlines()
    assert wide[0].split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and len(wide) == 3
    all_ns = lahar("get", "pods", "-A", kubeconfig=kubeconfig).stdout.splitlines()
    assert all_ns[0].split()[0] == "NAMESPACE" and any(line.startswith(ns) for line in all_ns)

    missing = lahar("get", "pod", "nope", "-n", ns, kubeconfig=kubeconfig)
    assert missing.returncode == 1 and missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'
    unknown = lahar("get", "gizmos", kubeconfig=kubeconfig)
    assert unknown.returncode == 1 and 'doesn\'t have a resource type "gizmos"' in unknown.stderr

    result = lahar("delete", "-n", ns, "-f", "-", kubeconfig=kubeconfig, stdin=MANIFEST)
    assert result.stdout.splitlines() == [
        'pod "web" deleted',
        'queue.scheduling.volcano.sh "cli-gold" deleted',
    ]
    again = lahar("delete", "-n", ns, "-f", "-", kubeconfig=kubeconfig, stdin=MANIFEST)
    assert (
        again.returncode == 1
        and 'Error from server (NotFound): error when deleting "-": pods "web" not found' in again.stderr
    )
    empty = lahar("get", "pods", "-n", ns, kubeconfig=kubeconfig)
    assert empty.returncode == 0 and f"No resources found in {ns} namespace." in empty.stderr


def test_apply_refuses_a_yaml_alias_bomb_fast(tmp_path: Path) -> None:
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(MANIFEST + "---\n" + "\n".join(laughs) + "\n")
    started = time.monotonic()
    # No cluster is needed: the file is read, and refused, before any call is made.
    result = lahar("apply", "-f", str(bomb), kubeconfig=tmp_path / "none")
    assert time.monotonic() - started < 10  # the interpreter's start is most of it
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: error parsing {bomb}: document 3: too many aliases: "
        "they expand to more than 100000 nodes (an alias bomb?)"
    )


def test_cli_unreachable_cluster(tmp_path: Path) -> None:
    from lahar.sim import write_kubeconfig

    config = write_kubeconfig("http://127.0.0.1:1", tmp_path / "kc")
    result = lahar("get", "pods", kubeconfig=config)
    assert result.returncode == 1 and "The connection to the server 127.0.0.1:1 was refused" in result.stderr


def test_bench_sim_runs_small(tmp_path: Path) -> None:
    import json

    result = lahar("bench", "sim", "--list-pods", "300", "--binds", "200", "--nodes", "10", "--output", "json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["bindings"] == 200 and figures["binding_errors"] == 0 and figures["watchers_saw_every_binding"]
    assert figures["bindings_per_second"] > 0 and figures["list_50k_seconds"] > 0


def test_register_bench_adds_sim_to_a_shared_bench_command() -> None:
    import argparse

    from lahar.cli.benchsim import register_bench

    parser = argparse.ArgumentParser(prog="lahar")
    bench = parser.add_subparsers(dest="command").add_parser("bench").add_subparsers(dest="what")
    register_bench(bench)
    args = parser.parse_args(["bench", "sim", "--binds", "5", "--output", "json"])
    assert args.binds == 5 and args.output == "json" and callable(args.handler)
