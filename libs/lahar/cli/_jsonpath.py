"""kubectl's ``-o jsonpath=TEMPLATE``: text with ``{.path}`` expressions, ``{"literal"}`` strings
and ``{range .path}…{end}`` loops, as k8s.io/client-go/util/jsonpath reads them.

The paths themselves (``.items[*].metadata.name``, ``[0]``, filters) are evaluated by
jsonpath-ng; only kubectl's template layer is ours, because no Python library reads it.  Several
results of one expression are joined with a space, as kubectl does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonpath_ng.exceptions import JsonPathParserError
from jsonpath_ng.ext.parser import parse

_TOKEN = re.compile(r"\{((?:[^{}\"]|\"(?:[^\"\\]|\\.)*\")*)\}")


class JsonPathError(ValueError):
    pass


@dataclass
class _Text:
    text: str


@dataclass
class _Expr:
    path: str


@dataclass
class _Range:
    path: str
    body: list[Any]


def render(template: str, obj: Any) -> str:
    """The template applied to ``obj`` (a single object, or a List for several)."""
    nodes, rest = _parse(_tokens(template), 0, in_range=False)
    del rest
    return "".join(_eval(nodes, obj))


def _tokens(template: str) -> list[_Text | _Expr | tuple[str, str]]:
    out: list[_Text | _Expr | tuple[str, str]] = []
    pos = 0
    for match in _TOKEN.finditer(template):
        if match.start() > pos:
            out.append(_Text(template[pos : match.start()]))
        inner = match.group(1).strip()
        if inner.startswith('"'):
            out.append(_Text(json.loads(inner)))  # {"\n"}: a literal, with JSON's escapes
        elif inner.startswith("range "):
            out.append(("range", inner[len("range ") :].strip()))
        elif inner == "end":
            out.append(("end", ""))
        else:
            out.append(_Expr(inner))
        pos = match.end()
    if "{" in template[pos:] or "}" in template[pos:]:
        raise JsonPathError(f"unclosed or unmatched brace in {template!r}")
    if pos < len(template):
        out.append(_Text(template[pos:]))
    return out


def _parse(tokens: list[Any], at: int, in_range: bool) -> tuple[list[Any], int]:
    nodes: list[Any] = []
    while at < len(tokens):
        token = tokens[at]
        at += 1
        if isinstance(token, tuple) and token[0] == "range":
            body, at = _parse(tokens, at, in_range=True)
            nodes.append(_Range(token[1], body))
        elif isinstance(token, tuple):  # end
            if not in_range:
                raise JsonPathError("{end} without {range}")
            return nodes, at
        else:
            nodes.append(token)
    if in_range:
        raise JsonPathError("{range} without {end}")
    return nodes, at


def _eval(nodes: list[Any], obj: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Expr):
            out.append(" ".join(_show(v) for v in _find(node.path, obj)))
        else:
            for item in _find(node.path, obj):
                out.extend(_eval(node.body, item))
    return out


def _find(path: str, obj: Any) -> list[Any]:
    expr = "$" + path if path.startswith((".", "[")) else path
    if expr in ("$", "$."):
        return [obj]
    try:
        return [match.value for match in parse(expr).find(obj)]
    except (JsonPathParserError, Exception) as exc:  # jsonpath-ng raises plain Exception for some syntax
        raise JsonPathError(f"cannot read the path {path!r}: {exc}") from None


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
