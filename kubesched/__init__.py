"""kubesched: a Kubernetes scheduler with kube-scheduler 1.35's behaviour, vectorised over nodes,
and an embedded cluster (in-memory or behind a Kubernetes-compatible API server) to run it on.

The public surface: the ``kubesched`` command, ``kubesched.testing.PluginHarness`` for plugin
authors, the plugin interfaces in ``kubesched.scheduler.framework.interface``, and
``kubesched.simulator.simulate``. The packages are the layers of the README's architecture section.
"""

__version__ = "0.1.0"
