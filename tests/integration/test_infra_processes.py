"""lahar.infra leaves no server process behind: not on stop, not on a failed start, not when its
parent is SIGKILLed, not after a pytest session, not after ``lahar infra`` is interrupted.

Processes are read from /proc (psutil is not a dependency).  A killed server whose new parent
does not reap it stays a zombie: it has exited, so a zombie counts as gone.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
import redis

from lahar.adapters.connect import connect_nats
from lahar.infra import (
    NATS_CA_ENV,
    NATS_URL_ENV,
    REDIS_URL_ENV,
    Infra,
    InfraError,
    Server,
    process,
    start_nats,
    start_redis,
)

SERVER_PROGRAMS = {"nats-server", "valkey-server"}
STARTUP_BUDGET = 3.0  # seconds for both servers, on the project's 2-core machines
DEADLINE = 10.0  # seconds to wait for anything a test polls for


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(program, state, parent pid) of a process, or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    program = text[text.index("(") + 1 : text.rindex(")")]
    state, ppid = text[text.rindex(")") + 2 :].split()[:2]
    return program, state, int(ppid)


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] != "Z"


def server_children(parent: int) -> dict[int, str]:
    """The live nats-server / valkey-server processes whose parent is ``parent``: pid → program."""
    found = {}
    for entry in Path("/proc").iterdir():
        stat = _stat(int(entry.name)) if entry.name.isdigit() else None
        if stat and stat[2] == parent and stat[1] != "Z" and stat[0] in SERVER_PROGRAMS:
            found[int(entry.name)] = stat[0]
    return found


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {what}")
        time.sleep(0.02)  # polling interval, bounded by the deadline above


def read_lines(stream: IO[bytes], count: int, timeout: float = DEADLINE) -> list[str]:
    """``count`` lines from a child's unbuffered stdout, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while len(lines) < count:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"wanted {count} lines within {timeout}s, got {lines}")
        line = stream.readline()
        if not line:
            raise AssertionError(f"the child closed its output after {lines}")
        lines.append(line.decode().strip())
    return lines


def env_without_url_settings(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (NATS_URL_ENV, REDIS_URL_ENV, NATS_CA_ENV)}
    return env | extra


@pytest.mark.usefixtures("no_url_settings")
def test_both_servers_start_within_budget_and_stop_completely() -> None:
    began = time.perf_counter()
    infra = Infra().start()
    elapsed = time.perf_counter() - began
    try:
        pids = [s.pid for s in infra.servers]
        assert sorted(server_children(os.getpid()).get(p or 0, "") for p in pids) == sorted(SERVER_PROGRAMS)
        assert elapsed <= STARTUP_BUDGET, f"startup of NATS + Redis took {elapsed:.2f}s"
    finally:
        infra.stop()
    assert not any(alive(p or 0) for p in pids)


@pytest.mark.usefixtures("no_url_settings")
def test_a_failed_start_stops_the_server_that_did_start(tmp_path: Path) -> None:
    # valkey cannot start when its append-only folder is a file; NATS starts fine.
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "appendonlydir").write_text("not a folder")
    before = server_children(os.getpid())
    with pytest.raises(InfraError, match="valkey-server exited") as err:
        Infra(tmp_path).start()
    assert "append-only" in str(err.value)  # the server's own words, from its log
    assert server_children(os.getpid()) == before


CHILD_STARTS_INFRA = """
import sys
from lahar.infra import Infra
infra = Infra().start()
print(infra.nats_url, flush=True)
sys.stdin.read()  # wait to be killed
"""


def test_sigkilled_parent_leaves_no_server() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_STARTS_INFRA],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
        env=env_without_url_settings(),
    )
    try:
        read_lines(child.stdout, 1)  # type: ignore[arg-type]
        servers = server_children(child.pid)
        assert sorted(servers.values()) == sorted(SERVER_PROGRAMS)
    finally:
        child.kill()  # SIGKILL: no Python code of the child runs any more
        child.wait()
    wait_until(lambda: not any(alive(p) for p in servers), f"servers {servers} gone after their parent's SIGKILL")


SESSION_TEST = """
import json, os
from pathlib import Path

import pytest

def alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"

@pytest.fixture(scope="session")
def report():
    pids = []
    yield pids
    # Set up before lahar_infra, so torn down after it, in the same process: the servers must
    # already be gone, stopped by the fixture rather than killed when this process exits.
    Path(os.environ["REPORT"]).write_text(json.dumps([p for p in pids if alive(p)]))

def test_uses_the_servers(report, lahar_infra):
    report.extend(s.pid for s in lahar_infra.servers)
    assert len(report) == 2 and all(alive(p) for p in report)
"""


def test_session_fixtures_leave_no_server_after_the_session(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    report = tmp_path / "alive.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "lahar.infra.pytest_plugin", "-p", "no:cacheprovider",
         "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_session.py")],
        # Without autoloaded plugins (hypothesis, asyncio, ...) the inner session starts twice as fast.
        cwd=tmp_path, env=env_without_url_settings(REPORT=str(report), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert report.read_text() == "[]"


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
async def test_cli_runs_servers_until_signalled(stop_signal: signal.Signals) -> None:
    cli = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "infra"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        env=env_without_url_settings(),
    )
    try:
        lines = read_lines(cli.stdout, 3)  # type: ignore[arg-type]
        settings = dict(line.split("=", 1) for line in lines)
        assert sorted(settings) == [NATS_CA_ENV, NATS_URL_ENV, REDIS_URL_ENV]
        servers = server_children(cli.pid)
        assert sorted(servers.values()) == sorted(SERVER_PROGRAMS)
        assert redis.Redis.from_url(settings[REDIS_URL_ENV]).ping()
        await (await connect_nats(settings[NATS_URL_ENV], ca=settings[NATS_CA_ENV])).close()

        cli.send_signal(stop_signal)
        assert cli.wait(timeout=DEADLINE) == 0, cli.stderr.read()  # type: ignore[union-attr]
    finally:
        cli.kill()
        cli.wait()
    assert not any(alive(p) for p in servers)  # stopped by the command, before it exited


def test_cli_rejects_an_invalid_url_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lahar.cli.main import build_parser

    monkeypatch.setenv(REDIS_URL_ENV, "localhost:6379")
    args = build_parser().parse_args(["infra"])
    assert args.handler(args) == 2
    assert f"lahar infra: {REDIS_URL_ENV}: " in capsys.readouterr().err


@pytest.mark.usefixtures("no_url_settings")
@pytest.mark.parametrize("start", [start_nats, start_redis], ids=["nats", "redis"])
def test_a_server_that_loses_the_race_for_its_port_moves_to_another(
    monkeypatch: pytest.MonkeyPatch, start: Callable[[], Server]
) -> None:
    # Someone else takes the port between free_port() and the server's bind: the first pick is a
    # port we hold ourselves, later picks are genuinely free.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        picks = iter([busy])
        real_free_port = process.free_port
        monkeypatch.setattr(process, "free_port", lambda host: next(picks, None) or real_free_port(host))
        server = start()
        try:
            assert server.url.rsplit(":", 1)[1].split("/")[0] != str(busy)
            assert server.running
        finally:
            server.stop()
