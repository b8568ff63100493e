"""The kernel: the SimPy processes of a rollout pipeline and what plugs into them.

* :mod:`~pipesim.core.engine` -- :class:`Pipeline`: the controller, the trainer and the weight
  sync, and the records of a run; :mod:`~pipesim.core.slots` -- the chapter's generation slots,
  one replica each; :mod:`~pipesim.core.buffer` -- the trainer's buffer, a SimPy resource.
* :mod:`~pipesim.core.episode` -- the episode and update records; :mod:`~pipesim.core.records`
  -- every episode of a run, as arrays once trained (:class:`EpisodeRecords`).
* :mod:`~pipesim.core.port` -- what policies see (:class:`PipelineView`) and the promise
  Protocols; :mod:`~pipesim.core.port_impl` -- the engine's side of it.
* :mod:`~pipesim.core.seams` -- engine replicas, episode sources, batch observers, trainer
  models, and the declared switch of the one shortcut (:class:`EngineOptions`).
* :mod:`~pipesim.core.quiet` -- the one shortcut, quiet completions.
* :mod:`~pipesim.core.lifecycle` -- timeouts and failures; :mod:`~pipesim.core.errors`.

Nothing here imports a module above it (``tests/test_architecture.py``).
"""
