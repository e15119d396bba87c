"""Pinned Kubernetes binaries, built once with the Go toolchain and kept in the user's cache.

No release tarballs and no Docker: every binary comes from its Go module at a pinned version, so
the same sources build on any machine with Go, and a second run finds them in the cache.

* kube-apiserver, kube-controller-manager and etcd come from ``k8s.io/kubernetes`` v1.34.4.  That
  module points its ``k8s.io/*`` dependencies at ``./staging`` folders, which a module download
  does not contain; a throwaway main module replaces them with the published ``v0.34.4`` modules
  (replace directives only count in the main module).  etcd is built in the same module:
  ``k8s.io/kubernetes`` v1.34.4 itself requires ``go.etcd.io/etcd/server/v3`` v3.6.4, the etcd
  that Kubernetes 1.34 is released with.  A 3.6 etcd answers the watch progress requests that
  kube-apiserver's consistent reads from its cache rely on; Debian's etcd 3.4.23 is older than
  the 3.4.31 the API server requires for them, so it would only serve with that feature off.
* KWOK v0.7.0 has no replace directives, so ``go install`` builds it as published.

Builds run at the lowest CPU priority, one package at a time by default (``nice -n 19``, ``-p=1``), so a
shared machine keeps working, and under a file lock so two builds never collide.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lahar.infra.process import spawn, stop

KUBERNETES_VERSION = "v1.34.4"
STAGING_VERSION = "v0.34.4"  # the published k8s.io/* modules of the same release
ETCD_VERSION = "v3.6.4"  # what k8s.io/kubernetes v1.34.4 requires
KWOK_VERSION = "v0.7.0"
HEARTBEAT = 60.0  # seconds between "still building" lines

# Every k8s.io module that k8s.io/kubernetes v1.34.4's go.mod replaces with a ./staging folder.
STAGING = [
    "api",
    "apiextensions-apiserver",
    "apimachinery",
    "apiserver",
    "cli-runtime",
    "client-go",
    "cloud-provider",
    "cluster-bootstrap",
    "code-generator",
    "component-base",
    "component-helpers",
    "controller-manager",
    "cri-api",
    "cri-client",
    "csi-translation-lib",
    "dynamic-resource-allocation",
    "endpointslice",
    "externaljwt",
    "kms",
    "kube-aggregator",
    "kube-controller-manager",
    "kube-proxy",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "metrics",
    "mount-utils",
    "pod-security-admission",
    "sample-apiserver",
    "sample-cli-plugin",
    "sample-controller",
]

Progress = Callable[[str], None]


class KubeBuildError(Exception):
    pass


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path
    kwok: Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lahar" / "kube"


def binaries(root: Path | None = None) -> Binaries:
    """Where the binaries are (or will be) in the cache."""
    root = root or cache_root()
    k8s = root / f"kubernetes-{KUBERNETES_VERSION}"
    return Binaries(
        etcd=root / f"etcd-{ETCD_VERSION}" / "etcd",
        apiserver=k8s / "kube-apiserver",
        controller_manager=k8s / "kube-controller-manager",
        kwok=root / f"kwok-{KWOK_VERSION}" / "kwok",
    )


def cached(root: Path | None = None) -> bool:
    b = binaries(root)
    return all(_runnable(p) for p in (b.etcd, b.apiserver, b.controller_manager, b.kwok))


def go_path() -> str:
    """The ``go`` command, or an error that says what to install."""
    go = shutil.which("go")
    if go is None:
        raise KubeBuildError(
            "the Go toolchain (go 1.24 or newer) is needed to build kube-apiserver, "
            "kube-controller-manager, etcd and KWOK once: install it from https://go.dev/dl/ "
            "(or your system's 'golang' package) and put 'go' on PATH"
        )
    return go


def ensure(progress: Progress = print, root: Path | None = None, jobs: int = 1) -> Binaries:
    """The pinned binaries, built first if the cache lacks any, compiling ``jobs`` packages at a
    time (1 by default: slow but gentle on a shared machine; a dedicated CI runner can use more)."""
    root = root or cache_root()
    wanted = binaries(root)
    if cached(root):
        return wanted
    go = _Go(go_path(), jobs, progress)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / "build.lock", progress):
        # Another process may have built them while we waited for the lock.
        if not _runnable(wanted.apiserver) or not _runnable(wanted.controller_manager) or not _runnable(wanted.etcd):
            _build_kubernetes(go, root, wanted)
        if not _runnable(wanted.kwok):
            _build_kwok(go, root, wanted)
    return wanted


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@contextlib.contextmanager
def _locked(path: Path, progress: Progress) -> Iterator[None]:
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"lahar kube: another build holds {path}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _go_mod() -> str:
    lines = ["module lahar.local/kubebuild", "", "go 1.24.0", "", f"require k8s.io/kubernetes {KUBERNETES_VERSION}", ""]
    lines += [f"replace k8s.io/{m} => k8s.io/{m} {STAGING_VERSION}" for m in STAGING]
    return "\n".join(lines) + "\n"


def _ldflags() -> str:
    # The version a client sees (kubectl version, discovery); a module build has no git stamp.
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return f"-s -w -X {pkg}.gitVersion={KUBERNETES_VERSION} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"


def _build_kubernetes(go: _Go, root: Path, wanted: Binaries) -> None:
    packages = {
        wanted.apiserver: "k8s.io/kubernetes/cmd/kube-apiserver",
        wanted.controller_manager: "k8s.io/kubernetes/cmd/kube-controller-manager",
        wanted.etcd: "go.etcd.io/etcd/server/v3",
    }
    with tempfile.TemporaryDirectory(prefix="build-", dir=root) as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text(_go_mod())
        log = root / "build-kubernetes.log"
        go.progress(
            f"lahar kube: building Kubernetes {KUBERNETES_VERSION} and etcd {ETCD_VERSION} with Go, once "
            f"(several minutes at low priority; log: {log})"
        )
        pins = [f"{p}@{KUBERNETES_VERSION}" for p in packages.values() if p.startswith("k8s.io/")]
        go.run(["get", *pins, f"go.etcd.io/etcd/server/v3@{ETCD_VERSION}"], work, log, "resolving modules")
        for out, pkg in packages.items():
            ldflags = _ldflags() if pkg.startswith("k8s.io/") else "-s -w"
            built = work / out.name
            go.run(["build", "-trimpath", "-ldflags", ldflags, "-o", str(built), pkg], work, log, out.name)
            _install(built, out)


def _build_kwok(go: _Go, root: Path, wanted: Binaries) -> None:
    with tempfile.TemporaryDirectory(prefix="build-", dir=root) as tmp:
        log = root / "build-kwok.log"
        go.progress(f"lahar kube: building KWOK {KWOK_VERSION} with Go, once (log: {log})")
        args = ["install", "-trimpath", f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"]
        go.run(args, Path(tmp), log, "kwok", {"GOBIN": tmp})
        _install(Path(tmp) / "kwok", wanted.kwok)


def _install(built: Path, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # Same file system (the build folder is inside the cache): the rename is atomic, so a
    # half-written binary is never found by ``cached``.
    built.replace(out)


@dataclass(frozen=True)
class _Go:
    path: str
    jobs: int
    progress: Progress

    def run(self, args: list[str], cwd: Path, log: Path, what: str, extra_env: dict[str, str] | None = None) -> None:
        env = dict(os.environ, CGO_ENABLED="0", **(extra_env or {}))
        flags = [env.get("GOFLAGS", ""), f"-p={self.jobs}", "-buildvcs=false"]
        env["GOFLAGS"] = " ".join(filter(None, flags))
        argv = ["nice", "-n", "19", self.path, *args] if shutil.which("nice") else [self.path, *args]
        started = time.monotonic()
        with log.open("ab") as f:
            f.write(f"\n$ (cd {cwd} && {' '.join(argv)})\n".encode())
        # Its own process group and the parent-death signal: Ctrl-C or a killed parent stops the build.
        proc = spawn(argv, log, env, append=True, cwd=cwd)
        try:
            code = self._wait(proc, what, started)
        except BaseException:
            stop(proc, 5.0)
            raise
        if code != 0:
            raise KubeBuildError(f"'go {args[0]}' for {what} failed (exit {code}); the end of {log}:\n{_tail(log)}")
        self.progress(f"lahar kube: {what}: done in {time.monotonic() - started:.0f} s")

    def _wait(self, proc: subprocess.Popen[bytes], what: str, started: float) -> int:
        # A line now and then, so a long first build does not look hung.
        while True:
            try:
                return proc.wait(HEARTBEAT)
            except subprocess.TimeoutExpired:
                self.progress(f"lahar kube: {what}: still building ({(time.monotonic() - started) / 60:.0f} min)")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main() -> None:  # pragma: no cover - a manual entry point: python -m lahar.kube.build
    try:
        b = ensure(lambda line: print(line, file=sys.stderr, flush=True))
    except KubeBuildError as exc:
        sys.exit(f"lahar kube: {exc}")
    print(b)


if __name__ == "__main__":  # pragma: no cover
    main()
