"""``kubesched snapshot``: write a live cluster's scheduling-relevant state (nodes, pods with their
nodes, namespaces, PriorityClasses, PDBs, volumes and claims, storage classes, CSI objects, DRA
objects, workload controllers; never Secrets) as manifests in a directory, one file per kind, that
``simulate``, ``capacity`` and ``compare`` read back unchanged (``-f DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from kubesched.api.errors import KubeschedError
from kubesched.cli.exitcodes import OK
from kubesched.client.kube import KubeClient
from kubesched.simulator.snapshot import Snapshot, take


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="write a live cluster's scheduling state as manifests to simulate on",
                       description=__doc__)
    p.add_argument("--kubeconfig", default=None,
                   help="the cluster's kubeconfig (default: KUBECONFIG, then ~/.kube/config, then in-cluster)")
    p.add_argument("--context", default=None, help="the kubeconfig context to use (default: its current context)")
    p.add_argument("-o", "--output-dir", dest="directory", required=True, metavar="DIR",
                   help="the directory to write the manifests to (created if missing)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if directory.exists() and not directory.is_dir():
        raise KubeschedError(f"-o {directory}: not a directory")
    snapshot = asyncio.run(_take(args.kubeconfig, args.context))
    files = snapshot.write(directory)
    kinds = ", ".join(f"{len(items)} {kind}" for kind, items in snapshot.objects.items() if items)
    print(f"Wrote {snapshot.count()} objects ({kinds}) to {len(files)} file(s) in {directory}.")
    if snapshot.unserved:
        print(f"Not served by this cluster: {', '.join(snapshot.unserved)}.")
    return OK


async def _take(kubeconfig: str | None, context: str | None) -> Snapshot:
    try:
        client = KubeClient(kubeconfig=kubeconfig, context=context)
    except Exception as e:  # lightkube's errors for a missing or malformed kubeconfig are of several types
        raise KubeschedError(f"--kubeconfig {kubeconfig or '(default)'}: {e}") from e
    try:
        return await take(client)
    except OSError as e:
        raise KubeschedError(f"cannot reach the cluster at {client.server}: {e}") from e
    finally:
        await client.close()
