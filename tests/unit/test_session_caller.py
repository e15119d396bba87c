"""``Session.caller``'s shortcuts answer as the combiners do (framework/points.py SHORTCUTS).

Chains of none, one and two callbacks (two fall back to the combiner), over answers of every
truthiness the callbacks may give; and a session's callers against its ``call``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from builders import node, open_session, pod, podgroup, queue
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P

ANSWERS: list[Any] = [True, False, None, 0, 1, -1, "", "no room", 3, [], ["x"]]


def _answering(answer: Any) -> Callable[..., Any]:
    return lambda *args: answer


def _fns(answers: list[Any]) -> list[Callable[..., Any]]:
    return [_answering(a) for a in answers]


@pytest.mark.parametrize("combine", list(P.SHORTCUTS))
@pytest.mark.parametrize("n", [0, 1, 2])
def test_shortcuts_answer_as_the_combiners(combine: Callable[..., Any], n: int) -> None:
    for first in ANSWERS:
        for second in ANSWERS:
            fns = _fns([first, second][:n])
            fast = P.SHORTCUTS[combine](fns)
            if fast is None:
                assert n > 1  # only longer chains fall back
                continue
            want = combine([fns[:1], fns[1:]], ("a", "b"))
            got = fast("a", "b")
            assert got == want and type(got) is type(want)


def test_a_sessions_callers_answer_as_call() -> None:
    objs = [queue("q"), node("n1", cpu="2"), podgroup("a", queue="q", min_member=1), pod("a-w-0", group="a", cpu="1")]
    ssn = open_session(objs, load_conf(None))
    job = next(iter(ssn.jobs.values()))
    task = next(iter(job.tasks.values()))
    q = ssn.queues[job.queue]
    assert ssn.caller(P.ALLOCATABLE)(q, task) == ssn.call(P.ALLOCATABLE, q, task)
    assert ssn.caller(P.PRE_PREDICATE)(task) == ssn.call(P.PRE_PREDICATE, task)
    assert ssn.caller(P.JOB_READY)(job) == ssn.call(P.JOB_READY, job)
    assert ssn.caller(P.JOB_PIPELINED)(job) == ssn.call(P.JOB_PIPELINED, job)
    idx = ssn.candidate_nodes()
    assert ssn.caller(P.NODE_ORDER)(task, idx).tolist() == ssn.call(P.NODE_ORDER, task, idx).tolist()
    scores = ssn.call(P.NODE_ORDER, task, idx)
    assert ssn.caller(P.BEST_NODE)(task, idx, scores) == ssn.call(P.BEST_NODE, task, idx, scores)
