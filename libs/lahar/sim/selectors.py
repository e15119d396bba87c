"""Label and field selectors, parsed with the API server's grammar.

Hand-written because no maintained Python library parses the Kubernetes selector syntax
(the official client only passes the string through).  Label grammar: ``a=b``, ``a==b``,
``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a`` (exists), ``!a`` (does not exist), ``a>1``,
``a<1``.  Field grammar: ``f=v``, ``f==v``, ``f!=v`` joined by commas, with ``\\`` escapes.
A selector compiles to a predicate over the object dict so that filtering is one call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from lahar.sim.errors import ApiError, bad_request

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]
LabelPredicate = Callable[[Mapping[str, str]], bool]

_TOKEN = re.compile(r"\s*(==|!=|=|\(|\)|,|!|>|<|[A-Za-z0-9._/-]+)")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise bad_request(f"unable to parse requirement: invalid character at {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _check_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _NAME.match(name) or len(prefix) > 253:
        raise bad_request(
            f"unable to parse requirement: invalid label key {key!r}: name part must consist of "
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(
            f"unable to parse requirement: invalid label value {value!r}: must be 63 characters or less "
            "and consist of alphanumeric characters, '-', '_' or '.'"
        )
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise bad_request(f"unable to parse requirement: unexpected end of selector {self.text!r}")
        self.i += 1
        return tok

    def parse(self) -> list[LabelPredicate]:
        reqs: list[LabelPredicate] = []
        while self.peek() is not None:
            reqs.append(self.requirement())
            tok = self.peek()
            if tok is not None:
                if tok != ",":
                    raise bad_request(f"unable to parse requirement: expected ',' but found {tok!r} in {self.text!r}")
                self.take()
        return reqs

    def requirement(self) -> LabelPredicate:
        tok = self.take()
        if tok == "!":
            key = _check_key(self.take())
            return lambda labels: key not in labels
        key = _check_key(tok)
        op = self.peek()
        if op is None or op == ",":
            return lambda labels: key in labels
        self.take()
        if op in ("=", "=="):
            value = self.value()
            return lambda labels: labels.get(key) == value
        if op == "!=":
            value = self.value()
            return lambda labels: labels.get(key) != value
        if op in ("in", "notin"):
            values = self.value_set()
            if op == "in":
                return lambda labels: labels.get(key) in values
            return lambda labels: labels.get(key) not in values
        if op in (">", "<"):
            return self.numeric(key, op)
        raise bad_request(f"unable to parse requirement: unknown operator {op!r} in {self.text!r}")

    def value(self) -> str:
        tok = self.peek()
        if tok is None or tok in (",", ")"):
            return ""
        return _check_value(self.take())

    def value_set(self) -> frozenset[str]:
        tok = self.take()
        if tok != "(":
            raise bad_request(f"unable to parse requirement: found '{tok or ''}' expected: '('")
        values: set[str] = set()
        while True:
            values.add(self.value())
            tok = self.take()
            if tok == ")":
                return frozenset(values)
            if tok != ",":
                raise bad_request(f"unable to parse requirement: expected ',' or ')' but found {tok!r}")

    def numeric(self, key: str, op: str) -> LabelPredicate:
        raw = self.take()
        try:
            bound = int(raw)
        except ValueError:
            raise bad_request(
                f"unable to parse requirement: for '{op}' operator, the value must be an integer, not {raw!r}"
            ) from None

        def check(labels: Mapping[str, str]) -> bool:
            try:
                have = int(labels.get(key, ""))
            except ValueError:
                return False
            return have > bound if op == ">" else have < bound

        return check


def parse_label_selector(text: str | None) -> LabelPredicate | None:
    """A predicate over a labels mapping, or None for an empty selector (match all)."""
    if not text or not text.strip():
        return None
    reqs = _Parser(text).parse()
    if len(reqs) == 1:
        return reqs[0]
    return lambda labels: all(req(labels) for req in reqs)


def label_matcher(text: str | None) -> Predicate | None:
    pred = parse_label_selector(text)
    if pred is None:
        return None
    return lambda obj: pred(obj["metadata"].get("labels") or {})


def selector_from_object(selector: Mapping[str, Any] | None, where: str) -> LabelPredicate:
    """A ``metav1.LabelSelector`` (matchLabels, matchExpressions), as used by webhook configurations."""
    if not selector:
        return lambda labels: True
    parts: list[LabelPredicate] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        parts.append(_equals(str(key), str(value)))
    for expr in selector.get("matchExpressions") or []:
        parts.append(_expression(expr, where))
    return lambda labels: all(part(labels) for part in parts)


def _equals(key: str, value: str) -> LabelPredicate:
    return lambda labels: labels.get(key) == value


def _expression(expr: Mapping[str, Any], where: str) -> LabelPredicate:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), frozenset(expr.get("values") or [])
    if op == "In":
        return lambda labels: labels.get(key) in values
    if op == "NotIn":
        return lambda labels: labels.get(key) not in values
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    raise ApiError(
        422, "Invalid", f"{where}.matchExpressions: operator {op!r} is not In, NotIn, Exists or DoesNotExist"
    )


# --- field selectors ---------------------------------------------------------------------------------

FieldGetter = Callable[[Obj], str]


def _path_getter(path: str) -> FieldGetter:
    keys = path.split(".")

    def get(obj: Obj) -> str:
        cur: Any = obj
        for key in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(key)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


_COMMON = ("metadata.name", "metadata.namespace")
# The fields the real API server accepts per resource (``plural.group``, core ones by plural);
# others are refused as it refuses them.
FIELDS: dict[str, tuple[str, ...]] = {
    "pods": (
        *_COMMON,
        "spec.nodeName",
        "spec.schedulerName",
        "status.phase",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "status.podIP",
        "status.nominatedNodeName",
        "spec.hostNetwork",
    ),
    "nodes": (*_COMMON, "spec.unschedulable"),
    "events": (
        *_COMMON,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "namespaces": (*_COMMON, "status.phase"),
    "events.events.k8s.io": (
        *_COMMON,
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    ),
    "secrets": (*_COMMON, "type"),
    "replicasets.apps": (*_COMMON, "status.replicas"),
    "jobs.batch": (*_COMMON, "status.successful"),
    # what kubelets and DRA drivers watch their node's slices by (cluster-scoped: no namespace)
    "resourceslices.resource.k8s.io": ("metadata.name", "spec.nodeName", "spec.driver"),
}
_ALIASES = {"source": "source.component", "status.successful": "status.succeeded"}


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _field_term(term: str) -> tuple[str, str, str]:
    for op in ("!=", "==", "="):
        idx = _find_unescaped(term, op)
        if idx >= 0:
            return term[:idx].strip(), op, _unescape(term[idx + len(op) :])
    raise bad_request(f"invalid selector: {term!r}; can't understand {term!r}")


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def _field_check(get: FieldGetter, value: str, negate: bool) -> Predicate:
    if negate:
        return lambda obj: get(obj) != value
    return lambda obj: get(obj) == value


def field_matcher(text: str | None, resource: str) -> Predicate | None:
    """A predicate for a field selector on ``resource`` (``plural.group``); unsupported fields are a
    400 as on the server."""
    if not text or not text.strip():
        return None
    allowed = FIELDS.get(resource, _COMMON)
    checks: list[Predicate] = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue
        field, op, value = _field_term(term)
        if field not in allowed:
            if allowed is _COMMON:  # the server's default conversion has its own wording
                raise bad_request(
                    f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'
                )
            raise bad_request(f"field label not supported: {field}")
        get = _path_getter(_ALIASES.get(field, field))
        checks.append(_field_check(get, value, negate=op == "!="))
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda obj: all(check(obj) for check in checks)
