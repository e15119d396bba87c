"""The pure part of the fidelity comparison: ``normalize`` removes what is expected to differ
between any two servers, runs or calls (uids, resourceVersions, timestamps, the run's namespace,
generated name suffixes), ``diff`` lists what is left as ``path: left != right``, and ``judge``
sorts each difference into *known* (in the allow-list, with its reason) or *new*.  No I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

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
