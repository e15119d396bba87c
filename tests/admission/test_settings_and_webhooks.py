"""Service settings (flags over LAHAR_ADMISSION_* over defaults) and the webhook configurations."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from lahar_admission.config import SettingsError, load_settings
from lahar_admission.rules import WEBHOOKS
from lahar_admission.tls import make_certs
from lahar_admission.webhooks import webhook_configurations


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings({"port": "x", "on_unavailable": "maybe", "cert_file": str(tmp_path / "nope")}, environ={})
    text = "\n".join(err.value.problems)
    assert "--port" in text and "--on-unavailable" in text and "--cert-file" in text and "--key-file" in text


def test_flags_win_over_environment(tmp_path: Path) -> None:
    certs = make_certs(["localhost"], tmp_path)
    env = {
        "LAHAR_ADMISSION_PORT": "9443",
        "LAHAR_ADMISSION_CERT_FILE": str(certs.cert),
        "LAHAR_ADMISSION_KEY_FILE": str(certs.key),
        "LAHAR_ADMISSION_ON_UNAVAILABLE": "pods=deny",
    }
    s = load_settings({"port": "10443"}, environ=env)
    assert s.port == 10443
    assert s.on_unavailable["pods"] == "deny" and s.on_unavailable["jobs"] == "deny"
    assert load_settings({}, environ=env).port == 9443


def test_webhook_configurations(tmp_path: Path) -> None:
    certs = make_certs(["localhost"], tmp_path)
    objs = webhook_configurations("https://127.0.0.1:8443/", certs.ca.read_bytes())
    assert len(objs) == len(WEBHOOKS)
    by_name = {o["metadata"]["name"]: o for o in objs}
    jobs = by_name["volcano-admission-service-jobs-validate"]
    assert jobs["kind"] == "ValidatingWebhookConfiguration"
    hook = jobs["webhooks"][0]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:8443/jobs/validate"
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == certs.ca.read_bytes()
    assert hook["failurePolicy"] == "Fail" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    pods = by_name["volcano-admission-service-pods-mutate"]
    assert pods["kind"] == "MutatingWebhookConfiguration"
    assert pods["webhooks"][0]["failurePolicy"] == "Ignore"
    with pytest.raises(ValueError):
        webhook_configurations("https://x", b"pem", timeout_seconds=60)
