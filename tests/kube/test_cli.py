"""``lahar kube up`` as a user runs it: the kubeconfig appears once the nodes are Ready, and
Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lahar.kube.build import Binaries

DEADLINE = 120.0


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # The command name (field 2) may hold spaces; the parent pid is the 2nd field after it.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_ctrl_c_stops_every_process(kube_binaries: Binaries, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli.main", "kube", "up", "--state-dir", str(tmp_path), "--nodes", "2:cpu=4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    kubeconfig = tmp_path / "kubeconfig"
    deadline = time.monotonic() + DEADLINE
    while not kubeconfig.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    children = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert kubeconfig.name.encode() in out, err.decode()
    assert proc.returncode == 0, err.decode()
    assert len(children) == 4, children  # etcd, kube-apiserver, kube-controller-manager, kwok
    assert not [pid for pid in children if _alive(pid)]
    assert not kubeconfig.exists()
