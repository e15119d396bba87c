"""Certificates: a development CA and serving certificate (``lahar.infra.certs``), and live reload
of the served pair.

uvicorn builds its SSLContext once and never reloads it.  ``load_cert_chain`` on that live
context makes the next TLS handshake use the new pair (ecosystem.md §3.6), so ``CertReloader``
polls the files' mtime/size/inode and reloads in place — a cert-manager rotation or a rewritten
Secret mount takes effect without a restart, and a half-written pair is retried, not fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import ssl
from pathlib import Path

from lahar.infra import certs
from lahar.infra.certs import CertFiles

__all__ = ["CertFiles", "CertReloader", "make_certs"]

log = logging.getLogger("lahar.admission.tls")


def make_certs(dns_names: list[str], out_dir: str | Path, days: int = 365, now: dt.datetime | None = None) -> CertFiles:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (the serving pair for ``dns_names``)."""
    return certs.make_certs(dns_names, out_dir, days=days, now=now, ca_name="lahar-admission-ca")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class CertReloader:
    """Reloads ``cert``/``key`` into ``context`` when either file changes."""

    def __init__(self, context: ssl.SSLContext, cert: str | Path, key: str | Path, interval: float = 1.0) -> None:
        self.context = context
        self.cert, self.key = Path(cert), Path(key)
        self.interval = interval
        self._seen = (_stamp(self.cert), _stamp(self.key))
        self.reloads = 0
        self.last_error = ""

    def check(self) -> bool:
        """Reload when the files changed; True when a new pair was loaded."""
        now = (_stamp(self.cert), _stamp(self.key))
        if now == self._seen or None in now:
            return False
        try:
            self.context.load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, OSError) as exc:
            # Probably mid-rotation (new cert, old key): keep serving the old pair, retry later.
            self.last_error = f"cannot load {self.cert} / {self.key}: {exc}"
            log.warning("%s", self.last_error)
            return False
        self._seen = now
        self.reloads += 1
        self.last_error = ""
        log.info("reloaded serving certificate from %s", self.cert)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.check()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
