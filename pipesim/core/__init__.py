"""The kernel: the SimPy processes of a rollout pipeline and what plugs into them.

* :mod:`~pipesim.core.engine` -- :class:`Pipeline`: the controller and the records of a run, with
  the trainer and the weight sync in :mod:`~pipesim.core.training`; :mod:`~pipesim.core.slots`
  -- the chapter's generation slots, one replica each, finishing through
  :mod:`~pipesim.core.completions`; :mod:`~pipesim.core.buffer` -- the trainer's buffer, a SimPy
  resource.
* :mod:`~pipesim.core.episode` -- the episode and update records; :mod:`~pipesim.core.records`
  -- every episode of a run, as arrays once trained (:class:`EpisodeRecords`).
* :mod:`~pipesim.core.port` -- what policies see (:class:`PipelineView`) and the promise
  Protocols; :mod:`~pipesim.core.port_impl` -- the engine's side of it, its sync actions in
  :mod:`~pipesim.core.port_sync`.
* :mod:`~pipesim.core.seams` -- engine replicas, episode sources, batch observers, trainer
  models, and the declared switch of the one shortcut (:class:`EngineOptions`).
* :mod:`~pipesim.core.quiet` -- the one shortcut, quiet completions.
* :mod:`~pipesim.core.lifecycle` -- timeouts and failures; :mod:`~pipesim.core.errors`.

Nothing here imports a module above it (``tests/test_architecture.py``).
"""
