"""The pod subresources kube-apiserver hands to the node's kubelet: ``log``, ``exec``, ``attach``,
``portforward`` and ``proxy`` (``kubectl logs``, ``exec``, ``attach``, ``port-forward``).

kube-apiserver first looks the pod up (a missing pod is a 404), then connects to the kubelet of the
pod's node. The embedded cluster's kubelets run no containers, so there is nothing to connect to:
the answer is a 400 BadRequest whose message names the pod and says why, rather than a 404 that
would read as "pod not found".
"""

from __future__ import annotations

from kubesched.api.apierrors import BadRequest
from kubesched.api.kinds import Kind
from kubesched.apiserver.store import ObjectStore

#: subresource -> (what the client asked to do, what is not there), as the message words them.
ACTIONS = {
    "log": ("read the logs of", "there are no logs to read"),
    "exec": ("exec into", "there is no process to run a command in"),
    "attach": ("attach to", "there is no process to attach to"),
    "portforward": ("forward ports to", "there are no ports to forward"),
    "proxy": ("proxy to", "there is nothing listening to proxy to"),
}


def refuse(store: ObjectStore, kind: Kind, namespace: str | None, name: str | None, subresource: str) -> BadRequest:
    """The error for a kubelet-proxied request on an existing pod (raises NotFound for a missing one)."""
    pod = store.get(kind, namespace, name or "")
    node = (pod.get("spec") or {}).get("nodeName")
    where = f' on node "{node}"' if node else " (not scheduled to a node)"
    action, missing = ACTIONS[subresource]
    return BadRequest(f'cannot {action} pod "{name}" in namespace "{namespace}"{where}: the kubesched simulated '
                      f"cluster's kubelets run no containers, so {missing}", kind=kind.resource, name=name or "")
