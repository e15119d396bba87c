"""HTTP for the extender plugin: the scheduler service's ``ExtenderTransport``.

The scheduling core runs a session in a worker thread and calls its extender synchronously, one
call at a time (as Volcano's plugin does), so this is httpx's synchronous client: one pooled
connection per extender kept across sessions, a timeout per call, and every failure turned into
the core's ``TransportError``.  httpx rather than aiohttp (used by the kube adapter for many
concurrent calls): here there is no event loop in the calling thread and no concurrency to pool.
"""

from __future__ import annotations

import httpx

from lahar_scheduler.framework.ports import TransportError

MAX_BODY = 10 << 20  # as Volcano's http.MaxBytesReader


class HttpExtenderTransport:
    def __init__(self) -> None:
        # Made at the first call: a client builds its TLS context up front (~60 ms, on a
        # restarting scheduler's way to its first decision), and most configurations name no
        # extender.  Calls come from one session thread at a time, so no lock.
        self._client: httpx.Client | None = None

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(headers={"Content-Type": "application/json"})
        return self._client

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        try:
            with self.client.stream("POST", url, content=body, timeout=timeout) as resp:
                if resp.status_code != 200:
                    raise TransportError(f"HTTP {resp.status_code}", status=resp.status_code)
                data = bytearray()
                for chunk in resp.iter_bytes():
                    data += chunk
                    if len(data) > MAX_BODY:
                        raise TransportError(f"reply larger than {MAX_BODY} bytes")
                return bytes(data)
        except httpx.HTTPError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
