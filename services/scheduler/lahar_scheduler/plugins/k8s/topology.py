"""Per-session indexes over node labels and the pods placed on nodes, for affinity and spreading."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from lahar.api.objects import LabelSelector, Pod, PodAffinityTerm
from lahar_scheduler.plugins.k8s.selectors import label_selector_matches, term_namespaces

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import IntArray, NodeTable


class Domains:
    """For a topology key: each node's domain as a small integer (-1 when the node lacks the label)."""

    def __init__(self, table: NodeTable, key: str) -> None:
        self.key = key
        codes: dict[str, int] = {}
        out = np.full(len(table.infos), -1, dtype=np.intp)
        for i, node in enumerate(table.infos):
            val = node.labels.get(key)
            if val is not None:
                out[i] = codes.setdefault(val, len(codes))
        self.code = out
        self.count = len(codes)


class TopologyIndex:
    """Caches domain codes per topology key for one session."""

    def __init__(self, table: NodeTable, namespace_labels: dict[str, dict[str, str]]) -> None:
        self.table = table
        self.namespace_labels = namespace_labels
        self._domains: dict[str, Domains] = {}
        # Tasks (by id) an owner wants left out of ``placed`` although still on a node.
        self.hidden: set[int] = set()

    def domains(self, key: str) -> Domains:
        d = self._domains.get(key)
        if d is None:
            d = self._domains[key] = Domains(self.table, key)
        return d

    def placed(self) -> Iterator[tuple[TaskInfo, int]]:
        """Every pod on a node (tentative placements of this session included)."""
        hidden = self.hidden
        for node in self.table.infos:
            for t in node.tasks.values():
                if id(t) not in hidden:
                    yield t, node.index

    def namespaces_of(self, pod: Pod, term: PodAffinityTerm) -> set[str] | None:
        names = term_namespaces(pod, term)
        if names is not None and not names and term.namespace_selector is not None:
            sel = term.namespace_selector
            names = {ns for ns, labels in self.namespace_labels.items() if label_selector_matches(sel, labels)}
            names.update(term.namespaces)
        return names

    def domain_counts(
        self,
        key: str,
        selector: LabelSelector | None,
        namespaces: set[str] | None,
        eligible: np.ndarray | None = None,
    ) -> np.ndarray:
        """Matching pods per domain of ``key`` (optionally only pods on eligible nodes)."""
        dom = self.domains(key)
        counts = np.zeros(max(dom.count, 1), dtype=np.int64)
        for t, n in self.placed():
            c = dom.code[n]
            if c < 0 or (eligible is not None and not eligible[n]):
                continue
            meta = t.pod.metadata
            if namespaces is not None and meta.namespace not in namespaces:
                continue
            if label_selector_matches(selector, meta.labels):
                counts[c] += 1
        return counts

    def node_domain_values(self, key: str, idx: IntArray) -> IntArray:
        return self.domains(key).code[idx]
