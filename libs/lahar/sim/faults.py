"""Injected latency and errors per verb, to test clients under stress.

Verbs are the request verbs (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``, ``deletecollection``) and the subresources ``binding``, ``eviction`` and ``status``;
``*`` applies to every verb.  Errors are 500 InternalError or 429 TooManyRequests Status replies.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import Any

from lahar.sim.errors import ApiError

VERBS = (
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "binding",
    "eviction",
    "status",
    "*",
)
_DURATION = re.compile(r"^([0-9]*\.?[0-9]+)(ms|s|us)?$")


class FaultSpecError(ValueError):
    pass


@dataclass
class Faults:
    latency: dict[str, float] = field(default_factory=dict)  # verb -> seconds
    error_rate: dict[str, float] = field(default_factory=dict)  # verb -> probability
    error_codes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # verb -> codes to draw from
    rng: random.Random = field(default_factory=random.Random)

    def set_latency(self, verb: str, seconds: float) -> None:
        _check_verb(verb)
        if seconds < 0:
            raise FaultSpecError(f"latency for {verb}: must not be negative")
        if seconds:
            self.latency[verb] = seconds
        else:
            self.latency.pop(verb, None)

    def set_error_rate(self, verb: str, rate: float, codes: tuple[int, ...] = (500, 429)) -> None:
        _check_verb(verb)
        if not 0 <= rate <= 1:
            raise FaultSpecError(f"error rate for {verb}: {rate} is not between 0 and 1")
        if any(code not in (429, 500, 503) for code in codes) or not codes:
            raise FaultSpecError(f"error codes for {verb}: choose among 429, 500 and 503")
        if rate:
            self.error_rate[verb] = rate
            self.error_codes[verb] = codes
        else:
            self.error_rate.pop(verb, None)

    def clear(self) -> None:
        self.latency.clear()
        self.error_rate.clear()
        self.error_codes.clear()

    def active(self) -> bool:
        return bool(self.latency or self.error_rate)

    async def apply(self, verb: str) -> None:
        """Sleep and/or raise as configured for ``verb``."""
        delay = self.latency.get(verb, self.latency.get("*", 0.0))
        if delay:
            await asyncio.sleep(delay)
        key = verb if verb in self.error_rate else "*"
        rate = self.error_rate.get(key, 0.0)
        if rate and self.rng.random() < rate:
            raise injected(self.rng.choice(self.error_codes.get(key, (500, 429))), verb)

    def to_json(self) -> dict[str, Any]:
        return {
            "latency": dict(self.latency),
            "errorRate": dict(self.error_rate),
            "errorCodes": {k: list(v) for k, v in self.error_codes.items()},
        }


def injected(code: int, verb: str) -> ApiError:
    if code == 429:
        return ApiError(
            429,
            "TooManyRequests",
            f"the server has received too many requests and has asked us to try again later (injected fault on {verb})",
            {"retryAfterSeconds": 1},
            headers=[(b"retry-after", b"1")],
        )
    if code == 503:
        return ApiError(
            503,
            "ServiceUnavailable",
            f"the server is currently unable to handle the request (injected fault on {verb})",
        )
    return ApiError(500, "InternalError", f"Internal error occurred: injected fault on {verb}")


def _check_verb(verb: str) -> None:
    if verb not in VERBS:
        raise FaultSpecError(f"unknown verb {verb!r}; choose among {', '.join(VERBS)}")


def parse_duration(text: str) -> float:
    """``50ms``, ``0.5s``, ``200us`` or a bare number of seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise FaultSpecError(f"{text!r} is not a duration (e.g. 50ms, 0.5s)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value / {"s": 1, "ms": 1000, "us": 1_000_000}[unit]


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    verb, sep, value = text.partition("=")
    if not sep or not verb or not value:
        raise FaultSpecError(f"{option} {text!r}: expected VERB=VALUE, e.g. binding=50ms")
    _check_verb(verb)
    return verb, value


def apply_specs(faults: Faults, latency: list[str], error_rate: list[str]) -> None:
    """Apply ``--latency VERB=DURATION`` and ``--error-rate VERB=RATE[:CODE...]`` options."""
    for spec in latency:
        verb, value = parse_assignment(spec, "--latency")
        faults.set_latency(verb, parse_duration(value))
    for spec in error_rate:
        verb, value = parse_assignment(spec, "--error-rate")
        rate_text, _, codes_text = value.partition(":")
        try:
            rate = float(rate_text)
            codes = tuple(int(c) for c in codes_text.split("+")) if codes_text else (500, 429)
        except ValueError:
            raise FaultSpecError(
                f"--error-rate {spec!r}: expected VERB=RATE[:CODE[+CODE]], e.g. binding=0.01:429"
            ) from None
        faults.set_error_rate(verb, rate, codes)
