"""The DefaultPreemption plugin (upstream ``framework/plugins/defaultpreemption``). It holds the
preemption evaluator (``preemption``, upstream ``framework/preemption``) and the batched dry run
that tries victims on many nodes at once (``_dry_run``)."""

from kubesched.scheduler.plugins.defaultpreemption.default_preemption import DefaultPreemption
from kubesched.scheduler.plugins.names import DefaultPreemption as Name

__all__ = ["DefaultPreemption", "Name"]
