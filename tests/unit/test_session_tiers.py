"""How the session combines plugin answers across tiers, one rule per extension point
(Volcano's framework/session_plugins.go)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from builders import node, pod, podgroup, queue, snapshot
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import FLAGS, PluginOption, SchedulerConf, Tier
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Plugin, Session
from lahar_scheduler.framework.types import Code, Vote

# (plugin name, {extension point: callback}, flags turned off)
Spec = tuple[str, dict[str, Callable[..., Any]], Sequence[str]]


def make_session(*tiers: Sequence[Spec], objects: Sequence[Any] = ()) -> Session:
    """A session whose plugins are fakes registering the given callbacks."""
    types: dict[str, type[Plugin]] = {}
    conf_tiers = []
    for tier in tiers:
        opts = []
        for name, callbacks, off in tier:

            def open_(self: Plugin, ssn: Session, callbacks: dict[str, Callable[..., Any]] = callbacks) -> None:
                for point, fn in callbacks.items():
                    ssn.add(_point(point), fn)

            types[name] = type(name, (Plugin,), {"name": name, "on_session_open": open_})
            opts.append(PluginOption(name, {flag: False for flag in off}))
        conf_tiers.append(Tier(opts))
    conf = SchedulerConf(actions=[], tiers=conf_tiers, configurations={})
    return Session(snapshot(objects), conf, types).open()


def _point(name: str) -> P.Point[Any, Any, Any]:
    """The declared point, or an undeclared one (which ``add`` must refuse)."""
    return P.POINTS.get(name) or P.Point(name, None, P.notify, "not declared")


def const(value: Any, calls: list[str] | None = None, tag: str = "") -> Callable[..., Any]:
    def fn(*_: Any) -> Any:
        if calls is not None:
            calls.append(tag)
        return value

    return fn


class T:
    """A stand-in task; the victim rules compare identities only."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def jobs_and_queues() -> tuple[Session, JobInfo, JobInfo, QueueInfo, QueueInfo]:
    objs = [
        queue("qa"),
        queue("qb"),
        podgroup("a", queue="qa"),
        podgroup("b", queue="qb"),
    ]
    ssn = make_session([], objects=objs)
    return ssn, ssn.jobs["default/a"], ssn.jobs["default/b"], ssn.queues["qa"], ssn.queues["qb"]


# -- orderings: first non-zero comparison ----------------------------------------------------


def test_first_nonzero_order_wins_across_tiers() -> None:
    calls: list[str] = []
    ssn = make_session(
        [("p1", {"job_order": const(0, calls, "p1")}, ())],
        [("p2", {"job_order": const(1, calls, "p2")}, ()), ("p3", {"job_order": const(-1, calls, "p3")}, ())],
        objects=[queue("q"), podgroup("a", queue="q"), podgroup("b", queue="q")],
    )
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_order(a, b) is False  # p2 says a after b; p3 is never asked
    assert calls == ["p1", "p2"]


def test_disabled_order_is_skipped_and_default_order_breaks_ties() -> None:
    ssn = make_session(
        [("p1", {"job_order": const(1)}, ("enableJobOrder",)), ("p2", {"job_order": const(0)}, ())],
        objects=[queue("q"), podgroup("a", queue="q"), podgroup("b", queue="q")],
    )
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    # Every enabled plugin says 0: job UID decides (no creation timestamps).
    assert ssn.job_order(a, b) is True and ssn.job_order(b, a) is False


def test_default_job_order_is_creation_then_uid() -> None:
    ssn = make_session(
        [],
        objects=[
            queue("q"),
            podgroup("z", queue="q", creation="2024-01-01T00:00:00Z"),
            podgroup("a", queue="q", creation="2024-01-02T00:00:00Z"),
            podgroup("m", queue="q", creation="2024-01-01T00:00:00+00:00"),
        ],
    )
    z, a, m = (ssn.jobs[f"default/{n}"] for n in "zam")
    assert ssn.job_order(z, a)  # older first, whatever the name
    assert ssn.job_order(m, z)  # same instant written differently: UID decides
    assert sorted([a, z, m], key=ssn.job_order_key) == [m, z, a]


def test_queue_order_and_victim_queue_order_fallback() -> None:
    ssn = make_session([("p", {"queue_order": const(0)}, ())], objects=[queue("qb"), queue("qa")])
    qa, qb = ssn.queues["qa"], ssn.queues["qb"]
    assert ssn.queue_order(qa, qb) and not ssn.queue_order(qb, qa)
    # No victim-queue-order plugin: the reverse of the queue order.
    assert ssn.victim_queue_order(qb, qa, qa) and not ssn.victim_queue_order(qa, qb, qa)
    ssn2 = make_session([("p", {"victim_queue_order": const(-1)}, ())], objects=[queue("qb"), queue("qa")])
    assert ssn2.victim_queue_order(ssn2.queues["qa"], ssn2.queues["qb"], ssn2.queues["qa"])


def test_default_task_order_by_pod_index_then_uid() -> None:
    objs = [
        queue("q"),
        podgroup("pg", queue="q"),
        pod("job-worker-10", group="pg", cpu="1"),
        pod("job-worker-9", group="pg", cpu="1"),
        pod("b-x", group="pg", cpu="1"),
        pod("a-x", group="pg", cpu="1"),
    ]
    ssn = make_session([("p", {"task_order": const(0)}, ())], objects=objs)
    tasks = list(ssn.jobs["default/pg"].tasks.values())
    ordered = [t.name for t in sorted(tasks, key=ssn.task_order_key)]
    # Names with a numeric index compare by index (9 before 10); the others by UID.
    assert ordered.index("job-worker-9") < ordered.index("job-worker-10")
    assert ordered.index("a-x") < ordered.index("b-x")


# -- all pass / any / notify -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "call", "flag"),
    [
        ("allocatable", lambda s, q: s.call(P.ALLOCATABLE, q, None), "enabledAllocatable"),
        ("job_ready", lambda s, q: s.call(P.JOB_READY, None), "enableJobReady"),
        ("preemptive", lambda s, q: s.call(P.PREEMPTIVE, q, []), "enablePreemptive"),
    ],
)
def test_all_must_pass(point: str, call: Callable[[Session, Any], bool], flag: str) -> None:
    q = object()
    assert call(make_session([("a", {point: const(True)}, ())], [("b", {point: const(True)}, ())]), q)
    assert not call(make_session([("a", {point: const(True)}, ())], [("b", {point: const(False)}, ())]), q)
    # A disabled plugin's "no" does not count; no plugin at all means yes.
    assert call(make_session([("a", {point: const(False)}, (flag,))], [("b", {point: const(True)}, ())]), q)
    assert call(make_session([]), q)


def test_overused_is_any() -> None:
    q = object()
    assert make_session([("a", {"overused": const(False)}, ())], [("b", {"overused": const(True)}, ())]).call(
        P.OVERUSED, q
    )
    assert not make_session([("a", {"overused": const(False)}, ())]).call(P.OVERUSED, q)
    assert not make_session([("a", {"overused": const(True)}, ("enabledOverused",))]).call(P.OVERUSED, q)


def test_job_enqueued_notifies_every_enabled_plugin() -> None:
    calls: list[str] = []
    ssn = make_session(
        [("a", {"job_enqueued": const(None, calls, "a")}, ())],
        [
            ("b", {"job_enqueued": const(None, calls, "b")}, ("enableJobEnqueued",)),
            ("c", {"job_enqueued": const(None, calls, "c")}, ()),
        ],
    )
    ssn.call(P.JOB_ENQUEUED, None)  # type: ignore[arg-type]
    assert calls == ["a", "c"]


def test_job_valid_first_failure_and_ignores_flags() -> None:
    ssn = make_session(
        [("a", {"job_valid": const(None)}, tuple(FLAGS))],
        [
            ("b", {"job_valid": const(("R1", "first"))}, tuple(FLAGS)),
            ("c", {"job_valid": const(("R2", "x"))}, ()),
        ],
    )
    assert ssn.call(P.JOB_VALID, None) == ("R1", "first")  # type: ignore[arg-type]
    assert make_session([("a", {"job_valid": const(None)}, ())]).call(P.JOB_VALID, None) is None  # type: ignore[arg-type]


# -- votes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["job_pipelined", "job_enqueueable"])
@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        ([[0, 1], [-1]], True),  # a permit in an earlier tier wins over a later reject
        ([[1, -1]], False),  # a reject in the same tier loses
        ([[-1, 1]], False),
        ([[0], [-1]], False),  # abstentions pass the decision on
        ([[0], [0, 1]], True),
        ([[0, 0], [0]], True),  # no votes: allowed
        ([], True),
    ],
)
def test_votes(point: str, tiers: list[list[int]], expected: bool) -> None:
    specs = [[(f"p{t}{i}", {point: const(Vote(v))}, ()) for i, v in enumerate(tier)] for t, tier in enumerate(tiers)]
    ssn = make_session(*specs)
    assert ssn.call(P.POINTS[point], None) is expected


def test_vote_stops_at_first_reject_and_respects_flag() -> None:
    calls: list[str] = []
    ssn = make_session(
        [
            ("a", {"job_pipelined": const(Vote.REJECT, calls, "a")}, ("enableJobPipelined",)),
            ("b", {"job_pipelined": const(Vote.REJECT, calls, "b")}, ()),
            ("c", {"job_pipelined": const(Vote.PERMIT, calls, "c")}, ()),
        ]
    )
    assert ssn.call(P.JOB_PIPELINED, None) is False  # type: ignore[arg-type]
    assert calls == ["b"]


# -- starving: first tier with a callback decides ----------------------------------------------


@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        ([[True], [False]], True),  # the first tier with a callback decides alone
        ([[True, False], [True]], False),  # AND within that tier
        ([[], [True]], True),  # a tier without callbacks passes the decision on
        ([], False),  # nobody registered: not starving
    ],
)
def test_starving(tiers: list[list[bool]], expected: bool) -> None:
    specs = [[(f"p{t}{i}", {"job_starving": const(v)}, ()) for i, v in enumerate(tier)] for t, tier in enumerate(tiers)]
    assert make_session(*specs).call(P.JOB_STARVING, None) is expected  # type: ignore[arg-type]


def test_starving_disabled_plugin_does_not_claim_its_tier() -> None:
    ssn = make_session(
        [("a", {"job_starving": const(False)}, ("enableJobStarving",))],
        [("b", {"job_starving": const(True)}, ())],
    )
    assert ssn.call(P.JOB_STARVING, None) is True  # type: ignore[arg-type]


# -- victims: intersection per tier, fall through on empty --------------------------------------

t1, t2, t3 = T("t1"), T("t2"), T("t3")
CANDIDATES = [t1, t2, t3]


def victims(got: list[T] | None) -> Callable[..., tuple[list[T], Vote]]:
    """A victim filter returning ``got`` with a Permit, or abstaining when ``got`` is None."""
    return lambda _p, _c: ([], Vote.ABSTAIN) if got is None else (list(got), Vote.PERMIT)


def run_victims(point: str, *tiers: Sequence[list[T] | None]) -> list[T]:
    specs = [[(f"p{t}{i}", {point: victims(v)}, ()) for i, v in enumerate(tier)] for t, tier in enumerate(tiers)]
    ssn = make_session(*specs)
    return ssn.call(P.POINTS[point], None, CANDIDATES)  # type: ignore[no-any-return]


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victims_intersect_within_a_tier(point: str) -> None:
    assert run_victims(point, [[t1, t2], [t2, t3]], [[t1]]) == [t2]


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victims_abstain_is_skipped(point: str) -> None:
    assert run_victims(point, [None, [t1, t3]]) == [t1, t3]
    assert run_victims(point, [None], [[t2]]) == [t2]


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victims_empty_answer_blocks_the_rest_of_its_tier(point: str) -> None:
    """A plugin that permits but names no victim ends its tier with nothing (Volcano breaks out
    of the tier's loop), so a later plugin of the same tier cannot re-seed the list and undo the
    veto; the walk falls through to the next tier."""
    assert run_victims(point, [[], [t1]], [[t2]]) == [t2]
    assert run_victims(point, [[t1], [], [t1]]) == []
    assert run_victims(point, [[], [t1]]) == []


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victims_empty_intersection_reseeds_from_the_next_plugin(point: str) -> None:
    # Volcano's quirk: an empty *intersection* resets the list, the next plugin starts afresh.
    assert run_victims(point, [[t1], [t2], [t3]]) == [t3]
    assert run_victims(point, [[t1], [t2]], [[t3]]) == [t3]


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victims_none_anywhere(point: str) -> None:
    assert run_victims(point, [None], [[]]) == []
    assert run_victims(point) == []


def test_victims_respect_the_enable_flag() -> None:
    ssn = make_session(
        [
            ("a", {"preemptable": victims([])}, ("enablePreemptable",)),
            ("b", {"preemptable": victims([t1])}, ()),
        ],
        [("c", {"reclaimable": victims([t2])}, ("enableReclaimable",))],
    )
    assert ssn.call(P.PREEMPTABLE, None, CANDIDATES) == [t1]  # type: ignore[arg-type]
    assert ssn.call(P.RECLAIMABLE, None, CANDIDATES) == []  # type: ignore[arg-type]


def test_victim_tasks_union_within_first_nonempty_tier() -> None:
    ssn = make_session(
        [("a", {"victim_tasks": const([])}, ())],
        [("b", {"victim_tasks": const([t1, t2])}, ()), ("c", {"victim_tasks": const([t2, t3])}, ())],
        [("d", {"victim_tasks": const([t3])}, ())],
    )
    assert ssn.call(P.VICTIM_TASKS, CANDIDATES) == [t1, t2, t3]  # type: ignore[arg-type]


# -- scores, predicates, best node ---------------------------------------------------------------


def test_node_order_sums_and_best_node_first_answer() -> None:
    objs = [node("n0"), node("n1"), node("n2")]
    ssn = make_session(
        [("a", {"node_order": lambda _t, idx: np.ones(len(idx)), "best_node": const(None)}, ())],
        [
            ("b", {"node_order": lambda _t, idx: idx * 10.0, "best_node": const(2)}, ()),
            ("c", {"node_order": lambda _t, idx: np.full(len(idx), 100.0)}, ("enableNodeOrder",)),
            ("d", {"best_node": const(0)}, ()),
        ],
        objects=objs,
    )
    idx = np.array([0, 1, 2], dtype=np.intp)
    assert ssn.call(P.NODE_ORDER, None, idx).tolist() == [1.0, 11.0, 21.0]  # type: ignore[arg-type]
    assert ssn.call(P.BEST_NODE, None, idx, np.zeros(3)) == 2  # type: ignore[arg-type]
    assert make_session([], objects=objs).call(P.BEST_NODE, None, idx, np.zeros(3)) is None  # type: ignore[arg-type]


def test_predicates_all_must_pass_and_failed_nodes_are_not_shown_again() -> None:
    seen: list[list[int]] = []

    def first(_t: Any, idx: np.ndarray) -> list[Failure]:
        return [Failure(idx == 1, "first says no", Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]

    def second(_t: Any, idx: np.ndarray) -> list[Failure]:
        seen.append(idx.tolist())
        return [Failure(idx == 2, "second says no")]

    ssn = make_session(
        [("a", {"predicate": first}, ())],
        [
            ("b", {"predicate": second}, ()),
            ("c", {"predicate": lambda _t, idx: [Failure(idx >= 0, "x")]}, ("enablePredicate",)),
        ],
        objects=[node("n0"), node("n1"), node("n2"), node("n3")],
    )
    got = ssn.call(P.PREDICATE, None, np.arange(4, dtype=np.intp))  # type: ignore[arg-type]
    assert got.passed.tolist() == [0, 3]
    assert seen == [[0, 2, 3]]
    assert got.unresolvable.tolist() == [1]
    assert got.errors.reasons == {"first says no": 1, "second says no": 1}
    assert got.errors.error(4).rstrip(".") == "2/4 nodes are unavailable: 1 first says no, 1 second says no"


def test_pre_predicate_first_error() -> None:
    ssn = make_session([("a", {"pre_predicate": const(None)}, ()), ("b", {"pre_predicate": const("nope")}, ())])
    assert ssn.call(P.PRE_PREDICATE, None) == "nope"  # type: ignore[arg-type]


# -- registration ---------------------------------------------------------------------------------


def test_registration_rules() -> None:
    with pytest.raises(KeyError, match="unknown extension point"):
        make_session([("a", {"no_such_point": const(0)}, ())])
    ssn = make_session([])
    with pytest.raises(RuntimeError, match="on_session_open"):
        ssn.add(P.JOB_ORDER, const(0))
    assert not ssn.has(P.JOB_ORDER)


def test_event_handlers_fire_in_order() -> None:
    got: list[str] = []
    ssn = make_session([])
    ssn.add_event_handler(EventHandler(lambda t: got.append(f"alloc {t}"), None))
    ssn.add_event_handler(EventHandler(None, lambda t: got.append(f"dealloc {t}")))
    ssn.fire_allocate(t1)  # type: ignore[arg-type]
    ssn.fire_deallocate(t2)  # type: ignore[arg-type]
    assert got == ["alloc t1", "dealloc t2"]


def test_session_ignores_jobs_without_podgroup_or_queue() -> None:
    objs = [
        queue("q"),
        podgroup("ok", queue="q"),
        podgroup("lost", queue="missing"),
        pod("orphan", group="nopg", cpu="1"),
    ]
    ssn = make_session([], objects=objs)
    assert set(ssn.jobs) == {"default/ok"}
    assert set(ssn.snapshot.jobs) == {"default/ok", "default/lost", "default/nopg"}
