"""How the API server is secured: TLS serving, the credentials it accepts, and those it mints.

By default (as ``kubesched up`` and ``kubesched apiserver`` run it) the server serves HTTPS with
``--tls-cert-file``/``--tls-private-key-file`` or a self-signed pair made at start, authenticates
client certificates signed by ``--client-ca-file`` and bearer tokens from ``--token-auth-file``,
and mints two tokens of its own: an admin (group ``system:masters``) written into the kubeconfig
it prints, and ``system:kube-scheduler`` for the scheduler it embeds. ``allow_anonymous``
(``--insecure-allow-anonymous``) turns all of it off: plain HTTP, every request allowed.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import ssl
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kubesched.apiserver.authn import KUBE_SCHEDULER, MASTERS, Authenticator, TokenTable
from kubesched.utils import certs

#: The user name of the admin credential ``up``/``apiserver`` write into their kubeconfig.
ADMIN_USER = "kubesched-admin"
INSECURE_WARNING = ("WARNING: --insecure-allow-anonymous: serving plain HTTP without authentication or authorization; "
                    "anyone who can reach the port can read and change everything, Secrets included")


@dataclass(frozen=True)
class SecurityOptions:
    """The API server's security flags (kube-apiserver's names)."""

    allow_anonymous: bool = False
    token_auth_file: str = ""
    client_ca_file: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""

    def check(self) -> None:
        """Refuse contradictory or unreadable flags with a message naming the flag."""
        if bool(self.tls_cert_file) != bool(self.tls_private_key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
        for flag, value in (("--token-auth-file", self.token_auth_file), ("--client-ca-file", self.client_ca_file),
                            ("--tls-cert-file", self.tls_cert_file), ("--tls-private-key-file", self.tls_private_key_file)):
            if value and not Path(value).expanduser().is_file():
                raise ValueError(f"{flag}: {value} is not a readable file")
        if self.allow_anonymous and (self.token_auth_file or self.client_ca_file or self.tls_cert_file):
            raise ValueError("--insecure-allow-anonymous turns authentication and TLS off; "
                             "it cannot be combined with --token-auth-file, --client-ca-file or --tls-cert-file")
        if self.token_auth_file:
            TokenTable().load_file(self.token_auth_file)  # a bad record stops the start, naming it


class ServerSecurity:
    """The live security state of one server: its token table, TLS context and CA data.

    With a ``state_dir`` (next to ``--data``'s SQLite file) the minted tokens and the self-signed
    pair are kept there and reused, so a restarted server accepts the kubeconfigs and clients of
    the previous run, as a kube-apiserver restarted with the same PKI and token files does."""

    def __init__(self, options: SecurityOptions, host: str, state_dir: Path | None = None) -> None:
        options.check()
        self.options = options
        self.enabled = not options.allow_anonymous
        self.tokens = TokenTable()
        self.authenticator = Authenticator(self.tokens)
        self.admin_token = ""
        self.scheduler_token = ""
        self.ca_data = b""
        self._host = host
        self._state_dir = state_dir
        if not self.enabled:
            return
        if options.token_auth_file:
            self.tokens.load_file(options.token_auth_file)
        self.admin_token, self.scheduler_token = self._own_tokens()

    def _own_tokens(self) -> tuple[str, str]:
        """The admin and scheduler tokens: reused from the state directory, else minted (and saved there)."""
        saved = self._state_dir / "tokens.csv" if self._state_dir is not None else None
        if saved is not None and saved.is_file():
            own = TokenTable()
            own.load_file(saved)
            admin, scheduler = own.token_of(ADMIN_USER), own.token_of(KUBE_SCHEDULER)
            if admin and scheduler:
                self.tokens.load_file(saved)
                return admin, scheduler
        admin = self.tokens.mint(ADMIN_USER, (MASTERS,))
        scheduler = self.tokens.mint(KUBE_SCHEDULER)
        if saved is not None:
            _write_private(saved, f'{admin},{ADMIN_USER},{ADMIN_USER},"{MASTERS}"\n'
                                  f"{scheduler},{KUBE_SCHEDULER},{KUBE_SCHEDULER}\n".encode())
        return admin, scheduler

    def _self_signed_pair(self) -> tuple[bytes, bytes]:
        """The generated serving pair: reused from the state directory, else made (and saved there)."""
        if self._state_dir is not None:
            cert_path, key_path = self._state_dir / "apiserver.crt", self._state_dir / "apiserver.key"
            if cert_path.is_file() and key_path.is_file():
                return cert_path.read_bytes(), key_path.read_bytes()
        cert_pem, key_pem = certs.generate("localhost", ips=_ips(self._host))
        if self._state_dir is not None:
            _write_private(self._state_dir / "apiserver.key", key_pem)
            (self._state_dir / "apiserver.crt").write_bytes(cert_pem)
        return cert_pem, key_pem

    def ssl_context(self) -> ssl.SSLContext | None:
        """The serving context (None when TLS is off): TLS 1.2 or newer, client certificates
        requested and verified against ``--client-ca-file`` when given."""
        if not self.enabled:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.options.tls_cert_file:
            cert_pem = Path(self.options.tls_cert_file).expanduser().read_bytes()
            context.load_cert_chain(self.options.tls_cert_file, self.options.tls_private_key_file)
            self.ca_data = cert_pem if _self_signed(cert_pem) else b""
        else:
            cert_pem, key_pem = self._self_signed_pair()
            _load_pair(context, cert_pem, key_pem)
            self.ca_data = cert_pem
        if self.options.client_ca_file:
            context.load_verify_locations(cafile=str(Path(self.options.client_ca_file).expanduser()))
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def client_ssl_context(self) -> ssl.SSLContext | bool:
        """What a client of this server verifies it with: its CA (False over plain HTTP)."""
        if not self.enabled:
            return False
        if not self.ca_data:
            return ssl.create_default_context()
        return ssl.create_default_context(cadata=self.ca_data.decode())

    def kubeconfig_cluster(self, server: str) -> dict:
        """The ``cluster`` entry of a kubeconfig for this server (with its CA when known)."""
        cluster: dict = {"server": server}
        if self.ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_data).decode()
        return cluster


def warn_insecure() -> None:
    """The warning ``--insecure-allow-anonymous`` prints on stderr."""
    print(INSECURE_WARNING, file=sys.stderr, flush=True)


def _ips(host: str) -> tuple[str, ...]:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ()
    return () if address.is_unspecified else (str(address),)


def _self_signed(cert_pem: bytes) -> bool:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.issuer == cert.subject


def _write_private(path: Path, data: bytes) -> None:
    """Write a secret readable by its owner only (the directory is made private too)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    path.write_bytes(data)


def _load_pair(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``load_cert_chain`` from memory: ``ssl`` reads only files, so through a private temporary
    directory that is gone when this returns."""
    with tempfile.TemporaryDirectory(prefix="kubesched-tls-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(cert_pem)
        key_path.touch(mode=0o600)
        os.chmod(key_path, 0o600)
        key_path.write_bytes(key_pem)
        context.load_cert_chain(str(cert_path), str(key_path))
