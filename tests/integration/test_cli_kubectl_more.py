"""kubectl habits in ``lahar get|create|apply``: ``-o jsonpath``, ``-w``, ``create`` with
generateName, kubectl's wording for errors, ``--version``, and a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lahar.cli._jsonpath import JsonPathError, render

from .test_sim_cli import lahar

LIST = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "a"}, "status": {"capacity": {"cpu": "4"}}, "spec": {"ok": True}},
        {"metadata": {"name": "b"}, "status": {"capacity": {"cpu": "8"}}, "spec": {"ok": False}},
    ],
}


@pytest.fixture
def kubeconfig(sim, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    return Path(sim.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.items[*].metadata.name}", "a b"),
        ('{range .items[*]}{.metadata.name}{"\\t"}{.status.capacity.cpu}{"\\n"}{end}', "a\t4\nb\t8\n"),
        ("{.items[0].metadata.name}", "a"),
        ("names: {.items[1].metadata.name}!", "names: b!"),
        ("{.items[*].spec.ok}", "true false"),
        ("{.items[0].status}", '{"capacity":{"cpu":"4"}}'),
        ("{.items[*].absent}", ""),
    ],
)
def test_jsonpath_templates(template: str, expected: str) -> None:
    assert render(template, LIST) == expected


@pytest.mark.parametrize("template", ["{.items[0", "{range .items[*]}{.x}", "{end}"])
def test_bad_jsonpath_templates_are_refused(template: str) -> None:
    with pytest.raises(JsonPathError):
        render(template, LIST)


def test_get_jsonpath_and_bad_output(kubeconfig: Path) -> None:
    done = lahar("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}", kubeconfig=kubeconfig)
    assert done.returncode == 0 and "node-0001" in done.stdout.split(), done.stderr
    bad = lahar("get", "nodes", "-o", "yml", kubeconfig=kubeconfig)
    assert bad.returncode == 2 and "output format 'yml'" in bad.stderr and "jsonpath=TEMPLATE" in bad.stderr


def test_create_takes_generate_name_and_apply_refuses_it(kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    manifest = tmp_path / "gen.yaml"
    manifest.write_text(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{generateName: gen-, namespace: {ns}}}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n"
    )
    first, second = (lahar("create", "-f", str(manifest), kubeconfig=kubeconfig) for _ in range(2))
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.startswith("pod/gen-") and first.stdout != second.stdout
    applied = lahar("apply", "-f", str(manifest), kubeconfig=kubeconfig)
    assert applied.returncode == 1 and "error: from gen-: cannot use generate name with apply" in applied.stderr
    again = lahar("create", "-f", str(manifest), "-n", ns, kubeconfig=kubeconfig)
    assert again.returncode == 0


def test_create_of_an_existing_object_says_already_exists(kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: once, namespace: {ns}}}\n")
    assert lahar("create", "-f", str(manifest), kubeconfig=kubeconfig).returncode == 0
    again = lahar("create", "-f", str(manifest), kubeconfig=kubeconfig)
    assert again.returncode == 1
    assert f'Error from server (AlreadyExists): error when creating "{manifest}":' in again.stderr


def test_get_watch_prints_later_changes(kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    out = tmp_path / "watch.out"
    with out.open("w") as sink:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "lahar", "get", "configmaps", "-n", ns, "-w"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )
    try:
        deadline = time.monotonic() + 30
        while "No resources found" not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling interval of a deadline-bounded wait
        manifest = tmp_path / "late.yaml"
        manifest.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: late, namespace: {ns}}}\n")
        assert lahar("create", "-f", str(manifest), kubeconfig=kubeconfig).returncode == 0
        while "late" not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling interval of a deadline-bounded wait
        assert "late" in out.read_text()
        assert watcher.poll() is None  # still watching
    finally:
        watcher.terminate()
        watcher.wait(10)


def test_version() -> None:
    done = lahar("--version")
    assert done.returncode == 0 and done.stdout.startswith("lahar ")


def test_a_closed_pipe_ends_quietly(kubeconfig: Path) -> None:
    # The reader is gone before lahar writes (as `| head` after its first line): EPIPE for sure.
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar", "get", "nodes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
