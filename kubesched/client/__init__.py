"""The scheduler's view of the API (upstream client-go): the ``ClusterClient`` interface
(``interface``), the HTTP client for a real or embedded API server (``kube``), shared informers
(``informers``), the event recorder (``recorder``) and leader election (``leaderelection``).
Imports only ``kubesched.api`` and ``kubesched.utils``."""
