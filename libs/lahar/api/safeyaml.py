"""The one way Lahar reads YAML: safe tags only, bounded size, depth and alias expansion.

PyYAML's safe loaders build aliases as shared references, so a "billion laughs" document loads
in microseconds, and then explodes in whatever walks it next (JSON encoding, msgspec, a deep
copy) until ``MemoryError``.  So every document is first checked from the parser's events (fast,
in C when libyaml is there): each anchor's size in nodes is known when its node closes, an alias
adds that size, and a document whose aliases would add more than ``MAX_ALIAS_NODES`` nodes, or
that uses more than ``MAX_ALIASES`` aliases, or an alias inside the node it names (a cycle), is
refused before anything is built.  Errors are ``YamlError``: ``<source>: document <n>: <why>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_CHARS = 16 * 1024 * 1024  # far above any manifest; the API server takes 3 MiB per object
MAX_DEPTH = 200  # Kubernetes objects nest a few dozen levels; the pure-Python composer recurses
MAX_ALIASES = 1000  # alias references per document
MAX_ALIAS_NODES = 100_000  # nodes that aliases add to one document once expanded


class YamlError(ValueError):
    """YAML that is refused; ``str()`` names the source, the document (from 1) and why."""

    def __init__(self, source: str, document: int | None, why: str) -> None:
        where = f"{source}: document {document}" if document else source
        super().__init__(f"{where}: {why}")
        self.source = source
        self.document = document
        self.why = why


class _Budget:
    """The alias and depth accounting of one document, fed with parser events."""

    def __init__(self) -> None:
        self.open: list[list[Any]] = []  # [nodes so far, anchor] of each open collection
        self.sizes: dict[str, int] = {}  # anchor -> nodes of its (closed) node
        self.aliases = 0
        self.added = 0

    def node(self, size: int, anchor: str | None) -> None:
        if anchor:
            self.sizes[anchor] = size
        if self.open:
            self.open[-1][0] += size

    def start(self, anchor: str | None) -> str | None:
        if len(self.open) >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        self.open.append([1, anchor])
        return None

    def end(self) -> None:
        size, anchor = self.open.pop()
        self.node(size, anchor)

    def alias(self, anchor: str) -> str | None:
        if any(a == anchor for _, a in self.open):
            return f"alias *{anchor} is inside the node it refers to (a recursive document)"
        self.aliases += 1
        size = self.sizes.get(anchor, 1)  # an unknown anchor fails later, in the composer
        self.added += size
        if self.aliases > MAX_ALIASES:
            return f"too many aliases (more than {MAX_ALIASES})"
        if self.added > MAX_ALIAS_NODES:
            return f"too many aliases: they expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?)"
        self.node(size, None)
        return None


def _check(text: str, source: str) -> None:
    """Refuse a stream whose size, depth or aliases are out of bounds, before building it."""
    if len(text) > MAX_CHARS:
        raise YamlError(source, None, f"too large: {len(text)} characters (limit {MAX_CHARS})")
    document = 0
    budget = _Budget()
    try:
        for event in yaml.parse(text, Loader=_Loader):
            why: str | None = None
            if isinstance(event, yaml.DocumentStartEvent):
                document, budget = document + 1, _Budget()
            elif isinstance(event, yaml.CollectionStartEvent):
                why = budget.start(event.anchor)
            elif isinstance(event, yaml.CollectionEndEvent):
                budget.end()
            elif isinstance(event, yaml.ScalarEvent):
                budget.node(1, event.anchor)
            elif isinstance(event, yaml.AliasEvent):
                why = budget.alias(str(event.anchor))
            if why is not None:
                raise YamlError(source, document, why)
    except yaml.YAMLError as exc:
        raise YamlError(source, document or None, f"not valid YAML: {exc}") from None


def load_all(text: str, source: str = "<input>") -> list[Any]:
    """Every document of a YAML (or JSON) stream, empty ones as None, so that ``docs[i]`` is
    document ``i + 1`` of the source."""
    _check(text, source)
    docs: list[Any] = []
    try:
        for doc in yaml.load_all(text, Loader=_Loader):
            docs.append(doc)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date out of range, a 5000-digit int
        raise YamlError(source, len(docs) + 1, f"not valid YAML: {exc}") from None
    return docs


def load(text: str, source: str = "<input>") -> Any:
    """The single document of ``text`` (None when it is empty)."""
    docs = load_all(text, source)
    if len(docs) > 1:
        raise YamlError(source, 2, "expected a single document")
    return docs[0] if docs else None


def read(handle: IO[str], source: str) -> str:
    """The text of an open file, refusing one larger than ``MAX_CHARS`` without reading it all."""
    text = handle.read(MAX_CHARS + 1)
    if len(text) > MAX_CHARS:
        raise YamlError(source, None, f"too large: more than {MAX_CHARS} characters")
    return text


def documents(docs: Iterable[Any]) -> list[tuple[int, Any]]:
    """(document number, document) for the non-empty documents of ``load_all``'s result."""
    return [(n, doc) for n, doc in enumerate(docs, start=1) if doc is not None]
