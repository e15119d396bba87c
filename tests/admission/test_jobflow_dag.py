"""``/jobflows/validate``: a JobFlow's steps must form a DAG (Volcano's only JobFlow check; it has
no webhook for JobTemplates).  The copied corpus covers a valid DAG, an undefined target and
duplicate names; these add the cases of Volcano's tests it lacks (validate_jobflow_test.go "flows
not dag" and "muti c", util_test.go TestIsDAG) and a self-dependency, through the rule as the
webhook runs it."""

from __future__ import annotations

from typing import Any

import pytest

from lahar_admission.conformance import run_case
from lahar_admission.rules.others import flow_dag_error
from lahar_admission.types import Flow, FlowDependsOn, JobFlow, JobFlowSpec

HEADER = "# webhook: /jobflows/validate\n"
NOT_DAG = "jobflow Flow is not DAG"


def _case(flows: list[dict[str, Any]], expect: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    obj = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "valid-jobflow", "namespace": "default"},
        "spec": {"jobRetainPolicy": "retain", "flows": flows},
    }
    return {
        "name": "jobflow",
        "request": {
            "operation": operation,
            "kind": {"group": "flow.volcano.sh", "version": "v1alpha1", "kind": "JobFlow"},
            "resource": {"group": "flow.volcano.sh", "version": "v1alpha1", "resource": "jobflows"},
            "name": "valid-jobflow",
            "namespace": "default",
            "object": obj,
            "oldObject": obj if operation == "UPDATE" else None,
        },
        "existing": [],
        "expect": expect,
    }


def _step(name: str, *targets: str) -> dict[str, Any]:
    return {"name": name, "dependsOn": {"targets": list(targets)}} if targets else {"name": name}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_cycle_is_denied(operation: str) -> None:
    flows = [_step("a", "b"), _step("b", "a"), _step("c", "a", "b"), _step("d", "b"), _step("e", "c", "d")]
    expect = {"allowed": False, "messageContains": NOT_DAG}
    result = run_case(_case(flows, expect, operation), HEADER)
    assert result.passed, result.differences


def test_a_step_that_depends_on_itself_is_denied() -> None:
    result = run_case(_case([_step("a", "a")], {"allowed": False, "messageContains": "not DAG"}), HEADER)
    assert result.passed, result.differences


def test_a_repeated_name_keeps_the_last_dependencies() -> None:
    """Volcano's "muti c": the second ``c`` replaces the first; still a DAG."""
    flows = [_step("a"), _step("b", "a"), _step("c", "a"), _step("c", "b")]
    result = run_case(_case(flows, {"allowed": True}), HEADER)
    assert result.passed, result.differences


def test_the_example_dag_is_allowed() -> None:
    flows = [_step("a"), _step("b", "a"), _step("c", "b"), _step("d", "b"), _step("e", "c", "d")]
    result = run_case(_case(flows, {"allowed": True}), HEADER)
    assert result.passed, result.differences


def _flow(graph: dict[str, list[str]]) -> JobFlow:
    steps = [Flow(name=n, depends_on=FlowDependsOn(targets=t) if t else None) for n, t in graph.items()]
    return JobFlow(spec=JobFlowSpec(flows=steps))


@pytest.mark.parametrize(
    ("graph", "error"),
    [  # Volcano's TestIsDAG table, with edges as dependsOn targets
        ({"1": ["2"], "2": ["1", "3"]}, f"{NOT_DAG}: vertex is not defined: 3"),
        ({"1": ["2"], "2": ["3"], "3": ["1"]}, NOT_DAG),
        ({"1": ["2"], "2": ["1", "3"], "3": []}, NOT_DAG),
        ({"1": ["2", "3"], "2": ["3"], "3": ["4"], "4": []}, ""),
        ({"1": ["2", "3"], "2": ["4", "5"], "3": [], "4": [], "5": []}, ""),
        ({"1": ["2", "3", "4"], "2": ["3"], "3": ["4"], "4": ["5"], "5": []}, ""),
        ({"1": ["2", "3", "4"], "2": ["3", "5"], "3": ["5"], "4": ["3", "5"], "5": []}, ""),
        ({"1": ["2", "3", "4"], "2": ["3", "5"], "3": ["5"], "4": ["3", "5"], "5": ["5", "3"]}, NOT_DAG),
    ],
)
def test_volcanos_dag_table(graph: dict[str, list[str]], error: str) -> None:
    assert flow_dag_error(_flow(graph)) == error
