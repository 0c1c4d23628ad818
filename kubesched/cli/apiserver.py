"""``kubesched apiserver``: serve the Kubernetes API for an (initially empty) simulated cluster,
without a scheduler or kubelet: for kubectl, client libraries, or a scheduler running elsewhere
(``kubesched run``, or kube-scheduler itself)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import sys
from collections.abc import Iterator

from kubesched.api.errors import FileUnreadable, ListenError
from kubesched.apiserver import APIServer
from kubesched.apiserver.security import SecurityOptions, warn_insecure
from kubesched.apiserver.server import DEFAULT_KUBECONFIG
from kubesched.apiserver.store import ObjectStore
from kubesched.cli.exitcodes import USAGE
from kubesched.scheduler.features import FeatureGateError, FeatureGates, parse_flag
from kubesched.utils.clock import RealClock
from kubesched.utils.eventloop import run_server
from kubesched.utils.signals import on_signals


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apiserver", help="serve a Kubernetes-compatible API (kubectl works against it)", description=__doc__)
    add_server_args(p)
    p.add_argument("--feature-gates", default="", metavar="A=true,B=false",
                   help="feature gates, as kube-apiserver's flag: alpha APIs (GenericWorkload: scheduling.k8s.io/v1alpha1 "
                        "Workloads and pods' spec.workloadRef) are served only when their gate is on")
    p.set_defaults(func=run)


def add_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=6443, help="port to listen on (0 picks a free one; default 6443)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--data", metavar="FILE.sqlite", help="keep every object in this SQLite file (survives restarts)")
    p.add_argument("--kubeconfig-out", metavar="FILE", default=DEFAULT_KUBECONFIG,
                   help=f"write a kubeconfig for this server here, with an admin credential (default {DEFAULT_KUBECONFIG})")
    sec = p.add_argument_group("security (see docs/security.md)")
    sec.add_argument("--token-auth-file", default="", metavar="FILE",
                     help="bearer tokens, one per line: token,user,uid,\"group1,group2\" (kube-apiserver's format)")
    sec.add_argument("--client-ca-file", default="", metavar="FILE",
                     help="accept client certificates signed by this CA (user = CN, groups = O)")
    sec.add_argument("--tls-cert-file", default="", metavar="FILE",
                     help="serving certificate (PEM); default: a self-signed one made at start, its CA in the kubeconfig")
    sec.add_argument("--tls-private-key-file", default="", metavar="FILE", help="key of --tls-cert-file (PEM)")
    sec.add_argument("--insecure-allow-anonymous", action="store_true",
                     help="serve plain HTTP with no authentication or authorization (anyone may do anything)")


def security_from(args: argparse.Namespace) -> SecurityOptions:
    """The ``SecurityOptions`` of the flags; prints the warning of ``--insecure-allow-anonymous``."""
    options = SecurityOptions(allow_anonymous=args.insecure_allow_anonymous, token_auth_file=args.token_auth_file,
                              client_ca_file=args.client_ca_file, tls_cert_file=args.tls_cert_file,
                              tls_private_key_file=args.tls_private_key_file)
    options.check()
    if options.allow_anonymous:
        warn_insecure()
    return options


def run(args: argparse.Namespace) -> int:
    try:
        security = security_from(args)
        gates = FeatureGates(parse_flag(args.feature_gates))
    except FeatureGateError as e:
        print(f"error: invalid --feature-gates: {e}", file=sys.stderr)
        return USAGE
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return USAGE
    with server_errors(args):
        run_server(_serve(args, security, gates))
    return 0


#: Errors of ``bind(2)``: the port is taken, the address is not this machine's, the port is privileged.
BIND_ERRNOS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


@contextlib.contextmanager
def server_errors(args: argparse.Namespace) -> Iterator[None]:
    """A server that cannot start becomes one clear error: which address and port could not be
    bound (with a hint), or which file (``--kubeconfig-out``, ``--data``) could not be written."""
    try:
        yield
    except OSError as e:
        if e.filename:
            flag = "--data" if args.data and str(e.filename) == str(args.data) else "--kubeconfig-out"
            raise FileUnreadable(flag, str(e.filename), e) from e
        if e.errno in BIND_ERRNOS or "bind" in str(e):
            raise ListenError(args.address, args.port, e) from e
        raise


async def _serve(args: argparse.Namespace, security: SecurityOptions, gates: FeatureGates) -> None:
    stop = asyncio.Event()
    on_signals(stop.set)
    server = APIServer(ObjectStore(RealClock(), feature_gates=gates), host=args.address, port=args.port, data=args.data, security=security)
    await server.start()
    try:
        print(f"kubesched API server listening on {server.url}")
        if args.data:
            print(f"data: {args.data} ({server.restored} objects restored)")
        if args.kubeconfig_out:
            path = server.write_kubeconfig(args.kubeconfig_out)
            print(f"kubeconfig written to {path}\n  export KUBECONFIG={path}")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await server.stop()
