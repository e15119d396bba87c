"""The shortcuts a session's open, allocate and close take where the plain code went job by job:
sums of runs of one object or of equal amounts (``AddRuns``, ``add_equal_runs``), each job's
held sum shared by drf's and proportion's opens (``RunSums.held``), proportion's allocatable
refusal explained once per request and queue numbers, and drf's stale shares at close taken
from a job holding the same amounts.  Each is checked against the plain loop it replaces, float
bits included, and whole sessions against the plain plugin methods."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_close_batches import CONFS, as_run_and_plain, contended, exact, fractional

from builders import node, pod, podgroup, queue, snapshot
from lahar.api.resource import Resource
from lahar_scheduler.actions.allocate import FITS_FUTURE, FITS_IDLE, NO_FIT, AllocateAction, NodeCaches
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.nodewindow import window_positions
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.sums import HELD, AddRuns, RunSums, add_equal_runs
from lahar_scheduler.framework.why import Pool, amount, queue_state_why, quota_why, shortages
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.plugins.drf import DrfPlugin
from lahar_scheduler.plugins.proportion import ProportionPlugin, _add_positive, _usage
from lahar_scheduler.plugins.queueshare import elastic_resources, job_inqueue

AMOUNTS = st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e-9, 4000.0, 2.0**53, 3.0 * 2**30, float("inf")])


@st.composite
def resource(draw: st.DrawFn) -> Resource:
    names = draw(st.lists(st.sampled_from(["pods", "nvidia.com/gpu", "x"]), unique=True, max_size=3))
    return Resource(draw(AMOUNTS), draw(AMOUNTS), {n: draw(AMOUNTS) for n in names})


@st.composite
def runs(draw: st.DrawFn) -> list[Resource]:
    """A sequence with runs of one object, of equal copies and of equal amounts of other signs."""
    pool = draw(st.lists(resource(), min_size=1, max_size=4))
    out: list[Resource] = []
    for _ in range(draw(st.integers(0, 12))):
        r = draw(st.sampled_from(pool))
        how = draw(st.sampled_from(["same", "copy", "negzero"]))
        if how == "copy":
            r = r.clone()
        elif how == "negzero":  # equal amounts, zeros of the other sign
            r = Resource(
                -r.milli_cpu if r.milli_cpu == 0 else r.milli_cpu,
                -r.memory if r.memory == 0 else r.memory,
                {n: (-v if v == 0 else v) for n, v in r.scalars.items()},
            )
        out.extend([r] * draw(st.integers(1, 3)))
    return out


def plain_sum(rs: list[Resource]) -> Resource:
    total = Resource()
    for r in rs:
        total.add(r)
    return total


@settings(max_examples=300, deadline=None)
@given(runs())
def test_equal_runs_sum_as_the_adds_one_by_one(rs: list[Resource]) -> None:
    total = Resource()
    add_equal_runs(total, rs)
    assert exact(total) == exact(plain_sum(rs))


@settings(max_examples=300, deadline=None)
@given(runs())
def test_runs_of_one_object_sum_as_the_adds_one_by_one(rs: list[Resource]) -> None:
    total = Resource()
    adds = AddRuns(total)
    for r in rs:
        adds.add(r)
    adds.flush()
    assert exact(total) == exact(plain_sum(rs))


@settings(max_examples=60, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_held_is_one_run_and_kept_per_job(objs: list[Any], seed: int) -> None:
    snap = snapshot(objs)
    fractional(snap, seed)
    sums = RunSums()
    for job in snap.jobs.values():
        first = sums.held(job)
        assert first is sums.held(job)
        want = RunSums().one_run(job.status_index, HELD)
        assert (first is None) == (want is None)
        assert first is None or want is None or exact(first) == exact(want)


def plain_why_not_allocatable(self: ProportionPlugin, queue: Any, task: Any) -> Any:
    """proportion's explanation of a refusal, made anew each time (what the memo keeps)."""
    if not queue.is_open():
        return queue_state_why("allocate", self.name, queue.name, queue.state)
    attr = self.attrs.get(queue.uid)
    if attr is None:
        return None
    ok, names = attr.allocated.clone().add(task.resreq).less_equal_in(attr.deserved, task.resreq)
    if ok:
        return None
    short = shortages(task.resreq, attr.allocated, attr.deserved, names)
    never = [s for s in short if s.requested > attr.real_capability.get(s.name)]
    if never:
        caps = ", ".join(f"{amount(s.name, attr.real_capability.get(s.name))} {s.name}" for s in never)
        remedy = f"it can never fit: the queue may hold at most {caps}; add nodes or request less"
    else:
        remedy = "raise its weight or guarantee (deserved is its weighted share of the cluster), add nodes"
    why = quota_why("allocate", self.name, queue.name, short, "deserved", remedy, freeable=not never)
    why.details.append(f"task {task.name} asks {task.resreq}")
    return why


def plain_drf_close(self: DrfPlugin, ssn: Session) -> None:
    """drf's close with every share read off its attr and the namespaces summed job by job."""
    by_namespace: dict[str, Resource] = {}
    stats = ssn.result.stats
    for uid, attr in self.attrs.items():
        job = ssn.jobs[uid]
        stats.job(uid, job.name, job.namespace, job.queue).share = attr.share
        by_namespace.setdefault(job.namespace, Resource()).add(attr.allocated)
    for namespace, held in by_namespace.items():
        stats.namespace_shares[namespace] = self.dominant(held)


def plain_queue_attrs(self: ProportionPlugin, ssn: Session) -> Any:
    """proportion's per-queue sums with a RunSums of its own and an add per job."""
    attrs: dict[str, Any] = {}
    sums = RunSums()
    for job in ssn.jobs.values():
        attr = attrs.get(job.queue)
        if attr is None:
            attr = attrs[job.queue] = self._new_attr(ssn.queues[job.queue])
            attr.pool = Pool("the cluster", self.total, self.total_guarantee)
        allocated, request = _usage(sums, job)
        attr.allocated.add(allocated)
        attr.request.add(request)
        if job.min_resources is None:
            _add_positive(attr.elastic, job.allocated)
            continue
        inqueue = job_inqueue(job)
        if inqueue is not None:
            attr.inqueue.add(inqueue)
        attr.elastic.add(elastic_resources(job))
    return attrs


def result_of(r: Any) -> str:
    st_ = r.stats
    return repr(
        (
            r.podgroups,
            r.task_reasons,
            r.pipelined,
            r.decisions,
            [(k, exact(v)) for k, v in r.queues.items()],
            st_.queues,
            [(k, v, v.share.hex() if v.share is not None else None) for k, v in st_.jobs.items()],
            [(k, v.hex()) for k, v in st_.namespace_shares.items()],
            st_.unschedulable_jobs,
        )
    )


@settings(max_examples=80, deadline=None)
@given(contended(), st.sampled_from(sorted(CONFS)), st.integers(0, 2**16))
def test_sessions_report_what_the_plain_plugin_methods_report(objs: list[Any], kind: str, seed: int) -> None:
    plain = [
        (ProportionPlugin, "why_not_allocatable", plain_why_not_allocatable),
        (ProportionPlugin, "_queue_attrs", plain_queue_attrs),
        (DrfPlugin, "on_session_close", plain_drf_close),
        (RunSums, "held", plain_held),
    ]
    _, got, _, want = as_run_and_plain(objs, kind, seed, plain)
    assert result_of(got) == result_of(want)


def plain_held(self: RunSums, job: Any) -> Resource | None:
    """RunSums.held without keeping anything: each plugin's open sums every job itself."""
    return self.one_run(job.status_index, HELD)


def test_a_refusal_is_explained_anew_once_the_queue_holds_more() -> None:
    """The memo's key follows what the queue holds: a changed allocation gives its own text."""
    objs: list[Any] = [queue("a", 1), queue("b", 1), node("n0", cpu="4"), node("n1", cpu="4")]
    objs += [podgroup("r", queue="a", min_member=1, phase="Running")]
    objs += [pod(f"r-{i}", group="r", cpu="2", node_name=f"n{i % 2}", phase="Running") for i in range(4)]
    objs += [podgroup("p", queue="a", min_member=1), pod("p-0", group="p", cpu="1")]
    ssn = Session(snapshot(objs), CONFS["preempt"], dict(PLUGINS)).open()
    prop: Any = next(p for p in ssn.plugins if p.name == "proportion")
    q, t = ssn.queues["a"], ssn.snapshot.tasks[next(k for k in ssn.snapshot.tasks if k.endswith("p-0"))]
    first = prop.why_not_allocatable(q, t)
    assert repr(first) == repr(plain_why_not_allocatable(prop, q, t))
    prop.attrs["a"].allocated.add(Resource(1000.0, 0.0))
    assert repr(prop.why_not_allocatable(q, t)) == repr(plain_why_not_allocatable(prop, q, t))
    assert first is not prop.why_not_allocatable(q, t)  # each caller its own Why to keep


def plain_feasible_window(self: NodeCaches, task: Any) -> Any:
    """NodeCaches.feasible_window walking the window whether or not any node passes."""
    if not self.local(task):
        return None
    codes = self.codes.get(task.template_key, task)
    snapshot = self.ssn.snapshot
    kept, snapshot.last_processed_node = window_positions(codes > NO_FIT, snapshot.last_processed_node)
    got = codes[kept]
    return kept[got == FITS_IDLE], kept[got == FITS_FUTURE]


@settings(max_examples=80, deadline=None)
@given(contended(), st.sampled_from(sorted(CONFS)), st.integers(0, 2**16), st.integers(-3, 40))
def test_allocate_on_full_nodes_decides_as_the_plain_walk(objs: list[Any], kind: str, seed: int, start: int) -> None:
    """A task shape no node passes skips the window walk, and the candidate rows are taken once
    per session: the same results, and the walk's index left where the plain walk leaves it."""
    snaps = []
    for _ in range(2):
        snap = snapshot(objs)
        fractional(snap, seed)
        snap.last_processed_node = start
        snaps.append(snap)
    fast, slow = snaps
    got = run_session(fast, CONFS[kind])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NodeCaches, "feasible_window", plain_feasible_window)
        mp.setattr(AllocateAction, "_candidate_nodes", lambda self, ssn: ssn.candidate_nodes())
        want = run_session(slow, CONFS[kind])
    assert result_of(got) == result_of(want)
    assert fast.last_processed_node == slow.last_processed_node
