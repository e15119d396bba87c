"""``lahar.sim``: a Kubernetes API emulator that speaks enough of the REST API for Lahar's
services, the official Python client and kubectl.  See README.md beside this file.

In-process (a background thread)::

    from lahar.sim import Emulator, SimConfig
    with Emulator(SimConfig(nodes=["10:cpu=32,memory=128Gi"])) as sim:
        api_client = sim.api_client()            # a kubernetes.client.ApiClient
        sim.write_kubeconfig("/tmp/kubeconfig")  # or use sim.url

As a child process (``lahar sim`` underneath)::

    with SimProcess(["--nodes", "100:cpu=8"]) as sim:
        sim.url, sim.kubeconfig_path

Names are imported lazily so that ``lahar sim`` does not pay for the kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lahar.sim.client import bind_pod, binding_body
    from lahar.sim.process import SimProcess
    from lahar.sim.server import Emulator, SimConfig, kubeconfig_for, write_kubeconfig

_WHERE = {
    "bind_pod": "lahar.sim.client",
    "binding_body": "lahar.sim.client",
    "SimProcess": "lahar.sim.process",
    "Emulator": "lahar.sim.server",
    "SimConfig": "lahar.sim.server",
    "kubeconfig_for": "lahar.sim.server",
    "write_kubeconfig": "lahar.sim.server",
}
__all__ = [
    "Emulator",
    "SimConfig",
    "SimProcess",
    "bind_pod",
    "binding_body",
    "kubeconfig_for",
    "write_kubeconfig",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'lahar.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
