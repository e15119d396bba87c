"""Certificates: a development CA and serving certificate, and live reload of the served pair.

uvicorn builds its SSLContext once and never reloads it.  ``load_cert_chain`` on that live
context makes the next TLS handshake use the new pair (ecosystem.md §3.6), so ``CertReloader``
polls the files' mtime/size/inode and reloads in place — a cert-manager rotation or a rewritten
Secret mount takes effect without a restart, and a half-written pair is retried, not fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger("lahar.admission.tls")


@dataclass(frozen=True)
class CertFiles:
    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for n in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            entries.append(x509.DNSName(n))
    return x509.SubjectAlternativeName(entries)


def make_certs(dns_names: list[str], out_dir: str | Path, days: int = 365, now: dt.datetime | None = None) -> CertFiles:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (the serving pair for ``dns_names``)."""
    if not dns_names:
        raise ValueError("at least one DNS name (or IP address) is needed for the serving certificate")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)
    end = start + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("lahar-admission-ca"))
        .issuer_name(_name("lahar-admission-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(_san(dns_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = CertFiles(out / "ca.crt", out / "tls.crt", out / "tls.key")
    _write(files.ca, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(files.key, _key_pem(key), private=True)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    return files


def _write(path: Path, data: bytes, private: bool = False) -> None:
    # Write then rename, so a reader never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    if private:
        os.chmod(tmp, 0o600)
    tmp.replace(path)


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
