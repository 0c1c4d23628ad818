"""``python -m kubesched.bench.startup``: how long ``kubesched run`` takes from process start to its
first binding, against ``kubesched apiserver``'s API server (a separate process, as in ``--mode
http``) holding scheduler_perf's default nodes and a few pending pods.

Each start: new pending pods are created, a watch on them is opened, ``python -m kubesched run
--config CFG --kubeconfig KC`` is spawned (default configuration: leader election on, the secure
port serving on a free port), and the clock stops when the watch sees a pod with
``spec.nodeName``; the CPU time the process used up to then is read from /proc. The process is then
stopped with SIGTERM (it releases its Lease, so the next start finds the Lease free, as a rolling
restart does). Each subject tree is byte-compiled first (``compileall``, as ``pip install`` does):
with ``PYTHONDONTWRITEBYTECODE`` set, as on the development machines, every start would otherwise
compile kubesched's sources again (about 0.3 s of CPU), which no installed scheduler does. ``--tree`` (repeatable) alternates the subject between source trees for an A/B run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubesched.api.kinds import NAMESPACE, POD
from kubesched.bench import creator, subject, templates
from kubesched.bench.targets import HttpTarget
from kubesched.client.kube import KubeClient

#: The namespace of the pending pods each start binds.
NAMESPACE_NAME = "startup"
#: Seconds a start may take before it counts as failed.
TIMEOUT = 120.0


@dataclass(frozen=True)
class Startup:
    """One timed start: wall seconds from spawn to the first pod bound, and the CPU seconds the
    ``kubesched run`` process used up to then (user + system, from /proc)."""

    wall: float
    cpu: float


def config_text(kubeconfig: str) -> str:
    """kube-scheduler's default configuration, with the API server's kubeconfig."""
    return ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection:\n  kubeconfig: {kubeconfig}\n")


def free_port() -> int:
    """A TCP port free right now on the loopback interface (for the secure port of one start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def add_pending_pods(client: KubeClient, count: int) -> str:
    """Create ``count`` pending default pods; the resource version to watch them from."""
    pods = [{**templates.pod_default(), "metadata": {"generateName": "pod-", "namespace": NAMESPACE_NAME}}
            for _ in range(count)]
    await creator.create_concurrently(client, pods)
    _, rv = await client.list(POD)
    return rv


async def first_bound(client: KubeClient, resource_version: str) -> None:
    """Return once a pod of the start-up namespace has ``spec.nodeName``."""
    async for batch in client.watch(POD, resource_version, namespace=NAMESPACE_NAME):
        if any(event.object.get("spec", {}).get("nodeName") for event in batch):
            return
    raise RuntimeError("the watch of the pending pods ended before a pod was bound")


async def first_binding(client: KubeClient, kubeconfig: str, config_path: str, *, pods: int = 1,
                        args: Sequence[str] = (), tree: str | None = None) -> Startup:
    """One timed start of ``kubesched run`` (see the module docstring) from ``tree`` (default: the
    bench's subject tree); ``client`` talks to the same API server as ``kubeconfig``. One pending pod
    by default, so that the CPU time read after the first binding is not that of further cycles."""
    tree = tree or str(subject.subject_tree())
    rv = await add_pending_pods(client, pods)
    watch = asyncio.get_running_loop().create_task(first_bound(client, rv))
    command = subject.command("run", "--config", config_path, "--kubeconfig", kubeconfig,
                              "--secure-port", str(free_port()), *args)
    started = time.perf_counter()
    # In the tree's directory: ``python -m`` puts the working directory first on sys.path.
    proc = subprocess.Popen(command, env=tree_env(tree), cwd=tree, stdin=subprocess.DEVNULL)
    try:
        await asyncio.wait_for(watch, TIMEOUT)
        wall = time.perf_counter() - started
        return Startup(wall, cpu_seconds(proc.pid))
    finally:
        watch.cancel()
        proc.send_signal(signal.SIGTERM)
        await asyncio.get_running_loop().run_in_executor(None, proc.wait)


async def time_to_first_binding(kubeconfig: str, config_path: str, *, pods: int = 1, args: Sequence[str] = (),
                                tree: str | None = None) -> float:
    """Wall seconds from spawning ``kubesched run`` to its first binding (``first_binding``)."""
    client = KubeClient(kubeconfig=kubeconfig, user_agent="kubesched-bench-startup")
    try:
        return (await first_binding(client, kubeconfig, config_path, pods=pods, args=args, tree=tree)).wall
    finally:
        await client.close()


async def prepared_server(nodes: int) -> HttpTarget:
    """A started API server process with ``nodes`` scheduler_perf default nodes and the start-up namespace."""
    target = HttpTarget(seed=None)
    await target.start()
    await target.create({"apiVersion": "v1", "kind": NAMESPACE.kind, "metadata": {"name": NAMESPACE_NAME}})
    await target.create_many([templates.node_default() for _ in range(nodes)])
    return target


def compile_tree(tree: str) -> None:
    """Byte-compile ``tree``'s ``kubesched`` package in place (``__pycache__``, ignored by git)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "kubesched")], check=True,
                   stdout=subprocess.DEVNULL)


def tree_env(tree: str) -> dict[str, str]:
    """The environment of a subject process that runs the ``kubesched`` of ``tree``."""
    inherited = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, inherited]))}


async def measure(nodes: int, pods: int, runs: int, trees: Sequence[str], args: Sequence[str]) -> dict[str, list[Startup]]:
    """``runs`` starts per tree, interleaved (A, B, B, A, ...), against one server."""
    for tree in trees:
        compile_tree(tree)
    target = await prepared_server(nodes)
    assert target.client is not None
    config = Path(target.kubeconfig).with_name("config.yaml")
    config.write_text(config_text(target.kubeconfig))
    results: dict[str, list[Startup]] = {tree: [] for tree in trees}
    try:
        for run in range(runs):
            for tree in (trees if run % 2 == 0 else list(reversed(trees))):
                one = await first_binding(target.client, target.kubeconfig, str(config), pods=pods, args=args, tree=tree)
                results[tree].append(one)
                print(f"{tree}: {one.wall:.3f} s wall, {one.cpu:.3f} s CPU", flush=True)
    finally:
        await target.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1, help="pending pods created before each start")
    parser.add_argument("--runs", type=int, default=5, help="starts per tree")
    parser.add_argument("--tree", action="append", default=[], help="source tree of the subject (repeat to alternate)")
    parser.add_argument("run_args", nargs="*", help="more flags for kubesched run (after --)")
    opts = parser.parse_args()
    trees = opts.tree or [str(subject.subject_tree())]
    results = asyncio.run(measure(opts.nodes, opts.pods, opts.runs, trees, opts.run_args))
    for tree, starts in results.items():
        print(f"{tree}: median {statistics.median(s.wall for s in starts):.3f} s wall, "
              f"{statistics.median(s.cpu for s in starts):.3f} s CPU ({len(starts)} starts)")


if __name__ == "__main__":
    main()
