"""``python -m kubesched.bench.apiserver``: ``kubesched up``'s API server alone (no kubelet,
controllers or scheduler) for ``kubesched bench --mode http``. Writes the kubeconfig given as its
argument (admin credential and CA, as ``kubesched up`` does), prints ``READY <url>`` once it serves,
and exits when its standard input closes (so it never outlives the benchmark)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from kubesched.bench.targets import server_options
from kubesched.utils.eventloop import run_server


async def serve(seed: int | None, kubeconfig: str, insecure: bool) -> None:
    from kubesched.simulator.up import Cluster

    async with Cluster(server_options(seed, kubeconfig, insecure=insecure)) as cluster:
        print(f"READY {cluster.server.url}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--insecure", action="store_true", help="plain HTTP, no authentication (--insecure-allow-anonymous)")
    parser.add_argument("kubeconfig", help="where to write the kubeconfig of the server")
    args = parser.parse_args()
    run_server(serve(args.seed, args.kubeconfig, args.insecure))


if __name__ == "__main__":
    main()
