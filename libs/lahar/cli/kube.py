"""``lahar kube up``: a real Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager, KWOK) on loopback, in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from lahar.kube import build
from lahar.kube.control_plane import ControlPlane, ControlPlaneError
from lahar.sim.nodes import NodeSpecError, load_nodes_file, parse_spec

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
WATCH_INTERVAL = 1.0
DEFAULT_NODES = "3:cpu=8,memory=32Gi"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "kube",
        help="a real Kubernetes control plane (kube-apiserver, etcd, kube-controller-manager, KWOK nodes)",
        description="Real Kubernetes on loopback, built once from Go modules into the user's cache.",
    )
    kube_sub = p.add_subparsers(dest="kube_command", metavar="COMMAND", required=True)
    up = kube_sub.add_parser(
        "up",
        help="build (once), start, create KWOK nodes and Volcano's CRDs; Ctrl-C stops everything",
        description=f"Builds kube-apiserver and kube-controller-manager {build.KUBERNETES_VERSION}, etcd "
        f"{build.ETCD_VERSION} and KWOK {build.KWOK_VERSION} with the Go toolchain the first time "
        f"(cached under {build.cache_root()}), starts them on 127.0.0.1, installs Volcano's CRDs, "
        "creates the KWOK nodes and writes STATE_DIR/kubeconfig once they are Ready.",
    )
    up.add_argument(
        "--state-dir", default=".lahar-kube", help="where the kubeconfig, certificates, etcd data and logs go"
    )
    up.add_argument(
        "--nodes",
        action="append",
        metavar="COUNT:cpu=…,memory=…",
        help=f"KWOK nodes, in the emulator's spec format (repeatable; default {DEFAULT_NODES} without --nodes-file)",
    )
    up.add_argument(
        "--nodes-file",
        action="append",
        default=[],
        metavar="FILE",
        help="KWOK nodes from a YAML file of Node objects, as the emulator takes them (repeatable)",
    )
    _jobs_flag(up)
    up.set_defaults(handler=run_up)
    b = kube_sub.add_parser(
        "build",
        help="only build (or find in the cache) the pinned binaries, and print where they are",
        description="What `lahar kube up` does first; useful to build ahead, e.g. in CI before the tests.",
    )
    _jobs_flag(b)
    b.set_defaults(handler=run_build)


def _jobs_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        help="Go packages compiled at once on the first build (default 1: slow, but leaves a shared machine usable)",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_build(args: argparse.Namespace) -> int:
    try:
        bins = build.ensure(_say, jobs=args.jobs)
    except build.KubeBuildError as exc:
        _say(f"lahar kube: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130
    for path in (bins.etcd, bins.apiserver, bins.controller_manager, bins.kwok):
        print(path)
    return 0


def run_up(args: argparse.Namespace) -> int:
    try:
        files = [node for path in args.nodes_file for node in load_nodes_file(path)]
        specs = [parse_spec(text) for text in args.nodes or ([] if files else [DEFAULT_NODES])]
        bins = build.ensure(_say, jobs=args.jobs)
    except (NodeSpecError, build.KubeBuildError) as exc:
        _say(f"lahar kube: {exc}")
        return 2
    except KeyboardInterrupt:  # the build's process group is stopped by build.ensure
        return 130
    plane = ControlPlane(Path(args.state_dir), specs, bins, _say, node_objects=files)
    try:
        plane.start()
    except ControlPlaneError as exc:
        _say(f"lahar kube: {exc}")
        return 1
    except KeyboardInterrupt:  # start() has stopped what it started
        return 130
    try:
        # Blocked only now: the children inherit the signal mask and must stay stoppable.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        print(f"KUBECONFIG={plane.kubeconfig}", flush=True)
        _say("lahar kube: running; stop with Ctrl-C")
        return _wait_for_stop(plane)
    finally:
        plane.stop()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _wait_for_stop(plane: ControlPlane) -> int:
    """0 after SIGINT/SIGTERM; 1 if a process dies first."""
    while signal.sigtimedwait(STOP_SIGNALS, WATCH_INTERVAL) is None:
        if dead := plane.dead():
            _say(f"lahar kube: exited unexpectedly: {', '.join(dead)}")
            return 1
    _say("lahar kube: stopping")
    return 0
