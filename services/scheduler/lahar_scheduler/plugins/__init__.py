"""The registry of plugins, in one explicit list."""

from __future__ import annotations

from typing import Any

from lahar_scheduler.framework.conf import ArgsParser, args_parser
from lahar_scheduler.framework.plugin import Plugin
from lahar_scheduler.plugins.binpack import BinpackPlugin
from lahar_scheduler.plugins.capacity import CapacityPlugin
from lahar_scheduler.plugins.conformance import ConformancePlugin
from lahar_scheduler.plugins.drf import DrfPlugin
from lahar_scheduler.plugins.gang import GangPlugin
from lahar_scheduler.plugins.nodeorder import NodeOrderPlugin
from lahar_scheduler.plugins.overcommit import OvercommitPlugin
from lahar_scheduler.plugins.predicates import PredicatesPlugin
from lahar_scheduler.plugins.priority import PriorityPlugin
from lahar_scheduler.plugins.proportion import ProportionPlugin
from lahar_scheduler.plugins.reservation import ReservationPlugin
from lahar_scheduler.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
from lahar_scheduler.plugins.resourcequota import ResourceQuotaPlugin
from lahar_scheduler.plugins.sla import SlaPlugin
from lahar_scheduler.registry import Registry

PLUGINS: Registry[type[Plugin]] = Registry("plugin")
for _plugin in (
    GangPlugin,
    PriorityPlugin,
    ConformancePlugin,
    DrfPlugin,
    ProportionPlugin,
    PredicatesPlugin,
    NodeOrderPlugin,
    BinpackPlugin,
    OvercommitPlugin,
    SlaPlugin,
    ResourceStrategyFitPlugin,
    CapacityPlugin,
    ResourceQuotaPlugin,
    ReservationPlugin,
):
    PLUGINS.register(_plugin.name, _plugin)

# Plugins Volcano registers (pkg/scheduler/plugins/factory.go at ed72c7c8) that Lahar does not
# have yet, with what each does there: a configuration naming one is told so, not "unknown".
UNSUPPORTED_PLUGINS: dict[str, str] = {
    "cdp": "cooldown protection: elastic pods are not preempted again until a cooldown time after they start",
    "deviceshare": "GPU and NPU sharing and exclusive devices",
    "extender": "calls an external HTTP scheduler extender",
    "network-topology-aware": "places jobs within hyper-node network topology tiers",
    "nodegroup": "queue affinity to node groups",
    "numa-aware": "NUMA topology aware placement (cpu manager policies)",
    "pdb": "PodDisruptionBudgets limit which pods may be evicted",
    "rescheduling": "evicts pods from busy nodes to rebalance (low node utilisation)",
    "task-topology": "affinity and anti-affinity between the tasks of a job",
    "tdm": "time-division multiplexing of revocable nodes",
    "usage": "filters and scores nodes by their measured usage",
}


def argument_parsers() -> dict[str, ArgsParser]:
    """Each plugin's argument validator (a custom ``parse_args`` or its ``Args`` struct)."""
    out: dict[str, ArgsParser] = {}
    for name, cls in PLUGINS.items():
        custom: Any = getattr(cls, "parse_args", None)
        out[name] = custom if custom is not None else args_parser(cls.Args)
    return out


__all__ = ["PLUGINS", "UNSUPPORTED_PLUGINS", "Plugin", "argument_parsers"]
