"""The comparison of lahar.sim.fidelity: what is normalised away, what counts as a difference,
and how the allow-list judges them (the runs themselves are in tests/kube/test_fidelity.py)."""

from __future__ import annotations

from lahar.sim.fidelity.compare import Known, Verdict, diff, judge, normalize, stale
from lahar.sim.fidelity.known import KNOWN
from lahar.sim.fidelity.sequence import STEPS


def test_volatile_values_and_run_names_are_normalised() -> None:
    record = {
        "body": {
            "metadata": {
                "name": "fid-abc123-q",
                "uid": "3f0e2b9c-1111-2222-3333-444455556666",
                "resourceVersion": "42",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "x"}],
                "labels": {"fid-abc123": "x"},
            },
            "message": 'too old resource version: 5 (99) in "fid-abc123"',
            "spec": {"volumes": [{"name": "kube-api-access-x7k2q"}], "generated": "gen-bcd42"},
        }
    }
    assert normalize(record, "fid-abc123") == {
        "body": {
            "metadata": {
                "name": "<run>-q",
                "uid": "<str>",
                "resourceVersion": "<str>",
                "creationTimestamp": "<str>",
                "labels": {"<run>": "x"},
            },
            "message": 'too old resource version: N (N) in "<run>"',
            "spec": {"volumes": [{"name": "kube-api-access-<suffix>"}], "generated": "gen-<suffix>"},
        }
    }


def test_diff_names_each_differing_leaf() -> None:
    left = {"code": 200, "body": {"a": [1, 2], "b": {}}}
    right = {"code": 201, "body": {"a": [1], "c": None}}
    assert [str(d) for d in diff(left, right)] == [
        "body.a[1]: 2 != <absent>",
        "body.b: {} != <absent>",
        "body.c: <absent> != null",
        "code: 200 != 201",
    ]


def test_judge_sorts_known_and_new_differences_and_finds_stale_entries() -> None:
    known = [Known("s", ("code",), "a reason"), Known("s", ("body.never",), "stale")]
    verdict = judge("s", {"code": 1, "body": {"x": 1}}, {"code": 2, "body": {"x": 2}}, ("r1", "r2"), known)
    assert [d.path for d, _ in verdict.known] == ["code"]
    assert [d.path for d in verdict.new] == ["body.x"]
    assert not verdict.same
    assert stale([verdict], known) == ["s: body.never"]
    assert judge("s", {"a": "r1"}, {"a": "r2"}, ("r1", "r2"), known).same


def test_every_allow_list_entry_names_a_step_and_gives_a_reason() -> None:
    names = [name for name, _ in STEPS]
    assert len(names) == len(set(names)), "step names must be unique"
    assert names[0] == "namespace: create" and names[-1] == "namespace: delete"
    for entry in KNOWN:
        assert entry.step in names, entry.step
        assert entry.paths and len(entry.reason) > 20


def test_a_verdict_without_differences_is_the_same() -> None:
    assert Verdict("x").same and not Verdict("x", error="boom").same
