"""The samples a spec's run deals to the trainer's ranks, step by step, at the least cost that
gives the same tokens: the trainer's fit (:mod:`pipesim.calibrate.trainer`) reads them once per
fit and the dealing note (:func:`pipesim.calibrate.trainer.dealing_spread`) at four more seeds.

:func:`pipesim.calibrate.trainer_inputs.dealt` returns the run's ``ComputeRun.dealt_log`` (each
step's samples' tokens, in the order the framework got them), and ran the spec through the log's
last step for it. Most of a run is the engines' decode; the dealing
reads none of it where the design makes a step's batch the samples drawn for it
(:func:`draws_alone`): a synchronous (``eta = 0``) colocated design, draining before each sync,
with the count throttle, one sync a step and pipesim's own batch policy. Its step ``s`` starts
exactly the ``B`` samples ``s B .. s B + B - 1`` (the throttle admits ``(version + 1) B`` starts,
nothing is in flight at a sync, nothing is relaunched), at the version ``s``, each its own task;
it trains all ``B`` of them, and the framework gets them in prompt order, sorted by id
(``batch_order = "submission"``). So :func:`drawn` draws those samples from the spec's
:class:`~pipesim.compute.source.TokenSource` at the run's seed, in the run's order (the source
draws in episode order: the same seed and the same ``(task, version)`` give the same lengths)
and lists them per step. No engine runs: on the sample spec a 1,000-step dealing took 2.9 s of CPU
as a run and takes 0.2 s drawn. Every other design runs, as before: an asynchronous, split or
over-sampled one trains samples, or gets them in an order, that follow the engines' timing; one
that pauses, aborts or syncs every few steps can draw a step's samples at another version (a
drift moves their lengths), so the rule leaves it to the run rather than reason about each.

``tests/test_calibrate_dealing_cost.py`` checks the drawn dealing equals the run's on designs the
rule takes (another seed, a length drift, no difficulty spread, multi-turn, engines that preempt)
and that the rule refuses the others.
"""

from __future__ import annotations

import numpy as np

from pipesim.calibrate.frame import check_steps
from pipesim.plan.runspec import RunSpec

__all__ = ["drawn", "draws_alone"]


def draws_alone(rs: RunSpec) -> bool:
    """Whether a run of ``rs`` trains at step ``s`` exactly the samples drawn for it, in id order
    (module docstring): the scenario's admission the count throttle, its update a plain drain,
    ``eta = 0``, pipesim's own batch policy, no timeout or failures, and the trainer getting its
    batch in prompt order. Each is checked on the scenario and trainer a run builds, by type
    (a subclass may act otherwise)."""
    import pipesim
    from pipesim.plan.build import scenario, trainer_config

    d = rs.design
    if d.eta != 0 or trainer_config(rs.plan, d).batch_order != "submission":
        return False
    sc = scenario(rs.plan, d, 1, rs.seed)
    return (
        type(sc.admission) is pipesim.CountThrottle
        and type(sc.weight_update) is pipesim.Drain
        and type(sc.batching) is pipesim.OldestFinishedFirst
        and sc.pipeline.max_staleness == 0
        and sc.timeout is None
        and sc.failures is None
    )


def drawn(rs: RunSpec, steps: int) -> list[tuple[int, ...]]:
    """The first ``steps`` steps' samples of a run of ``rs`` as its trainer gets them, drawn
    without the run, for a design :func:`draws_alone` takes (module docstring): step ``s`` is
    episodes ``s B .. s B + B - 1``, each its own task at version ``s``, drawn in that order from
    the spec's workload at the run's seed."""
    from pipesim.compute.source import TokenSource
    from pipesim.core.episode import Episode
    from pipesim.plan.build import engine_config

    n = int(check_steps(steps, None)[0])
    eng = engine_config(rs.plan, rs.design.tp)  # the run's context check, as run_compute makes it
    source = TokenSource(rs.plan.workload, np.random.default_rng(rs.seed), context_tokens=eng.context_len)
    b = rs.plan.batch_size
    out: list[tuple[int, ...]] = []
    for s in range(n):
        batch = []
        for i in range(s * b, (s + 1) * b):
            source.work_s(i, i, s, -1)
            batch.append(Episode(i, i, 0.0, s))
        out.append(tuple(source.sample_tokens(batch)))
    return out
