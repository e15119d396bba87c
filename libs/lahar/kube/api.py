"""A few synchronous API calls for starting the control plane (readiness, CRDs, nodes).

The services talk to the API through ``lahar.adapters.kube`` (asyncio); starting a cluster is a
short sequence of blocking steps, so the standard library is enough here.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass
class Api:
    url: str
    token: str
    ca: Path

    def __post_init__(self) -> None:
        self._ssl = ssl.create_default_context(cafile=str(self.ca))

    def call(self, method: str, path: str, body: Obj | None = None, timeout: float = 10.0) -> Obj:
        """The decoded reply; ApiError for an HTTP error, OSError when the server is unreachable."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.read().decode(errors="replace")[:500]) from None
        try:
            reply: Obj = json.loads(raw) if raw.strip().startswith(b"{") else {"text": raw.decode(errors="replace")}
        except ValueError:
            reply = {"text": raw.decode(errors="replace")}
        return reply

    def create(self, path: str, obj: Obj) -> bool:
        """Create ``obj``; False when it already exists."""
        try:
            self.call("POST", path, obj)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True
