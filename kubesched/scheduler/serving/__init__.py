"""Running kubesched as a cluster's scheduler: the process around the ``Scheduler`` (clients, leader
election, signals, graceful shutdown: ``app``), its HTTP endpoints (``/healthz``, ``/livez``,
``/readyz``, ``/metrics``, ``/configz``, ``/debug/cache``: ``endpoints``), the serving certificate
(``certs``) and the cache dumper and comparer (``debug``)."""
