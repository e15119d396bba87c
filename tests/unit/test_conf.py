"""Scheduler configuration: defaults of the enable flags, whole-document validation, built-in default."""

from __future__ import annotations

import pytest

from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.conf import FLAGS, ConfError
from lahar_scheduler.framework.points import POINTS
from lahar_scheduler.plugins import PLUGINS, UNSUPPORTED_PLUGINS


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfError) as info:
        load_conf(text)
    return info.value.errors


def test_absent_flags_are_true_except_enable_hierarchy() -> None:
    conf = load_conf("actions: allocate\ntiers:\n- plugins:\n  - name: drf\n")
    opt = conf.tiers[0].plugins[0]
    assert opt.flags == {}
    for flag in FLAGS:
        assert opt.enabled(flag) is (flag != "enableHierarchy"), flag


def test_explicit_flags_are_kept() -> None:
    conf = load_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableJobReady: false\n"
        "  - name: drf\n    enableHierarchy: true\n"
    )
    gang, drf = conf.tiers[0].plugins
    assert not gang.enabled("enableJobReady") and gang.enabled("enableJobOrder")
    assert drf.enabled("enableHierarchy")


def test_every_extension_point_flag_is_a_known_option() -> None:
    for point in POINTS.values():
        flags = point.flag if isinstance(point.flag, tuple) else (point.flag,)
        assert all(flag is None or flag in FLAGS for flag in flags), point.name


def test_actions_are_a_comma_separated_string_in_order() -> None:
    conf = load_conf("actions: ' enqueue,allocate , backfill,'\n")
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert conf.tiers == []


def test_every_error_is_reported_at_once_with_its_path() -> None:
    text = """
actions: "enqueue, allocate, preempt2"
extra: 1
tiers:
- plugins:
  - name: priority
    enableJobOrder: "yes"
  - name: gang
    enableFoo: true
  - name: nosuch
- plugins:
  - name: binpack
    arguments:
      binpack.weight: "x"
      binpack.bogus: 1
  - name: nodeorder
    arguments:
      unknown.weight: 1
  - name: overcommit
    arguments:
      overcommit-factor: "abc"
  - name: predicates
    arguments:
      predicate.NodeAffinityEnable: "maybe"
  - {}
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: 3
- name: nosuchaction
"""
    errors = errors_of(text)
    expected_prefixes = [
        "extra: unknown key",
        "actions[2]: unknown action 'preempt2'",
        "tiers[0].plugins[0].enableJobOrder: expected true or false, got 'yes'",
        "tiers[0].plugins[1].enableFoo: unknown plugin option",
        "tiers[0].plugins[2].name: unknown plugin 'nosuch'",
        "tiers[1].plugins[0].arguments.binpack.weight: expected an integer, got 'x'",
        "tiers[1].plugins[0].arguments.binpack.bogus: unknown argument",
        "tiers[1].plugins[1].arguments.unknown.weight: unknown argument",
        "tiers[1].plugins[2].arguments.overcommit-factor: expected float, got str",
        "tiers[1].plugins[3].arguments.predicate.NodeAffinityEnable: expected bool, got str",
        "tiers[1].plugins[4].name: required",
        "configurations[0].arguments.predicateErrorCacheEnable: expected bool, got int",
        "configurations[1].name: unknown action 'nosuchaction'",
    ]
    assert len(errors) == len(expected_prefixes), errors
    for got, want in zip(errors, expected_prefixes, strict=True):
        assert got.startswith(want), (got, want)
    # The exception text lists them all too, one per line.
    with pytest.raises(ConfError) as info:
        load_conf(text)
    assert str(info.value).count("\n") == len(errors)


def test_unknown_names_list_the_known_ones() -> None:
    errors = errors_of("actions: teleport\ntiers:\n- plugins:\n  - name: tdmm\n")
    known = "allocate, backfill, elect, enqueue, gangpreempt, gangreclaim, preempt, reclaim, reserve, shuffle"
    assert errors[0] == f"actions[0]: unknown action 'teleport' (known: {known})"
    assert errors[1].startswith("tiers[0].plugins[0].name: unknown plugin 'tdmm' (known: binpack, ")
    for name in PLUGINS:
        assert name in errors[1]


def test_unknown_argument_of_a_plugin_without_arguments() -> None:
    errors = errors_of("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    arguments: {x: 1}\n")
    assert errors == ["tiers[0].plugins[0].arguments.x: unknown argument (known: none)"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "actions: required"),
        ("actions: 5", "actions: expected a comma-separated string, got int"),
        ("[1, 2]", "$: expected a mapping, got list"),
        ("actions: allocate\ntiers: 3", "tiers: expected a list, got int"),
        ("actions: allocate\ntiers:\n- 3", "tiers[0]: expected a mapping with 'plugins'"),
        ("actions: allocate\ntiers:\n- plugins: [3]", "tiers[0].plugins[0]: expected a mapping"),
        ("actions: allocate\ntiers:\n- plugins: []\n  other: 1", "tiers[0].other: unknown key"),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    arguments: [1]",
            "tiers[0].plugins[0].arguments: expected a mapping",
        ),
        ("actions: allocate\nconfigurations: {a: 1}", "configurations: expected a list"),
        (
            "actions: allocate\nconfigurations: [3]",
            "configurations[0]: expected a mapping with 'name' and 'arguments'",
        ),
        ("actions: allocate\nmetrics: [1]", "metrics: expected a mapping"),
    ],
)
def test_structural_errors(text: str, error: str) -> None:
    assert errors_of(text) == [error]


def test_invalid_yaml_is_one_error() -> None:
    errors = errors_of("actions: [1,")
    assert len(errors) == 1 and errors[0].startswith("$: not valid YAML")


def test_proportion_and_hierarchical_drf_cannot_share_a_tier() -> None:
    base = "actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: drf\n"
    assert errors_of(base + "    enableHierarchy: true\n") == [
        "tiers[0]: proportion and drf with enableHierarchy cannot be in the same tier"
    ]
    load_conf(base)  # without hierarchy: fine
    # In different tiers the parser accepts them (Volcano checks per tier).
    load_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n"
        "- plugins:\n  - name: drf\n    enableHierarchy: true\n"
    )


def test_argument_types_follow_volcanos_getters() -> None:
    conf = load_conf(
        "actions: allocate\ntiers:\n- plugins:\n"
        "  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: 'false'\n"
        "  - name: overcommit\n    arguments:\n      overcommit-factor: 2\n"
        "  - name: nodeorder\n    arguments:\n      leastrequested.weight: 3\n"
    )
    predicates, overcommit, nodeorder = conf.tiers[0].plugins
    assert predicates.arguments.node_affinity is False  # bool keys accept bool strings
    assert overcommit.arguments.overcommit_factor == 2.0  # float keys accept ints
    assert nodeorder.arguments.least_requested == 3
    assert nodeorder.arguments.balanced_resource == 1  # untouched defaults stay
    # int keys reject floats and bools
    bad = "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: "
    assert errors_of(bad + "2.5") == ["tiers[0].plugins[0].arguments.leastrequested.weight: expected int, got float"]
    assert errors_of(bad + "true") == ["tiers[0].plugins[0].arguments.leastrequested.weight: expected int, got bool"]


def test_action_configurations() -> None:
    conf = load_conf(
        "actions: allocate\nconfigurations:\n- name: allocate\n"
        "  arguments: {predicateErrorCacheEnable: false}\n- name: enqueue\n"
    )
    assert conf.action_arguments("allocate") == {"predicateErrorCacheEnable": False}
    assert conf.action_arguments("enqueue") == {}
    assert conf.action_arguments("backfill") == {}
    errors = errors_of("actions: allocate\nconfigurations:\n- name: allocate\n  arguments: {bogus: 1}\n")
    assert errors[0].startswith("configurations[0].arguments.bogus: unknown argument")


def test_builtin_default_is_volcanos_default_scheduler_conf() -> None:
    """Volcano's DefaultSchedulerConf (scheduler/util.go), used when no configuration is given."""
    conf = load_conf(None)
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert [[p.name for p in t.plugins] for t in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert all(p.flags == {} for t in conf.tiers for p in t.plugins)
    assert conf.configurations == {}


def test_plugin_lookup_and_source() -> None:
    text = "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: binpack\n"
    conf = load_conf(text)
    binpack = conf.plugin("binpack")
    assert binpack is not None and binpack.name == "binpack"
    assert conf.plugin("drf") is None
    assert conf.source == text


# Volcano's plugin registry (pkg/scheduler/plugins/factory.go) at ed72c7c8, the commit the
# conformance corpus comes from.
VOLCANO_PLUGINS = {
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang",
    "network-topology-aware", "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb",
    "predicates", "priority", "proportion", "rescheduling", "resource-strategy-fit",
    "resourcequota", "sla", "task-topology", "tdm", "usage",
}  # fmt: skip


def test_every_volcano_plugin_is_either_registered_or_not_supported_yet() -> None:
    assert set(PLUGINS).isdisjoint(UNSUPPORTED_PLUGINS)
    # reservation: Volcano retired it with the elect and reserve actions (b27b4bbe7); Lahar has it.
    assert set(PLUGINS) | set(UNSUPPORTED_PLUGINS) == VOLCANO_PLUGINS | {"reservation"}


def test_a_volcano_plugin_lahar_lacks_is_not_supported_yet_not_unknown() -> None:
    errors = errors_of(
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: usage\n"
        "- plugins:\n  - name: rescheduling\n  - name: nosuch\n"
    )
    assert errors == [
        "tiers[0].plugins[1].name: plugin 'usage' is not supported yet "
        "(filters and scores nodes by their measured usage)",
        "tiers[1].plugins[0].name: plugin 'rescheduling' is not supported yet "
        "(evicts pods from busy nodes to rebalance (low node utilisation))",
        errors[2],
    ]
    # A name Volcano does not have either stays an unknown plugin, naming the field.
    assert errors[2].startswith("tiers[1].plugins[1].name: unknown plugin 'nosuch' (known: binpack, ")


def test_a_what_if_run_leaves_unsupported_plugins_out_and_lists_them() -> None:
    text = "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: usage\n  - name: rescheduling\n"
    conf = load_conf(text, leave_out_unsupported=True)
    assert [p.name for p in conf.tiers[0].plugins] == ["gang"]
    assert conf.left_out == [
        "tiers[0].plugins[1].name: plugin 'usage' is not supported yet "
        "(filters and scores nodes by their measured usage)",
        "tiers[0].plugins[2].name: plugin 'rescheduling' is not supported yet "
        "(evicts pods from busy nodes to rebalance (low node utilisation))",
    ]
    # Other errors still fail the document whole.
    with pytest.raises(ConfError) as info:
        load_conf(text + "  - name: nosuch\n", leave_out_unsupported=True)
    assert [e.split(" (")[0] for e in info.value.errors] == ["tiers[0].plugins[3].name: unknown plugin 'nosuch'"]
