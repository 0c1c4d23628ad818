"""The simulated cluster around the scheduler: the fake kubelet (``kubelet``), the controllers
(``controllers``), the PersistentVolume and ResourceClaim controllers (``volumes``,
``resourceclaims``), an in-process run on virtual time (``simulate`` on ``virtualtime``'s event
loop), the embedded API server with everything attached (``up``) and the per-pod explanation
(``explain``)."""
