"""An embedded Kubernetes-compatible API server: kubectl and any Kubernetes client can drive the
simulated cluster (``kubesched apiserver``, ``kubesched up``). See ``server.APIServer``; its
security (HTTPS, authentication, RBAC) is configured with ``SecurityOptions``.

The two names are imported on first use: the package's modules that run in-process without a
server (the store ``kubesched simulate`` runs on) must not pay for importing the HTTP stack."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.apiserver.security import SecurityOptions
    from kubesched.apiserver.server import APIServer

_HOMES = {"APIServer": "kubesched.apiserver.server", "SecurityOptions": "kubesched.apiserver.security"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


__all__ = ["APIServer", "SecurityOptions"]
