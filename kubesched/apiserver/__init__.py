"""An embedded Kubernetes-compatible API server: kubectl and any Kubernetes client can drive the
simulated cluster (``kubesched apiserver``, ``kubesched up``). See ``server.APIServer``."""

from kubesched.apiserver.server import APIServer

__all__ = ["APIServer"]
