"""The part of CEL that DRA device selectors use, evaluated over one device.

Kubernetes gives a selector ``device`` with ``driver``, ``attributes[domain].name`` and
``capacity[domain].name`` (quantities).  Supported: literals (strings, ints, floats, bools,
null, lists), ``.`` and ``[]`` access, ``! - * / % + -``, comparisons, ``in``, ``&&``/``||``
with CEL's error absorption (``false && error`` is false), ``? :``, ``has(...)``, ``quantity()``,
``size()`` and the methods ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``startsWith``,
``endsWith``, ``contains``, ``matches``.  A missing key is a runtime error, as in CEL; anything
outside the subset is a compile error.  Both make the device not match (and are reported).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lahar.api.quantity import parse_quantity


class CelError(Exception):
    pass


@dataclass(frozen=True)
class Qty:
    """A quantity, compared only through its methods (or plain comparisons, leniently)."""

    value: float

    def __lt__(self, other: Qty) -> bool:
        return self.value < other.value

    def __le__(self, other: Qty) -> bool:
        return self.value <= other.value


_TOKEN = re.compile(
    r"""\s*(?:(?P<num>\d+\.\d+|\d+)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%<>!.\[\](),?:]))""",
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CelError(f"compile error: unexpected {text[pos : pos + 10]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    out.append(("end", ""))
    return out


Node = Callable[[dict[str, Any]], Any]


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str:
        return self.toks[self.i][1]

    def take(self, want: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise CelError(f"compile error: expected {want!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.ternary()
        if self.toks[self.i][0] != "end":
            raise CelError(f"compile error: unexpected {self.peek()!r}")
        return node

    def ternary(self) -> Node:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.ternary()
        self.take(":")
        no = self.ternary()
        return lambda env: yes(env) if _bool(cond(env)) else no(env)

    LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("==", "!=", "<", "<=", ">", ">=", "in"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> Node:
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.LEVELS[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _combine(op, left, right)
        return left

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda env: not _bool(inner(env))
        if self.peek() == "-":
            self.take()
            inner = self.unary()
            return lambda env: -inner(env)
        return self.postfix(self.primary())

    def args(self) -> list[Node]:
        self.take("(")
        out: list[Node] = []
        while self.peek() != ")":
            out.append(self.ternary())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return out

    def postfix(self, node: Node) -> Node:
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                key = self.ternary()
                self.take("]")
                node = _index(node, key)
                continue
            kind, name = self.take()
            if kind != "id":
                raise CelError(f"compile error: field name expected, got {name!r}")
            node = _method(node, name, self.args()) if self.peek() == "(" else _index(node, _const(name))
        return node

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            return _const(float(text) if "." in text else int(text))
        if kind == "str":
            return _const(bytes(text[1:-1], "utf-8").decode("unicode_escape"))
        if text == "(":
            inner = self.ternary()
            self.take(")")
            return inner
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.ternary())
                if self.peek() == ",":
                    self.take()
            self.take("]")
            return lambda env: [item(env) for item in items]
        if kind != "id":
            raise CelError(f"compile error: unexpected {text!r}")
        if text in ("true", "false", "null"):
            return _const({"true": True, "false": False, "null": None}[text])
        if self.peek() == "(":
            return _function(text, self.args())
        return lambda env: _lookup(env, text)


def _const(value: Any) -> Node:
    return lambda _env: value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"no such overload: {type(value).__name__} used as bool")
    return value


def _lookup(env: dict[str, Any], name: str) -> Any:
    if name not in env:
        raise CelError(f"undeclared reference to {name!r}")
    return env[name]


def _index(node: Node, key: Node) -> Node:
    def get(env: dict[str, Any]) -> Any:
        container, k = node(env), key(env)
        if isinstance(container, dict):
            if k not in container:
                raise CelError(f"no such key: {k}")
            return container[k]
        if isinstance(container, list) and isinstance(k, int):
            if not 0 <= k < len(container):
                raise CelError(f"index out of range: {k}")
            return container[k]
        raise CelError(f"no such overload: index {type(container).__name__}")

    return get


def _logic(op: str, left: Node, right: Node) -> Node:
    """CEL's && and ||: an error on one side is absorbed when the other side decides."""
    short = op == "||"

    def run(env: dict[str, Any]) -> bool:
        errors: list[CelError] = []
        for side in (left, right):
            try:
                if _bool(side(env)) is short:
                    return short
            except CelError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return not short

    return run


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
    "%": lambda a, b: a % b,
}


def _combine(op: str, left: Node, right: Node) -> Node:
    if op in ("&&", "||"):
        return _logic(op, left, right)
    fn = _COMPARE[op]

    def run(env: dict[str, Any]) -> Any:
        a, b = left(env), right(env)
        try:
            return fn(a, b)
        except (TypeError, ZeroDivisionError) as exc:
            raise CelError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}") from exc

    return run


def _sign(a: Qty, b: Qty) -> int:
    return (a.value > b.value) - (a.value < b.value)


_METHODS: dict[str, Callable[..., Any]] = {
    "compareTo": _sign,
    "isGreaterThan": lambda a, b: a.value > b.value,
    "isLessThan": lambda a, b: a.value < b.value,
    "startsWith": lambda a, b: a.startswith(b),
    "endsWith": lambda a, b: a.endswith(b),
    "contains": lambda a, b: b in a,
    "matches": lambda a, b: re.search(b, a) is not None,
    "size": len,
}


def _method(target: Node, name: str, args: list[Node]) -> Node:
    fn = _METHODS.get(name)
    if fn is None:
        raise CelError(f"compile error: undeclared reference to function {name!r}")
    method = fn

    def run(env: dict[str, Any]) -> Any:
        try:
            return method(target(env), *(a(env) for a in args))
        except (AttributeError, TypeError) as exc:
            raise CelError(f"no such overload: {name}") from exc

    return run


def _function(name: str, args: list[Node]) -> Node:
    if name == "has" and len(args) == 1:
        arg = args[0]

        def has(env: dict[str, Any]) -> bool:
            try:
                arg(env)
            except CelError:
                return False
            return True

        return has
    if name == "quantity" and len(args) == 1:
        return lambda env: Qty(float(parse_quantity(str(args[0](env)))))
    if name == "size" and len(args) == 1:
        return _method(args[0], "size", [])
    raise CelError(f"compile error: undeclared reference to function {name!r}")


_compiled: dict[str, Node | CelError] = {}


def compile_expression(text: str) -> Node:
    """A callable over ``{"device": ...}``; compile errors raise CelError (memoised)."""
    got = _compiled.get(text)
    if got is None:
        try:
            got = _Parser(text).parse()
        except CelError as exc:
            got = exc
        _compiled[text] = got
    if isinstance(got, CelError):
        raise got
    return got


def matches(text: str, device: dict[str, Any]) -> bool:
    """Whether the selector holds for the device; CelError for compile or runtime errors."""
    return _bool(compile_expression(text)({"device": device}))
