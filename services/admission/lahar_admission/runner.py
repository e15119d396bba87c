"""Running the service: the mirror, the certificate and config watchers, and uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import uvicorn

from lahar_admission.config import ServiceSettings
from lahar_admission.mirror import MirrorView
from lahar_admission.server import AppConfig, create_app, rule_settings_of
from lahar_admission.settings import load_time_zones
from lahar_admission.tls import CertReloader
from lahar_admission.types import AdmissionConfig
from lahar_admission.view import parse_admission_config

log = logging.getLogger("lahar.admission")


class ConfigFile:
    """The ``--admission-conf`` file, re-read when it changes (Volcano watches it too)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path) if path else None
        self.current: AdmissionConfig | None = None
        self._stamp: tuple[int, int] | None = None
        self.check()

    def check(self) -> None:
        if self.path is None:
            return
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp == self._stamp:
                return
            text = self.path.read_text()
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc)
            self.current, self._stamp = None, None
            return
        self._stamp = stamp
        self.current = parse_admission_config(text)

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            self.check()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


def build(settings: ServiceSettings, redis: Any) -> tuple[Any, MirrorView, ConfigFile]:
    conf = ConfigFile(settings.admission_conf)
    mirror = MirrorView(
        redis,
        settings.prefix,
        settings.mirror_refresh,
        settings.mirror_max_staleness,
        config=lambda: conf.current,
    )

    def ready() -> tuple[bool, str]:
        return mirror.available, mirror.last_error

    app = create_app(
        AppConfig(
            rules=rule_settings_of(settings, load_time_zones()),
            view=mirror,
            enabled=settings.enabled_admission,
            on_unavailable=dict(settings.on_unavailable),
            default_timeout=settings.default_timeout,
            max_body_bytes=settings.max_body_bytes,
            ready=ready,
            read_through=mirror.read_through,
            catch_up=mirror.catch_up,
            mirror_age=mirror.age,
        )
    )
    return app, mirror, conf


async def serve(settings: ServiceSettings) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(settings.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
    app, mirror, conf = build(settings, client)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=settings.cert_file,
        ssl_keyfile=settings.key_file,
        log_level=settings.log_level,
        access_log=False,
        lifespan="off",
    )
    config.load()  # builds config.ssl, the live SSLContext the reloader updates
    assert config.ssl is not None
    reloader = CertReloader(config.ssl, settings.cert_file, settings.key_file, settings.cert_poll)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(mirror.run(stop)),
        asyncio.create_task(reloader.run(stop)),
        asyncio.create_task(conf.run(stop, settings.cert_poll)),
    ]
    try:
        await uvicorn.Server(config).serve()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.aclose()
