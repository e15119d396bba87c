"""A port picked as free can be taken before the server binds it; the control plane then starts
again on other ports instead of failing."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lahar.infra import process
from lahar.kube import control_plane as cp
from lahar.kube.build import Binaries
from lahar.sim.nodes import parse_spec


def test_a_taken_port_makes_it_start_again(
    kube_binaries: Binaries, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports: Iterator[int] = iter([taken.getsockname()[1]])  # etcd's client port, first attempt only
        monkeypatch.setattr(cp, "free_port", lambda: next(ports, None) or process.free_port())
        said: list[str] = []
        with cp.ControlPlane(tmp_path, [parse_spec("1:cpu=2")], kube_binaries, said.append) as plane:
            assert plane.kubeconfig.exists()
    assert any("address already in use" in line and "starting again on other ports" in line for line in said)
