"""``lahar kube``'s pieces that need no Go and no server: the build recipe, the cache, the
credentials, the CRD data and the node objects."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509

from lahar.cli.main import main
from lahar.kube import build
from lahar.kube.control_plane import KWOK_ANNOTATION, ControlPlane, volcano_crds
from lahar.kube.pki import make_pki
from lahar.sim.nodes import parse_spec


def test_go_mod_pins_kubernetes_and_replaces_every_staging_module() -> None:
    text = build._go_mod()
    assert f"require k8s.io/kubernetes {build.KUBERNETES_VERSION}" in text
    for module in ("api", "client-go", "apiserver", "kube-controller-manager", "sample-controller"):
        assert f"replace k8s.io/{module} => k8s.io/{module} {build.STAGING_VERSION}\n" in text
    assert "./staging" not in text


def test_missing_go_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.KubeBuildError, match=r"Go toolchain .*install it from https://go.dev/dl/"):
        build.ensure(lambda line: None, root=tmp_path / "cache")


def test_cached_binaries_are_used_without_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    wanted = build.binaries(root)
    for path in (wanted.etcd, wanted.apiserver, wanted.controller_manager, wanted.kwok):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))  # no go on PATH: a build would fail
    assert build.ensure(lambda line: None, root=root) == wanted


def test_cache_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_root() == tmp_path / "lahar" / "kube"
    assert build.binaries().apiserver == tmp_path / "lahar/kube/kubernetes-v1.34.4/kube-apiserver"


def test_pki_serves_loopback_and_keeps_secrets_private(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    cert = x509.load_pem_x509_certificate(pki.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    assert "kubernetes.default.svc" in san.get_values_for_type(x509.DNSName)
    assert pki.tokens.read_text().startswith(f'{pki.admin_token},lahar-admin,lahar-admin,"system:masters"')
    for secret in (pki.key, pki.sa_key, pki.tokens):
        assert os.stat(secret).st_mode & 0o077 == 0


def test_volcano_crds_are_the_ones_lahar_uses() -> None:
    names = {crd["metadata"]["name"] for crd in volcano_crds()}
    assert {
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "jobs.batch.volcano.sh",
        "commands.bus.volcano.sh",
        "jobflows.flow.volcano.sh",
    } <= names


def test_nodes_come_from_the_emulator_spec_and_are_kwok_managed(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, [parse_spec("2:cpu=32,memory=128Gi,label.zone=a")], build.binaries(tmp_path))
    assert [n["metadata"]["name"] for n in plane.nodes] == ["node-0001", "node-0002"]
    for node in plane.nodes:
        assert node["metadata"]["annotations"][KWOK_ANNOTATION] == "fake"
        assert node["metadata"]["labels"]["zone"] == "a"
        assert node["status"]["allocatable"]["memory"] == "128Gi"


def test_cli_rejects_a_bad_node_spec_before_building(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["kube", "up", "--state-dir", str(tmp_path), "--nodes", "3:cpu=lots"])
    assert exit_info.value.code == 2
    assert "cpu: 'lots' is not a quantity" in capsys.readouterr().err


def test_build_lock_makes_a_second_build_wait(tmp_path: Path) -> None:
    lock = tmp_path / "build.lock"
    said: list[str] = []
    order: list[str] = []

    def second() -> None:
        with build._locked(lock, said.append):
            order.append("second")

    with build._locked(lock, said.append):
        waiter = threading.Thread(target=second)
        waiter.start()
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:
            time.sleep(0.01)
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    assert said == [f"lahar kube: another build holds {lock}; waiting for it"]


def test_cli_build_prints_cached_paths(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for path in (b := build.binaries()).etcd, b.apiserver, b.controller_manager, b.kwok:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    with pytest.raises(SystemExit) as exit_info:
        main(["kube", "build"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.split() == [str(p) for p in (b.etcd, b.apiserver, b.controller_manager, b.kwok)]


def _fake_go(tmp_path: Path, script: str) -> str:
    go = tmp_path / "go"
    go.write_text("#!/bin/sh\n" + script)
    go.chmod(0o755)
    return str(go)


def test_go_runs_niced_with_the_asked_parallelism(tmp_path: Path) -> None:
    go = build._Go(_fake_go(tmp_path, 'echo "$GOFLAGS|$CGO_ENABLED|$PWD|$*" > out\n'), 3, lambda line: None)
    work = tmp_path / "work"
    work.mkdir()
    go.run(["build", "./x"], work, tmp_path / "log", "x")
    flags, cgo, cwd, args = (work / "out").read_text().strip().split("|")
    assert "-p=3" in flags.split()
    assert (cgo, cwd, args) == ("0", str(work), "build ./x")


def test_a_failed_go_command_reports_its_log(tmp_path: Path) -> None:
    go = build._Go(_fake_go(tmp_path, "echo 'missing module k8s.io/nope'\nexit 3\n"), 1, lambda line: None)
    with pytest.raises(build.KubeBuildError, match=r"(?s)'go get' for modules failed \(exit 3\).*k8s.io/nope"):
        go.run(["get", "x"], tmp_path, tmp_path / "log", "modules")


def test_nodes_from_a_file_are_kwok_managed_too(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"capacity": {"cpu": "4"}}}
    plane = ControlPlane(tmp_path, [parse_spec("1:cpu=2")], build.binaries(tmp_path), node_objects=[node])
    assert [n["metadata"]["name"] for n in plane.nodes] == ["node-0001", "gpu-1"]
    assert plane.nodes[1]["metadata"]["annotations"][KWOK_ANNOTATION] == "fake"


def test_cli_rejects_a_missing_nodes_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["kube", "up", "--state-dir", str(tmp_path), "--nodes-file", str(tmp_path / "absent.yaml")])
    assert exit_info.value.code == 2
    assert "absent.yaml: cannot read" in capsys.readouterr().err


def test_a_long_go_command_says_it_is_still_building(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(build, "HEARTBEAT", 0.05)
    said: list[str] = []
    go = build._Go(_fake_go(tmp_path, "sleep 0.3\n"), 1, said.append)
    go.run(["build", "x"], tmp_path, tmp_path / "log", "kube-apiserver")
    assert "lahar kube: kube-apiserver: still building (0 min)" in said
    assert said[-1].startswith("lahar kube: kube-apiserver: done in")
