"""Scheduling decisions as small policy objects, each behind a Protocol of :mod:`pipesim.policies.base`.

* :mod:`~pipesim.policies.base` -- the Protocols (admission, weight update, batch policy) and the
  chapter's design space: :class:`CountThrottle`, :class:`PartialRollout`, :class:`Drain`,
  :class:`OldestFinishedFirst`;
* :mod:`~pipesim.policies.admission`, :mod:`~pipesim.policies.updates`,
  :mod:`~pipesim.policies.batching`, :mod:`~pipesim.policies.faults`,
  :mod:`~pipesim.policies.replicas`, :mod:`~pipesim.policies.synccost` -- the families;
* :mod:`~pipesim.policies.groups` -- :class:`WholeGroups`: batches of whole prompt groups (GRPO's
  ``rollout.n``), dynamic filtering of complete groups, stale groups expiring whole;
* :mod:`~pipesim.policies.systems` -- the rules of real systems, read from their sources;
* :mod:`~pipesim.policies.catalog` -- every policy class by name, for the CLI and scenario files.

Policies import only the port (:mod:`pipesim.core.port`), the episode records and each other.
"""
