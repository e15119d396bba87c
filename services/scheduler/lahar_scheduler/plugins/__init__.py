"""The registry of plugins, in one explicit list."""

from __future__ import annotations

from typing import Any

from lahar_scheduler.framework.conf import ArgsParser, args_parser
from lahar_scheduler.framework.plugin import Plugin
from lahar_scheduler.plugins.binpack import BinpackPlugin
from lahar_scheduler.plugins.capacity import CapacityPlugin
from lahar_scheduler.plugins.cdp import CdpPlugin
from lahar_scheduler.plugins.conformance import ConformancePlugin
from lahar_scheduler.plugins.deviceshare import DeviceSharePlugin
from lahar_scheduler.plugins.drf import DrfPlugin
from lahar_scheduler.plugins.extender import ExtenderPlugin
from lahar_scheduler.plugins.gang import GangPlugin
from lahar_scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from lahar_scheduler.plugins.nodegroup import NodeGroupPlugin
from lahar_scheduler.plugins.nodeorder import NodeOrderPlugin
from lahar_scheduler.plugins.numaaware import NumaAwarePlugin
from lahar_scheduler.plugins.overcommit import OvercommitPlugin
from lahar_scheduler.plugins.pdb import PdbPlugin
from lahar_scheduler.plugins.predicates import PredicatesPlugin
from lahar_scheduler.plugins.priority import PriorityPlugin
from lahar_scheduler.plugins.proportion import ProportionPlugin
from lahar_scheduler.plugins.reservation import ReservationPlugin
from lahar_scheduler.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
from lahar_scheduler.plugins.resourcequota import ResourceQuotaPlugin
from lahar_scheduler.plugins.sla import SlaPlugin
from lahar_scheduler.plugins.task_topology import TaskTopologyPlugin
from lahar_scheduler.plugins.tdm import TdmPlugin
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
    DeviceSharePlugin,
    NumaAwarePlugin,
    ReservationPlugin,
    CdpPlugin,
    PdbPlugin,
    TdmPlugin,
    NodeGroupPlugin,
    ExtenderPlugin,
    TaskTopologyPlugin,
    NetworkTopologyAwarePlugin,
):
    PLUGINS.register(_plugin.name, _plugin)

# Plugins Volcano registers (pkg/scheduler/plugins/factory.go at ed72c7c8) that Lahar does not
# have yet, with what each does there: a configuration naming one is told so, not "unknown".
UNSUPPORTED_PLUGINS: dict[str, str] = {
    "rescheduling": "evicts pods from busy nodes to rebalance (low node utilisation)",
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
