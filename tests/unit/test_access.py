"""The access table: who may publish what on the bus, and who may write the mirror."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from lahar.cli.main import build_parser
from lahar.infra.auth import Credentials, literal, nats_conf, valkey_acl
from lahar.wire import access
from lahar.wire.access import may_publish, subject_matches
from lahar.wire.names import DECISION_KINDS, DELTA_KINDS, Names

NAMES = Names("lahar")
SERVICES = ("cache", "scheduler", "binder", "controller")


def publishers(subject: str) -> set[str]:
    return {role for role in SERVICES if may_publish(NAMES, role, subject)}


def test_subject_matching_follows_nats_wildcards() -> None:
    assert subject_matches("a.>", "a.b.c") and not subject_matches("a.>", "a")
    assert subject_matches("a.*.c", "a.b.c") and not subject_matches("a.*.c", "a.b.d")
    assert not subject_matches("a.b", "a.b.c") and not subject_matches("a.b.c", "a.b")


@pytest.mark.parametrize("kind", DECISION_KINDS)
def test_only_the_scheduler_publishes_decisions(kind: str) -> None:
    assert publishers(NAMES.decision_subject(kind)) == {"scheduler"}


@pytest.mark.parametrize("kind", DELTA_KINDS)
def test_only_the_cache_publishes_deltas(kind: str) -> None:
    assert publishers(NAMES.delta_subject(kind)) == {"cache"}


def test_only_binders_publish_results_and_take_decisions() -> None:
    assert publishers(NAMES.result_subject) == {"binder"}
    fetch = f"$JS.API.CONSUMER.MSG.NEXT.{NAMES.decisions_stream}.{NAMES.binder_consumer}"
    ack = f"$JS.ACK.{NAMES.decisions_stream}.{NAMES.binder_consumer}.1.2.3.4.5.6"
    assert publishers(fetch) == publishers(ack) == {"binder"}


def test_each_leader_writes_only_its_own_lease() -> None:
    for role in access.LEADERS:
        key = NAMES.scheduler_lease if role == "scheduler" else role
        assert publishers(f"$KV.{NAMES.leader_bucket}.{key}") == {role}


def test_every_stream_has_one_owner_and_only_it_may_change_the_stream() -> None:
    owners = access.stream_owners(NAMES)
    assert set(owners) == {NAMES.cluster_stream, NAMES.decisions_stream, NAMES.results_stream, NAMES.dead_letter_stream}
    for stream, owner in owners.items():
        for verb in ("CREATE", "UPDATE", "DELETE", "PURGE"):
            expected = {owner} if verb in ("CREATE", "UPDATE") else set()
            assert publishers(f"$JS.API.STREAM.{verb}.{stream}") == expected, (verb, stream)
        assert access.owned_streams(NAMES, "admin") >= {stream}


def test_admission_has_no_nats_user_and_admin_may_do_anything() -> None:
    with pytest.raises(ValueError, match="admission"):
        access.nats_permissions(NAMES, "admission")
    assert access.nats_permissions(NAMES, "admin") is None
    assert may_publish(NAMES, "admin", NAMES.decision_subject("bind"))


def test_replies_to_one_service_cannot_be_read_by_another() -> None:
    inboxes = {role: access.inbox_prefix(role) for role in SERVICES}
    assert len(set(inboxes.values())) == len(SERVICES)
    for role in SERVICES:
        perms = access.nats_permissions(NAMES, role)
        assert perms is not None and perms.subscribe == (f"{inboxes[role]}.>",)


def test_the_permissions_follow_the_prefix() -> None:
    other = Names("t1_abc")
    assert may_publish(other, "scheduler", other.decision_subject("bind"))
    assert not may_publish(other, "scheduler", NAMES.decision_subject("bind"))


def test_only_the_cache_writes_the_mirror_in_valkey() -> None:
    rules = {role: access.redis_rules("lahar", role) for role in access.REDIS_ROLES}
    assert "~lahar:mirror:*" in rules["cache"]
    for role in ("scheduler", "controller", "admission"):
        assert "%R~lahar:mirror:*" in rules[role] and "~lahar:mirror:*" not in rules[role]
        assert "+@write" not in rules[role]
    assert "~lahar:epochs" in rules["scheduler"] and not any("epochs" in r for r in rules["admission"])


def test_rendered_configurations_name_every_user_and_keep_valkey_passwords_hashed() -> None:
    creds = Credentials()
    conf = nats_conf(NAMES, literal(creds.nats), tls=("/c/tls.crt", "/c/tls.key"))
    for role in access.NATS_ROLES:
        assert f'user: "{role}"' in conf and creds.nats[role] in conf
    assert "http" not in conf and "monitor" not in conf
    acl = valkey_acl("lahar", creds.redis)
    assert acl.splitlines()[0].startswith("user default off")
    assert not any(pw in acl for pw in creds.redis.values())


def test_the_secrets_command_writes_passwords_only_their_owner_can_read(tmp_path: Path) -> None:
    out = tmp_path / "secrets.yaml"
    args = build_parser().parse_args(["access", "secrets", "--prefix", "lahar", "--out", str(out)])
    assert args.handler(args) == 0
    assert out.stat().st_mode & 0o077 == 0
    secrets = {s["metadata"]["name"]: s["stringData"] for s in yaml.safe_load_all(out.read_text())}
    creds, acl = secrets["lahar-credentials"], secrets["lahar-valkey-acl"]["users.acl"]
    for role in access.REDIS_ROLES:
        digest = hashlib.sha256(creds[f"redis-{role}"].encode()).hexdigest()
        assert f"user {role} on #{digest} " in acl
    assert set(creds) >= {f"nats-{role}" for role in access.NATS_ROLES}
    assert "BEGIN CERTIFICATE" in secrets["lahar-nats-tls"]["ca.crt"]


def test_the_nats_conf_command_reads_passwords_from_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["access", "nats-conf", "--prefix", "other"])
    assert args.handler(args) == 0
    conf = capsys.readouterr().out
    assert "password: $LAHAR_NATS_PASSWORD_SCHEDULER" in conf and '"other.decision.>"' in conf
