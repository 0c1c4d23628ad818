"""The scheduler (upstream ``pkg/scheduler``): ``scheduler`` (the Scheduler and its loop),
``schedule_one`` (one scheduling cycle), ``eventhandlers``, ``backend`` (queue and cache),
``nodetable`` (the columnar node snapshot), ``framework`` (plugin interfaces and runtime),
``plugins`` (in-tree plugins and their registry), ``config`` (KubeSchedulerConfiguration),
``metrics``, ``features`` (feature gates) and ``serving`` (the process and endpoints of
``kubesched run``). It talks to the cluster only through ``kubesched.client``."""
