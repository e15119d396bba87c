"""What the core may ask of the outside world, as small protocols the service shell implements.

The core does no I/O itself; a plugin that must talk to something (the extender plugin's HTTP
scheduler extender) calls a port the shell injected into the session.  Without one, the call
fails as an unreachable endpoint would, so an offline run behaves like a cluster whose extender
is down.
"""

from __future__ import annotations

from typing import Protocol


class TransportError(Exception):
    """A call that got no usable answer: unreachable, timed out, or an HTTP status other than 200
    (``status`` then holds it)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ExtenderTransport(Protocol):
    """POSTs a JSON body to a URL and returns the reply's body (Volcano's extender protocol)."""

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        """The 200 reply's body; raises ``TransportError`` for anything else."""
        ...


class NoTransport:
    """The port of a session nobody gave one: every call fails as unreachable."""

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        raise TransportError("no extender transport in this run (offline)")
