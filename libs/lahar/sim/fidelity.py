"""Emulator fidelity, measured: one scripted sequence of API calls run against two API servers
(the emulator and a real kube-apiserver), compared step by step.

A step (``fidelity_steps.py``) makes its calls through a ``Client`` and returns a *record*: the
facts it observed (HTTP codes, reply bodies, watch events) as plain JSON data.  ``normalize``
then removes what is expected to differ between any two servers, runs or calls (uids,
resourceVersions, timestamps, the run's namespace, generated names), ``diff`` lists what is
left as ``path: left != right`` lines, and ``judge`` sorts each difference into *known* (in the
allow-list of ``fidelity_known.py``, with its reason) or *new*.

The comparison is pure (no I/O); ``Client`` is the only part that talks HTTP (httpx).
"""

from __future__ import annotations

import base64
import fnmatch
import re
import secrets
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import yaml

Obj = dict[str, Any]
Record = dict[str, Any]

# Keys whose values differ between any two servers or runs: compared by presence and type only.
VOLATILE = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "lastTransitionTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "lastUpdateTime",
        "startTime",
        "startedAt",
        "finishedAt",
        "continue",
        "clusterIP",
        "clusterIPs",
        "podIP",
        "podIPs",
        "hostIP",
        "hostIPs",
        "time",
    }
)
# Keys left out of the comparison altogether, each for a reason listed in the emulator's README
# ("What it does not emulate"): comparing them would only repeat that one difference in every step.
IGNORED = frozenset({"managedFields"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NUMBER = re.compile(r"\d+")
# The API server's generateName suffix: five characters of its vowel-free alphabet.
_GENERATED = re.compile(r"(gen-|kube-api-access-)[bcdfghjklmnpqrstvwxz2456789]{5}\b")


# --- the pure part: normalise, diff, judge ---------------------------------------------------------------


def normalize(value: Any, run_id: str, key: str = "") -> Any:
    """``value`` with what may differ between servers and runs replaced by placeholders."""
    if isinstance(value, dict):
        return {k.replace(run_id, "<run>"): normalize(v, run_id, k) for k, v in value.items() if k not in IGNORED}
    if isinstance(value, list):
        if key in VOLATILE:
            return f"<{type(value).__name__}>"
        return [normalize(v, run_id, key) for v in value]
    if key in VOLATILE and value is not None:
        return f"<{type(value).__name__}>"
    if isinstance(value, str):
        text = _GENERATED.sub(r"\1<suffix>", _UUID.sub("<uid>", value.replace(run_id, "<run>")))
        if key == "message":
            # Messages carry resourceVersions, ports and durations: compare their words.
            text = _NUMBER.sub("N", text)
        return text
    return value


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": [1]}}`` → ``{"a.b[0]": 1}``; empty maps and lists stay as leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


_MISSING = "<absent>"


@dataclass(frozen=True)
class Difference:
    path: str
    left: Any
    right: Any

    def __str__(self) -> str:
        return f"{self.path}: {_show(self.left)} != {_show(self.right)}"


def _show(value: Any) -> str:
    if value == _MISSING:
        return _MISSING
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 120 else text[:117] + "..."


def diff(left: Any, right: Any) -> list[Difference]:
    """Leaf-by-leaf differences of two normalised records."""
    a, b = flatten(left), flatten(right)
    out = []
    for path in sorted(a.keys() | b.keys()):
        x, y = a.get(path, _MISSING), b.get(path, _MISSING)
        if x != y:
            out.append(Difference(path, x, y))
    return out


@dataclass(frozen=True, eq=False)
class Known:
    """A difference we accept: ``paths`` (fnmatch patterns) of step ``step``, and why."""

    step: str
    paths: tuple[str, ...]
    reason: str

    def covers(self, step: str, path: str) -> bool:
        return step == self.step and any(fnmatch.fnmatchcase(path, p) for p in self.paths)


@dataclass
class Verdict:
    step: str
    known: list[tuple[Difference, Known]] = field(default_factory=list)
    new: list[Difference] = field(default_factory=list)
    error: str = ""  # the step itself failed on one side

    @property
    def same(self) -> bool:
        return not self.known and not self.new and not self.error


def judge(step: str, left: Record, right: Record, run_ids: tuple[str, str], known: list[Known]) -> Verdict:
    verdict = Verdict(step)
    for d in diff(normalize(left, run_ids[0]), normalize(right, run_ids[1])):
        entry = next((k for k in known if k.covers(step, d.path)), None)
        if entry is None:
            verdict.new.append(d)
        else:
            verdict.known.append((d, entry))
    return verdict


def stale(verdicts: list[Verdict], known: list[Known]) -> list[str]:
    """Allow-list patterns that matched no difference: fixed in the emulator, or wrong."""
    used = {(k.step, p) for v in verdicts for d, k in v.known for p in k.paths if fnmatch.fnmatchcase(d.path, p)}
    return [f"{k.step}: {p}" for k in known for p in k.paths if (k.step, p) not in used]


def report_lines(verdicts: list[Verdict]) -> Iterator[str]:
    for v in verdicts:
        if v.error:
            yield f"{v.step}: ERROR {v.error}"
        elif v.same:
            yield f"{v.step}: same"
        else:
            label = "differs" if v.new else "differs (known)"
            yield f"{v.step}: {label}"
            for d in v.new:
                yield f"    NEW   {d}"
            for entry in dict.fromkeys(k for _, k in v.known):
                yield f"    known: {entry.reason}"
                for d, k in v.known:
                    if k is entry:
                        yield f"        {d}"


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


def compare(
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
