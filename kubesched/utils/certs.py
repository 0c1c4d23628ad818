"""The serving certificate of the secure port: the files given with ``--tls-cert-file`` and
``--tls-private-key-file``, else a self-signed one for ``localhost`` and 127.0.0.1, as
kube-scheduler's ``MaybeDefaultWithSelfSignedCerts`` makes (kept in ``--cert-dir`` as
``kube-scheduler.crt``/``.key`` when that is set, else in a private temporary directory)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
import time
from pathlib import Path

PAIR_NAME = "kube-scheduler"


def server_context(cert_file: str | None, key_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The TLS context the secure port serves with (TLS 1.2 or newer, as upstream's default)."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
    if not cert_file:
        cert_file, key_file = self_signed_pair(cert_dir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def self_signed_pair(cert_dir: str | None, host: str = "localhost") -> tuple[str, str]:
    """Paths of a self-signed certificate and key for ``host`` and 127.0.0.1, reused from ``cert_dir``
    when already there."""
    directory = Path(cert_dir) if cert_dir else Path(tempfile.mkdtemp(prefix="kubesched-certs-"))
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{PAIR_NAME}.crt", directory / f"{PAIR_NAME}.key"
    if cert_path.exists() and key_path.exists():
        return str(cert_path), str(key_path)
    cert_pem, key_pem = generate(host)
    key_path.write_bytes(key_pem)
    os.chmod(key_path, 0o600)
    cert_path.write_bytes(cert_pem)
    return str(cert_path), str(key_path)


def generate(host: str, ips: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """A one-year self-signed ECDSA P-256 certificate (PEM) and its key for ``host``, localhost,
    127.0.0.1 and ``ips``, named ``<host>@<unix time>`` like client-go's self-signed certificates."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(time.time())}")])
    now = dt.datetime.now(dt.UTC)
    alt_names = [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    if host != "localhost":
        alt_names.append(x509.DNSName("localhost"))
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips if ip != "127.0.0.1"]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=True, content_commitment=False,
                                     data_encipherment=False, key_agreement=False, crl_sign=False, encipher_only=False,
                                     decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
