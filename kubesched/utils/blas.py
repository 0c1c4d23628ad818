"""numpy's BLAS thread pool, which kubesched has no use for.

numpy's wheels link OpenBLAS, which starts a pool of threads (one per core) when numpy is
imported and keeps them busy-waiting for a while after each call into BLAS. kubesched's node table
uses element-wise operations and integer products, which never call BLAS, so the pool only costs
CPU: at `kubesched run`'s start it took about 0.12 s of CPU on the machine's other core (0.61 s to
the first binding, 0.49 s without it), CPU that the API server beside it needs. The pool's size is
read from the environment when the library loads, so it is set before numpy is first imported.
"""

from __future__ import annotations

import os

#: The variables OpenBLAS (numpy's wheels) and MKL (some distributions' numpy) read for the size
#: of their pool. ``OMP_NUM_THREADS`` is left alone: it would also bind every OpenMP library a
#: user's plugin may load.
POOL_SIZE_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask the BLAS library for one thread, unless the user chose a size (then theirs stands).
    Takes effect only if numpy is not imported yet; child processes inherit it."""
    for name in POOL_SIZE_VARIABLES:
        os.environ.setdefault(name, "1")
