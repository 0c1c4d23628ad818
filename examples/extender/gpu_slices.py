"""An example scheduler extender: places pods that ask for GPU slices (``example.com/gpu``) on
nodes that still have that many free, preferring the nodes with the most left.

Nodes say how many slices they have free with the label ``example.com/gpu-free-slices`` (a real
extender would track this itself, from a device plugin or its own inventory). The scheduler is
told to leave ``example.com/gpu`` to this extender (``ignoredByScheduler``), so NodeResourcesFit
does not reject nodes for not advertising it.

It speaks kube-scheduler's extender protocol (``k8s.io/kube-scheduler/extender/v1``): JSON POSTs
of ExtenderArgs to ``/filter`` and ``/prioritize``, answered with an ExtenderFilterResult and a
HostPriorityList. Standard library only:

    python examples/extender/gpu_slices.py --port 8888
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RESOURCE = "example.com/gpu"
FREE_LABEL = "example.com/gpu-free-slices"
MAX_EXTENDER_PRIORITY = 10


def slices_wanted(pod: dict[str, Any]) -> int:
    """The slices a pod asks for: the sum of its containers' requests (or limits) of the resource."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(RESOURCE) or (resources.get("limits") or {}).get(RESOURCE) or 0
        total += int(amount)
    return total


def free_slices(node: dict[str, Any]) -> int | None:
    """The node's free slices, or None when it has no GPU at all."""
    label = ((node.get("metadata") or {}).get("labels") or {}).get(FREE_LABEL)
    return int(label) if label is not None and label.isdigit() else None


def filter_nodes(args: dict[str, Any]) -> dict[str, Any]:
    """ExtenderArgs -> ExtenderFilterResult: keep the nodes with enough free slices. A node with
    too few may have more later (failed); one without GPUs never will (failed and unresolvable,
    so preemption does not try it)."""
    wanted = slices_wanted(args["Pod"])
    kept, failed, unresolvable = [], {}, {}
    for node in args["Nodes"]["items"]:
        name = node["metadata"]["name"]
        free = free_slices(node)
        if free is None:
            unresolvable[name] = "node(s) have no GPU"
        elif free < wanted:
            failed[name] = "node(s) had too few free GPU slices"
        else:
            kept.append(node)
    return {"Nodes": {"items": kept}, "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable}


def prioritize(args: dict[str, Any]) -> list[dict[str, Any]]:
    """ExtenderArgs -> HostPriorityList: the more slices a node has left, the better (0 to 10)."""
    nodes = args["Nodes"]["items"]
    most = max((free_slices(n) or 0 for n in nodes), default=0) or 1
    return [{"Host": n["metadata"]["name"], "Score": (free_slices(n) or 0) * MAX_EXTENDER_PRIORITY // most} for n in nodes]


VERBS = {"/filter": filter_nodes, "/prioritize": prioritize}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        verb = VERBS.get(self.path)
        if verb is None:
            self.send_error(404, f"no verb {self.path}")
            return
        args = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        body = json.dumps(verb(args)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def server(host: str = "127.0.0.1", port: int = 8888) -> ThreadingHTTPServer:
    """The extender's HTTP server, bound but not yet serving (``serve_forever`` does)."""
    return ThreadingHTTPServer((host, port), Handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888)
    args = parser.parse_args()
    with server(args.host, args.port) as httpd:
        print(f"GPU-slices extender listening on http://{args.host}:{httpd.server_address[1]}/")
        httpd.serve_forever()


if __name__ == "__main__":
    main()
