"""Child server processes that cannot outlive the Python process that started them.

Two mechanisms, because each covers what the other cannot:

* **Own process group** (``process_group=0``).  A Ctrl-C in a terminal signals the whole
  foreground group; in their own group the servers are not hit directly, so the parent can stop
  them in order.  And ``stop()`` signals the group, which also reaches any helper a server forks
  (valkey forks for BGSAVE and AOF rewrites).  But a group is only a label: when the parent is
  SIGKILLed nobody is left to signal it.
* **Parent-death signal** (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``).  The kernel itself kills
  the child when its parent dies, however it dies, SIGKILL included.  It reaches only the direct
  child (hence the group above for helpers), and it fires when the *thread* that forked the child
  exits, not the process: so servers must be started from a long-lived thread (the main thread or
  the event loop's thread), never from a short-lived worker such as ``asyncio.to_thread``.

On systems without ``prctl`` (macOS) only the process group is used.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Defer Ctrl-C and SIGTERM (in this thread) while a child is started and recorded: a
    KeyboardInterrupt in between would leave a child nobody knows to stop, and one raised inside
    the fork hooks is only printed, not raised.  Children unblock them first thing."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free now.  Another process may take it before the server binds it, so callers
    detect "address already in use" and try again with a new port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def spawn(
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    append: bool = False,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, tied to our life, output into ``log_path``.

    Output goes to a file, not a pipe: nobody drains a pipe while the server runs, and a full pipe
    would block the server.  A restarted child appends, so its earlier life stays readable."""
    with log_path.open("ab" if append else "wb") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=_die_with_parent(),
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )


def stop(proc: subprocess.Popen[bytes], timeout: float, *, signalled: bool = False) -> None:
    """SIGTERM the server's group, SIGKILL it if it has not exited within ``timeout`` seconds.
    ``signalled``: the caller sent SIGTERM already (to stop several at once); a second one would
    mean "stop now, skip the clean shutdown" to our services."""
    if proc.poll() is None:
        if not signalled:
            _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    # A helper the server forked may still hold the group.  The group id cannot be reused while
    # any member lives, so this reaches only our leftovers (or nobody).
    _signal_group(proc.pid, signal.SIGKILL)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the server's group at once, as a crash would, and reap it."""
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pgid, sig)


def _die_with_parent() -> Callable[[], None]:
    if sys.platform != "linux":
        return _unblock
    # Resolve prctl before forking: the child should do as little as possible between fork and exec.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        _unblock()
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            # Popen reports this as a failed start rather than running a server that may leak.
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        # If the parent died between fork and prctl, the signal will never come: go now.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _unblock() -> None:
    # The signal mask survives fork and exec: a child started under signals_held() must not keep it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
