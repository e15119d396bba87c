"""Webhook-manager settings the rules read (Volcano's flags and feature gates).

Defaults are Volcano's shipped ones, which every conformance case assumes.  ``time_zones`` is
the set of IANA zone names ``/cronjobs/validate`` accepts; it is data handed to the rules (the
service loads it from the tz database at start-up) so the rules themselves never touch files.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RuleSettings:
    scheduler_names: tuple[str, ...] = ("volcano",)
    max_queue_depth: int = 5
    enable_queue_allocated_pods_check: bool = False
    enable_root_queue_protection: bool = True
    pod_level_resources: bool = True
    scheduling_gates_queue_admission: bool = False
    # Also reject what Volcano's CRD schemas reject (doc §6), for clusters without those schemas.
    schema_checks: bool = True
    time_zones: frozenset[str] = field(default_factory=frozenset)


def load_time_zones() -> frozenset[str]:
    """Every zone name the tz database knows (with "UTC", which Go always accepts)."""
    import zoneinfo

    return frozenset(zoneinfo.available_timezones()) | {"UTC"}
