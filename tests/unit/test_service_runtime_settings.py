"""lahar.service.settings: flags > environment > defaults, and every problem reported at once."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest
from msgspec import Meta

from lahar.service import Check, Secret, Settings, SettingsError, load_settings


class Point(msgspec.Struct):
    x: int
    y: int


class DemoSettings(Settings):
    """A demo service."""

    queue: Annotated[str, Meta(min_length=1, description="queue to serve")]
    workers: Annotated[int, Meta(ge=1, le=64, description="worker count")] = 4
    dry_run: bool = False
    zones: list[str] = []
    limit: int | None = 10
    mode: Literal["fast", "safe"] = "safe"
    labels: dict[str, str] = {}
    origin: Point | None = None
    token: Annotated[str, Secret(), Check(lambda v: None if v.startswith("tk-") else "must start with tk-")] = "tk-0"

    def problems(self) -> list[str]:
        if self.mode == "fast" and self.dry_run:
            return ["mode, dry_run: fast mode cannot be a dry run"]
        return [*super().problems()]


def test_defaults_apply_when_nothing_is_given() -> None:
    settings = load_settings(DemoSettings, ["--queue", "q"], {})
    assert settings == DemoSettings(queue="q")
    assert (settings.http_port, settings.log_level, settings.otel_exporter, settings.shutdown_timeout) == (
        8080,
        "info",
        "none",
        10.0,
    )


def test_flag_wins_over_environment_which_wins_over_default() -> None:
    env = {"LAHAR_QUEUE": "from-env", "LAHAR_WORKERS": "8", "LAHAR_HTTP_PORT": "9000", "LAHAR_DRY_RUN": "true"}
    settings = load_settings(DemoSettings, ["--workers", "16", "--no-dry-run"], env)
    assert settings.queue == "from-env"  # env over the (missing) default
    assert settings.workers == 16  # flag over env
    assert settings.dry_run is False  # a boolean flag over env
    assert settings.http_port == 9000  # env over default
    assert settings.limit == 10  # default


def test_text_values_become_typed_values() -> None:
    env = {
        "LAHAR_QUEUE": "q",
        "LAHAR_ZONES": "a, b,,c",
        "LAHAR_LIMIT": "",
        "LAHAR_LABELS": '{"team": "ml"}',
        "LAHAR_ORIGIN": '{"x": 1, "y": "2"}',
        "LAHAR_SHUTDOWN_TIMEOUT": "2.5",
        "LAHAR_OTEL_EXPORTER": "jsonl:/tmp/spans.jsonl",
    }
    settings = load_settings(DemoSettings, ["--dry-run", "--mode=safe"], env)
    assert settings.zones == ["a", "b", "c"]
    assert settings.limit is None  # empty means None for an optional field
    assert settings.labels == {"team": "ml"}
    assert settings.origin == Point(1, 2)
    assert settings.shutdown_timeout == 2.5
    assert settings.dry_run is True
    assert settings.otel_exporter == "jsonl:/tmp/spans.jsonl"


def test_every_error_is_listed_at_once_with_field_flag_and_variable() -> None:
    env = {
        "LAHAR_HTTP_PORT": "http",
        "LAHAR_WORKERS": "0",
        "LAHAR_SHUTDOWN_TIMEOUT": "-1",
        "LAHAR_TOKEN": "hunter2",
    }
    argv = ["--log-level", "loud", "--otel-exporter", "zipkin", "--mode", "slow", "--origin", "[1]", "--bogus"]
    with pytest.raises(SettingsError) as caught:
        load_settings(DemoSettings, argv, env)
    errors = caught.value.errors
    assert errors[0] == "unknown argument '--bogus' (see --help)"
    by_field = {e.split(" ", 1)[0]: e for e in errors[1:]}
    assert sorted(by_field) == sorted(
        ["log_level", "http_port", "otel_exporter", "shutdown_timeout", "queue", "workers", "mode", "origin", "token"]
    )
    assert by_field["queue"] == "queue (--queue / LAHAR_QUEUE): required; give --queue or set LAHAR_QUEUE"
    assert by_field["log_level"] == (
        "log_level (--log-level / LAHAR_LOG_LEVEL): must be one of debug, info, warning, error "
        "(got 'loud' from --log-level)"
    )
    assert by_field["http_port"].startswith("http_port (--http-port / LAHAR_HTTP_PORT): Expected `int`")
    assert by_field["http_port"].endswith("(got 'http' from LAHAR_HTTP_PORT)")
    assert "Expected `int` >= 1" in by_field["workers"]
    assert "Expected `float` > 0.0" in by_field["shutdown_timeout"]
    assert (
        "not a known exporter" in by_field["otel_exporter"]
        and "otlp, console, none or jsonl:PATH" in (by_field["otel_exporter"])
    )
    assert "must be one of fast, safe" in by_field["mode"]
    assert "origin (--origin / LAHAR_ORIGIN): Expected `object | null`, got `array`" in by_field["origin"]
    assert by_field["token"] == "token (--token / LAHAR_TOKEN): must start with tk-"  # a secret is not shown
    assert "hunter2" not in str(caught.value)
    assert str(caught.value).startswith("invalid settings:\n  - unknown argument")


def test_cross_field_problems_are_checked_once_fields_are_valid() -> None:
    with pytest.raises(SettingsError, match="mode, dry_run: fast mode cannot be a dry run"):
        load_settings(DemoSettings, ["--queue", "q", "--mode", "fast", "--dry-run"], {})


def test_environment_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAHAR_QUEUE", "from-os")
    assert load_settings(DemoSettings, []).queue == "from-os"


def test_help_lists_every_flag_with_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        load_settings(DemoSettings, ["--help"], {}, prog="demo")
    assert caught.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "A demo service." in text
    for flag, env in [("--queue", "LAHAR_QUEUE"), ("--http-port", "LAHAR_HTTP_PORT"), ("--dry-run", "LAHAR_DRY_RUN")]:
        assert flag in text and env in text
    assert "worker count [env LAHAR_WORKERS; default 4]" in text
    assert "queue to serve [env LAHAR_QUEUE; required]" in text
