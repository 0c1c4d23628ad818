"""``kubesched up``: a simulated cluster you drive with kubectl. The API server and the components
``simulate`` runs (fake kubelets posting node status and Leases, the node lifecycle,
PersistentVolume, ResourceClaim and workload controllers) run in this process; the scheduler runs
in a child process of its own and talks to the API server over HTTPS, as it would to a real cluster. Manifests given with
``-f`` are created at start, pods last, so that with the same ``--seed`` they are placed as
``simulate`` places them. Annotate a node ``kubesched.io/simulate-failure=true`` to stop its kubelet."""

from __future__ import annotations

import argparse
import sys

from kubesched.cli.apiserver import add_server_args, security_from, server_errors
from kubesched.cli.common import add_config_args, configuration_from, load_manifests, progress_reporter, registry_from
from kubesched.cli.exitcodes import USAGE
from kubesched.simulator.up import Cluster, UpOptions, banner
from kubesched.simulator.up import run as run_up


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="run a simulated cluster (API server, kubelet, controllers, scheduler) for kubectl",
                       description=__doc__)
    add_server_args(p)
    p.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="FILE_OR_DIR",
                   help="manifests to create at start (YAML or JSON; directories are read recursively)")
    add_config_args(p)
    p.add_argument("--seed", type=int, default=None, help="random seed of the scheduler and the store")
    p.add_argument("--termination-delay", type=float, default=0.2, metavar="SECONDS",
                   help="how long a deleted running pod takes to stop (default 0.2s)")
    p.add_argument("--no-scheduler", action="store_true", help="do not run the scheduler (e.g. to run another one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        security = security_from(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return USAGE
    registry = registry_from(args.plugins)
    cfg, gates = configuration_from(args, registry)
    objects = []
    if args.files:
        with progress_reporter(args) as progress:
            objects = load_manifests(args, progress)
    options = UpOptions(host=args.address, port=args.port, data=args.data, kubeconfig_out=args.kubeconfig_out,
                        config=cfg, registry=registry, feature_gates=gates, plugins=list(args.plugins), objects=objects, seed=args.seed,
                        termination_delay=args.termination_delay, scheduler=not args.no_scheduler, security=security)

    def ready(cluster: Cluster) -> None:
        print(banner(cluster))
        sys.stdout.flush()

    with server_errors(args):
        run_up(options, ready)
    return 0
