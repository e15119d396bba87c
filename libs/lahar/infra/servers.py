"""One NATS or Valkey server: either a child process we run on a free loopback port, or a server
someone else runs that we were pointed at."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from lahar.infra import auth, process
from lahar.infra.binaries import nats_server_path, valkey_server_path
from lahar.infra.certs import CertPair
from lahar.infra.errors import InfraError
from lahar.wire.access import ADMIN
from lahar.wire.names import Names

LOOPBACK = "127.0.0.1"
PORT_ATTEMPTS = 3  # free_port() can race with another process; a lost race costs one restart
PROBE_TIMEOUT = 0.25  # one readiness probe on loopback; the deadline bounds the whole wait


class Server(Protocol):
    """What callers get from ``start_nats`` / ``start_redis``."""

    @property
    def url(self) -> str: ...

    @property
    def pid(self) -> int | None:
        """The server's process id, or None when we did not start it."""

    @property
    def running(self) -> bool: ...

    def stop(self, timeout: float = 5.0) -> None: ...


class ExternalServer:
    """A server named by a URL setting: used as it is, never started or stopped by us."""

    def __init__(self, url: str) -> None:
        self._url = url

    @property
    def url(self) -> str:
        return self._url

    @property
    def pid(self) -> int | None:
        return None

    @property
    def running(self) -> bool:
        return True  # not ours to watch

    def stop(self, timeout: float = 5.0) -> None:
        """Nothing to do: whoever runs the server stops it."""

    def __repr__(self) -> str:
        return f"ExternalServer({self._url!r})"


class EmbeddedServer(ABC):
    """A server binary we run as a child on a free loopback port, its data in ``data_dir``.

    Starting is two steps so that several servers can start at once: ``spawn()`` launches the
    process and returns at once; ``wait_ready()`` (or ``poll_ready()`` from an event loop) waits
    until it answers.  Without ``data_dir`` a temporary folder is used and removed on ``stop()``.
    """

    program: ClassVar[str]

    def __init__(self, data_dir: Path | None = None) -> None:
        self._given_dir = data_dir
        self._temp_dir: Path | None = None  # made by spawn(), removed by stop()
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._deadline = 0.0
        self._attempts = 0

    # -- what each server defines -------------------------------------------------------------

    @abstractmethod
    def _argv(self, port: int) -> list[str]: ...

    @abstractmethod
    def _answers(self, sock: socket.socket) -> bool:
        """One readiness check on a fresh connection: True once the server can serve us."""

    @property
    @abstractmethod
    def url(self) -> str: ...

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def data_dir(self) -> Path:
        folder = self._given_dir or self._temp_dir
        if folder is None:
            raise InfraError(f"{self.program}: not started, so it has no temporary data folder yet")
        return folder

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.program}.log"

    def spawn(self, timeout: float = 10.0) -> None:
        """Launch the server; it must answer within ``timeout`` seconds from now."""
        if self.running:
            raise InfraError(f"{self.program} is already running ({self.url})")
        try:
            if self._given_dir is None:
                self._temp_dir = self._temp_dir or Path(tempfile.mkdtemp(prefix=f"lahar-{self.program}-"))
            else:
                self._given_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfraError(f"{self.program}: cannot use data folder {self._given_dir}: {exc.strerror}") from exc
        self._deadline = time.monotonic() + timeout
        self._attempts = 0
        self._launch()

    def wait_ready(self) -> None:
        """Block until the server answers; raise InfraError (after stopping it) if it cannot."""
        for delay in backoff():
            if self.poll_ready():
                return
            assert self._proc is not None
            # A pause between probes that ends at once if the server dies.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(delay)

    def poll_ready(self) -> bool:
        """One step of startup, never blocking for long: True once the server answers.

        Relaunches on a new port after losing a port race; raises InfraError (after stopping the
        server) when it exited or the deadline passed."""
        if self._probe():
            return True
        assert self._proc is not None
        if self._proc.poll() is not None:
            if self._lost_port_race() and self._attempts < PORT_ATTEMPTS:
                self._launch()
                return False
            self._fail(f"exited with code {self._proc.returncode} while starting")
        if time.monotonic() >= self._deadline:
            self._fail("did not answer before the startup deadline")
        return False

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` s; then remove the data folder if it was ours."""
        if self._proc is not None:
            process.stop(self._proc, timeout)
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def restart(self, wipe: bool = False, kill: bool = True, timeout: float = 10.0) -> None:
        """Stop the server (SIGKILL by default, as a crash would) and start it again on the same
        port, so that clients reconnect to the URL they know.  ``wipe`` empties its data folder
        first: the server comes back with nothing it had stored."""
        if self._proc is not None:
            if kill:
                process.kill(self._proc)
            else:
                process.stop(self._proc, timeout)
        if wipe:
            for entry in self.data_dir.iterdir():
                if entry.name == self.log_path.name:
                    continue
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        self._deadline = time.monotonic() + timeout
        self._attempts = PORT_ATTEMPTS  # the port is the server's address now: never move it
        self._launch(self.port)
        self.wait_ready()

    def __repr__(self) -> str:
        folder = self._given_dir or self._temp_dir
        return f"{type(self).__name__}(url={self.url!r}, pid={self.pid}, data_dir={str(folder)!r})"

    # -- helpers --------------------------------------------------------------------------------

    def _launch(self, port: int = 0) -> None:
        self._attempts += 1
        self.port = port or process.free_port(LOOPBACK)
        argv = self._argv(self.port)
        try:
            self._proc = process.spawn(argv, self.log_path, append=bool(port))
        except OSError as exc:
            raise InfraError(f"{self.program}: cannot start {argv[0]}: {exc}") from exc

    def _probe(self) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=PROBE_TIMEOUT) as sock:
                return self._answers(sock)
        except (OSError, ValueError):  # not listening yet, or a half-written greeting
            return False

    def _lost_port_race(self) -> bool:
        return "address already in use" in self._log_text().lower()

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _fail(self, what: str) -> None:
        tail = "\n".join(self._log_text().splitlines()[-15:])
        where = "" if self._temp_dir else f" ({self.log_path})"  # an owned folder goes with stop()
        self.stop(timeout=1.0)
        raise InfraError(f"{self.program} {what}; the end of its log{where}:\n{tail}")


class NatsServer(EmbeddedServer):
    """nats-server with JetStream, storing streams under ``data_dir/jetstream``.

    With ``access``, clients must log in as one of its users, each with its permissions, and
    (when it holds certificates) speak TLS; the configuration and certificate files are written
    into ``data_dir`` at every launch, so a restart on a wiped folder still has them.  No
    monitoring port is opened."""

    program = "nats-server"

    def __init__(self, data_dir: Path | None = None, *, access: NatsAccess | None = None) -> None:
        super().__init__(data_dir)
        self.access = access

    @property
    def url(self) -> str:
        scheme = "tls" if self.access is not None and self.access.certs is not None else "nats"
        return f"{scheme}://{LOOPBACK}:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate clients verify the server with (None without TLS)."""
        if self.access is None or self.access.certs is None:
            return None
        return self.data_dir / "tls" / "ca.crt"

    def _argv(self, port: int) -> list[str]:
        argv = [str(nats_server_path()), "--addr", LOOPBACK, "--port", str(port),
                "--jetstream", "--store_dir", str(self.data_dir)]  # fmt: skip
        if self.access is not None:
            argv += ["--config", str(self._write_config())]
        return argv

    def _write_config(self) -> Path:
        assert self.access is not None
        tls = None
        if self.access.certs is not None:
            files = self.access.certs.write(self.data_dir / "tls")
            tls = (str(files.cert), str(files.key))
        path = self.data_dir / "nats.conf"
        _write_private(path, auth.nats_conf(self.access.names, auth.literal(self.access.passwords), tls=tls))
        return path

    def _answers(self, sock: socket.socket) -> bool:
        # The server greets every client with one INFO line (in plain text, before any TLS
        # handshake).  It opens the client port only after JetStream is up, but check the flag
        # anyway: a client that needs JetStream must not race it.
        line = _read_line(sock)
        if not line.startswith(b"INFO "):
            return False
        info = json.loads(line[5:])
        ready = isinstance(info, dict) and info.get("jetstream") is True
        if ready and self.ca_file is not None:
            # Finish the TLS handshake the server now waits for: a probe that hangs up before it
            # would be logged as a TLS error, and it proves the certificate verifies.
            context = ssl.create_default_context(cafile=str(self.ca_file))
            context.wrap_socket(sock, server_hostname=LOOPBACK).close()
        return ready


class RedisServer(EmbeddedServer):
    """valkey-server (Redis-compatible).  Persistent (append-only file) only in a folder the caller
    gave: a temporary server skips disk writes, which also keeps its shutdown fast.

    With ``access``, the ``default`` user is off and clients log in as one of its users (an ACL
    file written into ``data_dir`` at every launch)."""

    program = "valkey-server"

    def __init__(self, data_dir: Path | None = None, *, access: RedisAccess | None = None) -> None:
        super().__init__(data_dir)
        self.access = access

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def _argv(self, port: int) -> list[str]:
        persist = "no" if self._given_dir is None else "yes"
        argv = [str(valkey_server_path()), "--bind", LOOPBACK, "--port", str(port),
                "--dir", str(self.data_dir), "--daemonize", "no", "--logfile", "",
                "--save", "", "--appendonly", persist]  # fmt: skip
        if self.access is not None:
            acl = self.data_dir / "users.acl"
            _write_private(acl, auth.valkey_acl(self.access.prefix, self.access.passwords))
            argv += ["--aclfile", str(acl)]
        return argv

    def _answers(self, sock: socket.socket) -> bool:
        # PING answers -LOADING while the server replays its append-only file: not ready yet.
        if self.access is None:
            sock.sendall(b"PING\r\n")
            return _read_line(sock).startswith(b"+PONG")
        password = self.access.passwords[ADMIN].encode()
        sock.sendall(b"AUTH " + ADMIN.encode() + b" " + password + b"\r\nPING\r\n")
        return _read_lines(sock, 2)[-1:] == [b"+PONG"]


@dataclass(frozen=True)
class NatsAccess:
    """The users of an embedded nats-server (``lahar.wire.access``), and its TLS pair (or None)."""

    names: Names
    passwords: Mapping[str, str]
    certs: CertPair | None = None


@dataclass(frozen=True)
class RedisAccess:
    """The users of an embedded valkey-server (``lahar.wire.access``) for one key prefix."""

    prefix: str
    passwords: Mapping[str, str]


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it holds passwords), replacing it whole."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    tmp.replace(path)


def _read_line(sock: socket.socket, limit: int = 65536) -> bytes:
    data = b""
    while not data.endswith(b"\r\n") and len(data) < limit:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _read_lines(sock: socket.socket, count: int, limit: int = 65536) -> list[bytes]:
    data = b""
    while data.count(b"\r\n") < count and len(data) < limit:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n")[:count]


def backoff(first: float = 0.005, longest: float = 0.1) -> Iterator[float]:
    """Pauses between readiness probes: short at first, since servers start in milliseconds."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, longest)
