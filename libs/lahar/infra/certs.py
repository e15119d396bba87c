"""Certificates for development and tests: a CA of its own and a serving pair it signs.

Used for the admission webhook's HTTPS (``lahar admission certs``) and for the embedded NATS
server's TLS: each run makes a new CA, and clients verify the server against it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertFiles:
    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class CertPair:
    """A CA certificate and the serving pair it signed, as PEM bytes (the CA's key is dropped)."""

    ca: bytes
    cert: bytes
    key: bytes

    def write(self, out_dir: str | Path) -> CertFiles:
        """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (readable by the owner only) into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = CertFiles(out / "ca.crt", out / "tls.crt", out / "tls.key")
        _write(files.ca, self.ca)
        _write(files.key, self.key, private=True)
        _write(files.cert, self.cert)
        return files


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


def make_pair(
    dns_names: list[str], *, days: int = 365, now: dt.datetime | None = None, ca_name: str = "lahar-ca"
) -> CertPair:
    """A new CA (named ``ca_name``) and a serving certificate for ``dns_names`` (DNS names or IP
    addresses), valid for ``days``."""
    if not dns_names:
        raise ValueError("at least one DNS name (or IP address) is needed for the serving certificate")
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)
    end = start + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
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
    pem = serialization.Encoding.PEM
    return CertPair(ca_cert.public_bytes(pem), cert.public_bytes(pem), _key_pem(key))


def make_certs(
    dns_names: list[str],
    out_dir: str | Path,
    days: int = 365,
    now: dt.datetime | None = None,
    ca_name: str = "lahar-ca",
) -> CertFiles:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (the serving pair for ``dns_names``)."""
    return make_pair(dns_names, days=days, now=now, ca_name=ca_name).write(out_dir)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    # Write then rename, so a reader never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    if private:
        os.chmod(tmp, 0o600)
    tmp.replace(path)
