"""The scheduler configuration, in the shape of ``volcano-scheduler.conf``.

``parse_conf`` validates the whole document and reports every problem at once, each with its
path (``tiers[1].plugins[0].arguments.binpack.weight: expected number, got str``).  Missing
``enable*`` flags default to true, except ``enableHierarchy``, as Volcano's parser does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from lahar.api import safeyaml

# YAML key → the extension point it gates.  Note Volcano's mixed enable/enabled prefixes.
FLAGS: tuple[str, ...] = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)
_DEFAULT_FALSE = frozenset({"enableHierarchy"})

# Volcano's DefaultSchedulerConf (scheduler/util.go), used when no configuration is given.  It has
# no binpack: binpack is only in the Helm chart's config, and with nodeorder's leastrequested it
# pulls placements the other way, so adding it would change where the default scheduler puts pods.
DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


class ConfError(ValueError):
    """A configuration with problems; ``errors`` lists each as ``path: why``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid scheduler configuration:\n  " + "\n  ".join(errors))
        self.errors = errors


@dataclass
class PluginOption:
    name: str
    flags: dict[str, bool]
    arguments: Any = None  # the plugin's typed Args, once validated
    raw_arguments: dict[str, Any] = field(default_factory=dict)

    def enabled(self, flag: str) -> bool:
        return self.flags.get(flag, flag not in _DEFAULT_FALSE)


@dataclass
class Tier:
    plugins: list[PluginOption]


@dataclass
class SchedulerConf:
    actions: list[str]
    tiers: list[Tier]
    configurations: dict[str, dict[str, Any]]
    metrics: dict[str, str] = field(default_factory=dict)
    source: str = ""
    # Plugins Volcano has and Lahar not yet, left out when the caller allowed it (a what-if run):
    # one ``path: why`` line each, for the caller to show.
    left_out: list[str] = field(default_factory=list)

    def action_arguments(self, action: str) -> dict[str, Any]:
        return self.configurations.get(action, {})

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for opt in tier.plugins:
                if opt.name == name:
                    return opt
        return None


# An argument validator: (raw arguments, path prefix, errors list) → typed args.
ArgsParser = Callable[[dict[str, Any], str, list[str]], Any]


def parse_conf(
    text: str,
    actions: Mapping[str, object],
    plugins: Mapping[str, ArgsParser],
    action_args: Mapping[str, ArgsParser] | None = None,
    unsupported_actions: Mapping[str, str] | None = None,
    unsupported_plugins: Mapping[str, str] | None = None,
    leave_out_unsupported: bool = False,
) -> SchedulerConf:
    """Parse and validate a configuration document against the registered names.

    A plugin of ``unsupported_plugins`` (Volcano has it, Lahar not yet) is an error saying so,
    or, with ``leave_out_unsupported``, is dropped and listed in ``left_out``: a scheduler must
    not run a configuration it cannot honour, but a what-if run can still say something useful.
    """
    errors: list[str] = []
    left_out: list[str] = []
    try:
        doc = safeyaml.load(text, "$")
    except safeyaml.YamlError as exc:
        raise ConfError([f"$: {exc.why}"]) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfError([f"$: expected a mapping, got {type(doc).__name__}"])
    for key in doc:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            errors.append(f"{key}: unknown key (expected actions, tiers, configurations, metrics)")
    unsupported = unsupported_actions or {}
    action_names = _parse_actions(doc.get("actions"), actions, errors, unsupported)
    missing = _Unsupported(unsupported_plugins or {}, left_out if leave_out_unsupported else errors)
    tiers = _parse_tiers(doc.get("tiers"), plugins, errors, missing)
    configurations = _parse_configurations(doc.get("configurations"), actions, action_args or {}, errors, unsupported)
    metrics = doc.get("metrics") or {}
    if not isinstance(metrics, dict):
        errors.append("metrics: expected a mapping")
        metrics = {}
    _check_hierarchy(tiers, errors)
    if errors:
        raise ConfError(errors)
    return SchedulerConf(
        action_names, tiers, configurations, {str(k): str(v) for k, v in metrics.items()}, text, left_out
    )


@dataclass
class _Unsupported:
    """Plugin names Volcano registers and Lahar does not yet, and where to report them."""

    reasons: Mapping[str, str]
    report: list[str]


def _parse_actions(
    raw: Any, known: Mapping[str, object], errors: list[str], unsupported: Mapping[str, str]
) -> list[str]:
    if raw is None:
        errors.append("actions: required")
        return []
    if not isinstance(raw, str):
        errors.append(f"actions: expected a comma-separated string, got {type(raw).__name__}")
        return []
    names = [a.strip() for a in raw.split(",") if a.strip()]
    for i, name in enumerate(names):
        if name in unsupported:
            errors.append(f"actions[{i}]: action {name!r} is not supported: {unsupported[name]}")
        elif name not in known:
            errors.append(f"actions[{i}]: unknown action {name!r} (known: {', '.join(sorted(known))})")
    return names


def _parse_tiers(raw: Any, plugins: Mapping[str, ArgsParser], errors: list[str], missing: _Unsupported) -> list[Tier]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(f"tiers: expected a list, got {type(raw).__name__}")
        return []
    tiers = []
    for t, tier in enumerate(raw):
        path = f"tiers[{t}]"
        if not isinstance(tier, dict):
            errors.append(f"{path}: expected a mapping with 'plugins'")
            continue
        for key in tier:
            if key != "plugins":
                errors.append(f"{path}.{key}: unknown key")
        opts = []
        for p, opt in enumerate(tier.get("plugins") or []):
            parsed = _parse_plugin(opt, f"{path}.plugins[{p}]", plugins, errors, missing)
            if parsed is not None:
                opts.append(parsed)
        tiers.append(Tier(opts))
    return tiers


def _parse_plugin(
    raw: Any, path: str, plugins: Mapping[str, ArgsParser], errors: list[str], missing: _Unsupported
) -> PluginOption | None:
    if not isinstance(raw, dict):
        errors.append(f"{path}: expected a mapping")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        errors.append(f"{path}.name: required")
        return None
    flags: dict[str, bool] = {}
    for key, val in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in FLAGS:
            errors.append(f"{path}.{key}: unknown plugin option")
        elif not isinstance(val, bool):
            errors.append(f"{path}.{key}: expected true or false, got {val!r}")
        else:
            flags[key] = val
    args_raw = raw.get("arguments") or {}
    if not isinstance(args_raw, dict):
        errors.append(f"{path}.arguments: expected a mapping")
        args_raw = {}
    parser = plugins.get(name)
    if parser is None and name in missing.reasons:
        missing.report.append(f"{path}.name: plugin {name!r} is not supported yet ({missing.reasons[name]})")
        return None
    if parser is None:
        errors.append(f"{path}.name: unknown plugin {name!r} (known: {', '.join(sorted(plugins))})")
        return None
    args = parser(args_raw, f"{path}.arguments", errors)
    return PluginOption(name, flags, args, args_raw)


def _parse_configurations(
    raw: Any,
    actions: Mapping[str, object],
    parsers: Mapping[str, ArgsParser],
    errors: list[str],
    unsupported: Mapping[str, str],
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if raw is None:
        return out
    if not isinstance(raw, list):
        errors.append("configurations: expected a list")
        return out
    for i, item in enumerate(raw):
        path = f"configurations[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            errors.append(f"{path}: expected a mapping with 'name' and 'arguments'")
            continue
        name = item["name"]
        if name in unsupported:
            errors.append(f"{path}.name: action {name!r} is not supported: {unsupported[name]}")
            continue
        if name not in actions:
            errors.append(f"{path}.name: unknown action {name!r}")
            continue
        args = item.get("arguments") or {}
        if not isinstance(args, dict):
            errors.append(f"{path}.arguments: expected a mapping")
            continue
        parser = parsers.get(name)
        if parser is not None:
            parser(args, f"{path}.arguments", errors)
        out[name] = args
    return out


def _check_hierarchy(tiers: list[Tier], errors: list[str]) -> None:
    for t, tier in enumerate(tiers):
        names = {p.name for p in tier.plugins}
        drf = next((p for p in tier.plugins if p.name == "drf"), None)
        if drf is not None and "proportion" in names and drf.enabled("enableHierarchy"):
            errors.append(f"tiers[{t}]: proportion and drf with enableHierarchy cannot be in the same tier")


def args_parser(struct: type[msgspec.Struct]) -> ArgsParser:
    """Validate arguments against a msgspec Struct one key at a time, so every bad key is reported."""
    fields = {f.encode_name: f for f in msgspec.structs.fields(struct)}

    def parse(raw: dict[str, Any], path: str, errors: list[str]) -> Any:
        good: dict[str, Any] = {}
        for key, val in raw.items():
            spec = fields.get(str(key))
            if spec is None:
                known = ", ".join(sorted(fields)) or "none"
                errors.append(f"{path}.{key}: unknown argument (known: {known})")
                continue
            try:
                good[str(key)] = msgspec.convert(val, spec.type, strict=False)
            except msgspec.ValidationError as exc:
                why = str(exc).split(" - at ")[0].replace("`", "")
                errors.append(f"{path}.{key}: {why[0].lower() + why[1:]}")
        try:
            return msgspec.convert(good, struct, strict=False)
        except msgspec.ValidationError as exc:
            errors.append(f"{path}: {exc}")
            return None

    return parse
