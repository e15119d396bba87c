"""The emulator as a child process: ``python -m lahar sim ...`` with a kubeconfig written once
it serves.  Used by benchmarks (so the load generator does not share the server's core) and by
anyone who wants the emulator out of their own process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lahar.api import safeyaml


class SimProcess:
    def __init__(
        self,
        args: list[str] | None = None,
        port: int = 0,
        startup_timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = list(args or [])
        self.port = port
        self.startup_timeout = startup_timeout
        self.env = env
        self._dir = tempfile.TemporaryDirectory(prefix="lahar-sim-")
        self.kubeconfig_path = Path(self._dir.name) / "kubeconfig"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> SimProcess:
        cmd = [
            sys.executable,
            "-m",
            "lahar",
            "sim",
            "--port",
            str(self.port),
            "--kubeconfig-out",
            str(self.kubeconfig_path),
            *self.args,
        ]
        env = {**os.environ, **(self.env or {})}
        self.log_path = Path(self._dir.name) / "sim.log"
        with open(self.log_path, "wb") as log:  # a file, not a pipe: a full pipe would block the server
            self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + self.startup_timeout
        while not self.kubeconfig_path.exists():
            if self.proc.poll() is not None:
                err = self.log_path.read_text(errors="replace")
                raise RuntimeError(f"lahar sim exited with {self.proc.returncode}: {err.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("lahar sim did not write its kubeconfig in time")
            time.sleep(0.02)
        config: dict[str, Any] = safeyaml.load(self.kubeconfig_path.read_text(), str(self.kubeconfig_path))
        self.url = config["clusters"][0]["cluster"]["server"]
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._dir.cleanup()
        return self.proc.returncode

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
