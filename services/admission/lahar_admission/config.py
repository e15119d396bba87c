"""Service settings, typed, from ``lahar admission serve`` flags and ``LAHAR_ADMISSION_*`` variables.

A flag wins over its environment variable.  Every value is checked before the service starts,
and all problems are reported together (``SettingsError.problems``), each naming the flag.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar_admission.rules import WEBHOOKS

ENV_PREFIX = "LAHAR_ADMISSION_"
# Which cluster lookups each kind needs, for the --on-unavailable policy.
POLICY_KINDS = ("jobs", "queues", "podgroups", "pods")
DEFAULT_ON_UNAVAILABLE = {"jobs": "deny", "queues": "deny", "podgroups": "deny", "pods": "allow"}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


class SettingsError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid settings:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ServiceSettings:
    host: str = "0.0.0.0"
    port: int = 8443
    cert_file: str = ""
    key_file: str = ""
    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: str = "lahar"
    admission_conf: str = ""
    scheduler_names: tuple[str, ...] = ("volcano",)
    enabled_admission: tuple[str, ...] = tuple(WEBHOOKS)
    max_queue_depth: int = 5
    enable_queue_allocated_pods_check: bool = False
    enable_root_queue_protection: bool = True
    pod_level_resources: bool = True
    scheduling_gates_queue_admission: bool = False
    schema_checks: bool = True
    default_timeout: float = 10.0
    on_unavailable: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_ON_UNAVAILABLE))
    mirror_refresh: float = 0.5
    mirror_max_staleness: float = 5.0
    cert_poll: float = 1.0
    max_body_bytes: int = 3 * 1024 * 1024
    log_level: str = "info"


def parse_duration(text: str) -> float:
    """``10s``, ``500ms``, ``1m`` or a bare number of seconds (the API server sends ``?timeout=10s``)."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a duration such as 10s, 500ms or 1m")
    value = float(m.group(1))
    return value / 1000 if m.group(2) == "ms" else value * 60 if m.group(2) == "m" else value


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


def _int(text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if not low <= value <= high:
        raise ValueError(f"{value} is not between {low} and {high}")
    return value


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"{text!r} must be greater than zero")
    return value


def _names(text: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise ValueError("at least one name is needed")
    return items


def _paths(text: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [p for p in items if p not in WEBHOOKS]
    if unknown:
        raise ValueError(f"unknown webhook path(s) {', '.join(unknown)}; known: {', '.join(WEBHOOKS)}")
    return items


def _on_unavailable(text: str) -> dict[str, str]:
    """``allow``/``deny`` for every kind, or ``jobs=deny,pods=allow`` for some of them."""
    out = dict(DEFAULT_ON_UNAVAILABLE)
    for item in (s.strip() for s in text.split(",") if s.strip()):
        kind, eq, value = item.partition("=")
        if not eq:
            kind, value = "*", kind
        if value not in ("allow", "deny"):
            raise ValueError(f"{item!r}: the policy must be allow or deny")
        if kind == "*":
            out = dict.fromkeys(POLICY_KINDS, value)
        elif kind in POLICY_KINDS:
            out[kind] = value
        else:
            raise ValueError(f"{item!r}: unknown kind {kind!r}; known: {', '.join(POLICY_KINDS)}")
    return out


def _log_level(text: str) -> str:
    if text.lower() not in ("debug", "info", "warning", "error"):
        raise ValueError(f"{text!r} is not one of debug, info, warning, error")
    return text.lower()


# setting name → parser of its text form
PARSERS: dict[str, Any] = {
    "host": str,
    "port": lambda t: _int(t, 1, 65535),
    "cert_file": str,
    "key_file": str,
    "redis_url": str,
    "prefix": str,
    "admission_conf": str,
    "scheduler_names": _names,
    "enabled_admission": _paths,
    "max_queue_depth": lambda t: _int(t, 1, 1000),
    "enable_queue_allocated_pods_check": _bool,
    "enable_root_queue_protection": _bool,
    "pod_level_resources": _bool,
    "scheduling_gates_queue_admission": _bool,
    "schema_checks": _bool,
    "default_timeout": _positive_duration,
    "on_unavailable": _on_unavailable,
    "mirror_refresh": _positive_duration,
    "mirror_max_staleness": _positive_duration,
    "cert_poll": _positive_duration,
    "max_body_bytes": lambda t: _int(t, 1024, 64 * 1024 * 1024),
    "log_level": _log_level,
}


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_of(name: str) -> str:
    return ENV_PREFIX + name.upper()


def load_settings(flags: Mapping[str, str | None], environ: Mapping[str, str] | None = None) -> ServiceSettings:
    """Settings from flag texts (None = not given) over environment variables over defaults."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, parse in PARSERS.items():
        text = flags.get(name)
        source = flag_of(name)
        if text is None and env_of(name) in env:
            text, source = env[env_of(name)], env_of(name)
        if text is None:
            continue
        try:
            values[name] = parse(text)
        except ValueError as exc:
            problems.append(f"{source}: {exc}")
    settings = ServiceSettings(**values)
    problems += _cross_checks(settings)
    if problems:
        raise SettingsError(problems)
    return settings


def _cross_checks(s: ServiceSettings) -> list[str]:
    problems = []
    for name in ("cert_file", "key_file"):
        value = getattr(s, name)
        if not value:
            problems.append(f"{flag_of(name)}: required (or set {env_of(name)})")
        elif not Path(value).is_file():
            problems.append(f"{flag_of(name)}: {value} is not a readable file")
    if s.admission_conf and not Path(s.admission_conf).is_file():
        problems.append(f"--admission-conf: {s.admission_conf} is not a readable file")
    if not s.redis_url.startswith(("redis://", "rediss://", "unix://")):
        problems.append(f"--redis-url: {s.redis_url!r} must start with redis://, rediss:// or unix://")
    if s.mirror_max_staleness < s.mirror_refresh:
        problems.append("--mirror-max-staleness: must be at least --mirror-refresh")
    return problems
