"""The HTTP part of the fidelity comparison: a plain client for one API server (httpx), and the
runner that plays a sequence of steps on two of them and judges each step."""

from __future__ import annotations

import base64
import secrets
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import yaml

from lahar.sim.fidelity.compare import Known, Obj, Record, Verdict, judge

# --- the HTTP part --------------------------------------------------------------------------------------


@dataclass
class Reply:
    code: int
    body: Any  # decoded JSON, or the text when it is not JSON

    def record(self) -> Record:
        return {"code": self.code, "body": self.body}


class Client:
    """Plain HTTP to one API server, with its credentials; every call returns a ``Reply`` (an HTTP
    error is an observation here, not an exception)."""

    def __init__(self, name: str, url: str, token: str | None = None, ca_pem: str | None = None) -> None:
        self.name = name
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        verify: ssl.SSLContext | bool = ssl.create_default_context(cadata=ca_pem) if ca_pem else True
        self.http = httpx.Client(base_url=url, headers=headers, verify=verify, timeout=15.0)
        self.run_id = "fid-" + secrets.token_hex(3)
        self.state: Obj = {}  # what one step leaves for a later one (names, resourceVersions)

    @classmethod
    def from_kubeconfig(cls, name: str, path: str) -> Client:
        """A client for the current context of a kubeconfig (server, bearer token, CA data)."""
        config = yaml.safe_load(Path(path).read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user: Obj = next((u["user"] for u in config.get("users") or [] if u["name"] == context.get("user")), {})
        ca = cluster.get("certificate-authority-data")
        ca_pem = base64.b64decode(ca).decode() if ca else None
        if ca_pem is None and cluster.get("certificate-authority"):
            ca_pem = Path(cluster["certificate-authority"]).read_text()
        return cls(name, cluster["server"], (user or {}).get("token"), ca_pem)

    def close(self) -> None:
        self.http.close()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        accept: str = "application/json",
    ) -> Reply:
        content = body if isinstance(body, bytes) else (msgspec.json.encode(body) if body is not None else None)
        headers = {"Accept": accept}
        if content is not None:
            headers["Content-Type"] = content_type
        resp = self.http.request(method, path, content=content, params=params, headers=headers)
        return Reply(resp.status_code, _decode(resp.content, resp.text))

    def get(self, path: str, **params: str) -> Reply:
        return self.call("GET", path, params=params or None)

    def watch(self, path: str, params: dict[str, str], until: Callable[[list[Obj]], bool], seconds: float = 8) -> Obj:
        """Open a watch and read events until ``until(events)`` or the deadline; ``{code, events}``."""
        params = {"watch": "true", "timeoutSeconds": str(int(seconds) + 1), **params}
        events: list[Obj] = []
        deadline = time.monotonic() + seconds
        with self.http.stream("GET", path, params=params, timeout=seconds + 5) as resp:
            if resp.status_code != 200:
                resp.read()
                return Reply(resp.status_code, _decode(resp.content, resp.text)).record()
            for line in resp.iter_lines():
                if line.strip():
                    events.append(msgspec.json.decode(line))
                if until(events) or time.monotonic() > deadline:
                    break
        return {"code": 200, "events": events}

    def poll(self, check: Callable[[], bool], seconds: float = 10.0, interval: float = 0.1) -> bool:
        """Whether ``check()`` came true before the deadline."""
        deadline = time.monotonic() + seconds
        while True:
            if check():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(interval)


def _decode(content: bytes, text: str) -> Any:
    try:
        return msgspec.json.decode(content) if content else None
    except msgspec.DecodeError:
        return text


# --- running a sequence on two servers -------------------------------------------------------------------

Step = Callable[[Client], Record]


def run_steps(client: Client, steps: list[tuple[str, Step]]) -> dict[str, Record]:
    """Every step's record; a step that raises records the error (and the sequence goes on)."""
    out: dict[str, Record] = {}
    for name, step in steps:
        try:
            out[name] = step(client)
        except Exception as exc:  # one broken step must not hide the others' results
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def compare_servers(
    left: Client, right: Client, steps: list[tuple[str, Step]], known: list[Known]
) -> tuple[list[Verdict], dict[str, Record], dict[str, Record]]:
    a, b = run_steps(left, steps), run_steps(right, steps)
    verdicts = []
    for name, _ in steps:
        if "error" in a[name] or "error" in b[name]:
            errors = [f"{c.name}: {r[name]['error']}" for c, r in ((left, a), (right, b)) if "error" in r[name]]
            verdicts.append(Verdict(name, error="; ".join(errors)))
            continue
        verdicts.append(judge(name, a[name], b[name], (left.run_id, right.run_id), known))
    return verdicts, a, b
