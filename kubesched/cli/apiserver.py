"""``kubesched apiserver``: serve the Kubernetes API for an (initially empty) simulated cluster,
without a scheduler or kubelet: for kubectl, client libraries, or a scheduler running elsewhere
(``kubesched run``, or kube-scheduler itself)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from kubesched.apiserver import APIServer
from kubesched.apiserver.server import DEFAULT_KUBECONFIG
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import RealClock


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apiserver", help="serve a Kubernetes-compatible API (kubectl works against it)", description=__doc__)
    add_server_args(p)
    p.set_defaults(func=run)


def add_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=6443, help="port to listen on (0 picks a free one; default 6443)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--data", metavar="FILE.sqlite", help="keep every object in this SQLite file (survives restarts)")
    p.add_argument("--kubeconfig-out", metavar="FILE", default=DEFAULT_KUBECONFIG,
                   help=f"write a kubeconfig for this server here (default {DEFAULT_KUBECONFIG})")


def run(args: argparse.Namespace) -> int:
    asyncio.run(_serve(args))
    return 0


async def _serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    server = APIServer(ObjectStore(RealClock()), host=args.address, port=args.port, data=args.data)
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
