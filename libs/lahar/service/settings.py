"""Typed service settings from flags and ``LAHAR_*`` environment variables, checked whole.

A service declares its settings as a msgspec Struct deriving from ``Settings``; every field is a
flag (``--http-port``) and an environment variable (``LAHAR_HTTP_PORT``).  A flag wins over the
variable, which wins over the field's default::

    class BinderSettings(Settings):
        max_in_flight: Annotated[int, Meta(ge=1, description="API calls in flight")] = 64

    settings = load_settings(BinderSettings)          # raises SettingsError listing every problem

Values are read as text and converted by msgspec (``strict=False`` turns "8080" into 8080 and
"true"/"false"/"1"/"0" into booleans), then checked against the field's ``Meta`` constraints and
any ``Check`` in its ``Annotated`` metadata.  Lists, sets and tuples are comma-separated; dicts
and Structs are JSON.  For ``X | None`` an empty value means None.  ``Secret()`` in a field's
metadata keeps its value out of error messages.  Cross-field rules go in ``Settings.problems``.
"""

from __future__ import annotations

import argparse
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import msgspec.inspect as mi
from msgspec import Meta
from msgspec.structs import FieldInfo

from lahar.adapters.otel import exporter_problem

__all__ = ["ENV_PREFIX", "Check", "Secret", "Settings", "SettingsError", "load_settings", "settings_parser"]

ENV_PREFIX = "LAHAR_"
S = TypeVar("S", bound="Settings")


class Check:
    """``Annotated`` metadata: ``problem(value)`` returns why a value is invalid, or None."""

    def __init__(self, problem: Callable[[Any], str | None]) -> None:
        self.problem = problem


class Secret:
    """``Annotated`` metadata: never show this field's value in an error."""


class SettingsError(ValueError):
    """Invalid settings: ``errors`` has one line per problem, each naming the field, its flag and
    its environment variable."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("invalid settings:\n" + "\n".join(f"  - {e}" for e in self.errors))


class Settings(msgspec.Struct, kw_only=True):
    """What every service shares; a service derives its own Struct from this one."""

    log_level: Annotated[Literal["debug", "info", "warning", "error"], Meta(description="log level")] = "info"
    http_host: Annotated[str, Meta(description="address of the /healthz, /readyz and /metrics server")] = "0.0.0.0"
    http_port: Annotated[int, Meta(ge=0, le=65535, description="port of that server; 0 picks a free one")] = 8080
    otel_exporter: Annotated[
        str, Check(exporter_problem), Meta(description="where spans go: otlp, console, none or jsonl:PATH")
    ] = "none"
    shutdown_timeout: Annotated[
        float, Meta(gt=0, description="seconds to finish or hand back work in flight after SIGTERM")
    ] = 10.0

    def problems(self) -> list[str]:
        """Rules across fields, checked once every field is valid; one line per problem, each
        starting with the names of the fields it is about.  Extend with ``super().problems()``."""
        return []


def load_settings(
    cls: type[S],
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    prog: str | None = None,
    env_prefix: str = ENV_PREFIX,
) -> S:
    """``cls`` from ``argv`` (default ``sys.argv[1:]``) and ``environ`` (default ``os.environ``).
    Raises SettingsError with every problem found; ``--help`` prints the flags and exits."""
    parser = settings_parser(cls, prog=prog, env_prefix=env_prefix)
    given, unknown = parser.parse_known_args(argv)
    env = os.environ if environ is None else environ
    errors = [f"unknown argument {arg!r} (see --help)" for arg in unknown]
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        names = _Names(field.name, env_prefix)
        raw, source = _raw_value(field, names, vars(given), env)
        if source is None:
            if _required(field):
                errors.append(f"{names}: required; give {names.flag} or set {names.env}")
            continue
        value, problem = _convert(raw, field.type)
        if problem:
            shown = "" if _has(field.type, Secret) else f" (got {raw!r} from {source})"
            errors.append(f"{names}: {problem}{shown}")
        else:
            values[field.name] = value
    if errors:
        raise SettingsError(errors)
    settings = cls(**values)
    if cross := settings.problems():
        raise SettingsError(cross)
    return settings


def settings_parser(
    cls: type[Settings], *, prog: str | None = None, env_prefix: str = ENV_PREFIX
) -> argparse.ArgumentParser:
    """An argparse parser with one flag per field.  Flags are parsed as text and left unset when
    absent (``SUPPRESS``), so ``load_settings`` can tell a given flag from a default."""
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip() or None, allow_abbrev=False)
    for field in msgspec.structs.fields(cls):
        names = _Names(field.name, env_prefix)
        default = "required" if _required(field) else f"default {_default(field)!r}"
        help_text = f"{_description(field.type)} [env {names.env}; {default}]".strip()
        if _strip_optional(_base(field.type)) is bool:
            parser.add_argument(
                names.flag,
                dest=field.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            parser.add_argument(names.flag, dest=field.name, default=argparse.SUPPRESS, metavar="VALUE", help=help_text)
    return parser


class _Names:
    def __init__(self, field: str, env_prefix: str) -> None:
        self.field = field
        self.flag = "--" + field.replace("_", "-")
        self.env = env_prefix + field.upper()

    def __str__(self) -> str:
        return f"{self.field} ({self.flag} / {self.env})"


def _raw_value(
    field: FieldInfo, names: _Names, flags: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[Any, str | None]:
    if field.name in flags:
        return flags[field.name], names.flag
    if names.env in env:
        return env[names.env], names.env
    return None, None


def _convert(raw: Any, annotation: Any) -> tuple[Any, str | None]:
    """The typed value and None, or None and why ``raw`` does not fit."""
    try:
        value = _parse(raw, annotation)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        return None, _explain(err, annotation)
    for check in _metadata(annotation, Check):
        if problem := check.problem(value):
            return None, problem
    return value, None


def _parse(raw: Any, annotation: Any) -> Any:
    if not isinstance(raw, str):  # a boolean flag
        return msgspec.convert(raw, annotation)
    info = mi.type_info(annotation)
    if isinstance(info, mi.UnionType) and info.includes_none and not raw.strip():
        return None
    info = _strip_optional_info(info)
    if isinstance(info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType | mi.TupleType):
        items = [part.strip() for part in raw.split(",") if part.strip()]
        return msgspec.convert(items, annotation, strict=False)
    if isinstance(info, mi.DictType | mi.StructType | mi.TypedDictType | mi.DataclassType):
        return msgspec.json.decode(raw, type=annotation, strict=False)
    return msgspec.convert(raw.strip(), annotation, strict=False)


def _explain(err: Exception, annotation: Any) -> str:
    choices = _literal_choices(_strip_optional(_base(annotation)))
    if choices is not None:
        return f"must be one of {', '.join(map(str, choices))}"
    return str(err).replace(" - at `$`", "")


def _literal_choices(tp: Any) -> tuple[Any, ...] | None:
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else None


def _strip_optional_info(info: mi.Type) -> mi.Type:
    if isinstance(info, mi.UnionType):
        others = [t for t in info.types if not isinstance(t, mi.NoneType)]
        if len(others) == 1:
            return others[0]
    return info


def _base(annotation: Any) -> Any:
    """``T`` from ``Annotated[T, ...]``."""
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is Annotated else annotation


def _strip_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if len(args) == 1 and type(None) in typing.get_args(tp) else tp


def _metadata(annotation: Any, kind: type[Any]) -> list[Any]:
    if typing.get_origin(annotation) is not Annotated:
        return []
    return [m for m in annotation.__metadata__ if isinstance(m, kind)]


def _has(annotation: Any, kind: type[Any]) -> bool:
    return any(m is kind or isinstance(m, kind) for m in getattr(annotation, "__metadata__", ()))


def _description(annotation: Any) -> str:
    return next((m.description for m in _metadata(annotation, Meta) if m.description), "")


def _required(field: FieldInfo) -> bool:
    return field.default is msgspec.NODEFAULT and field.default_factory is msgspec.NODEFAULT


def _default(field: FieldInfo) -> Any:
    return field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
