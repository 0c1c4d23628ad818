"""An embedded Kubernetes-compatible API server: kubectl and any Kubernetes client can drive the
simulated cluster (``kubesched apiserver``, ``kubesched up``). See ``server.APIServer``; its
security (HTTPS, authentication, RBAC) is configured with ``SecurityOptions``."""

from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.server import APIServer

__all__ = ["APIServer", "SecurityOptions"]
