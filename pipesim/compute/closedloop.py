"""One replica under a closed loop: ``concurrency`` sequences, each completion replaced at once.

The tokens/s a replica sustains against concurrency (``scenarios/compute.py``), and the raw speed
of the engine model without the kernel around it (``benchmarks/bench_compute.py``). The replica is a
:class:`~pipesim.compute.refill.LoopReplica` (compiled with the engine), which keeps no episodes
and starts each replacement itself; its pipeline is a :class:`~pipesim.compute.refill.Refill`: a
SimPy environment and the update log (empty: no weight syncs). This class checks the arguments
and reports.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.refill import LoopReplica, Refill
from pipesim.compute.source import TokenSource
from pipesim.compute.workload import TokenWorkload
from pipesim.core.clock import Clock
from pipesim.core.collector import during_run
from pipesim.core.errors import MAX_POOL_TASKS, MAX_SLOTS, check_int, shown
from pipesim.core.validate import FieldError


class ClosedLoop:
    """``concurrency`` sequences of ``workload`` kept on one replica of ``config``."""

    def __init__(
        self,
        config: EngineConfig,
        workload: TokenWorkload,
        concurrency: int,
        seed: int = 0,
        series: bool = False,
    ) -> None:
        """``series``: keep the replica's binned time series (``self.replica.timeline_frame()``)."""
        if not isinstance(config, EngineConfig):
            raise FieldError(f"config must be an EngineConfig, got {shown(config)}", "config")
        check_int("concurrency", concurrency, 1, MAX_SLOTS, "each sequence is a Python object")
        check_int("seed", seed, 0)
        self.env = Clock()
        self.source = TokenSource(workload, np.random.default_rng(seed), config.context_len)
        self.loop = loop = Refill(self.env, self.source)  # the replica's pipeline
        self.replica = loop.replica = LoopReplica(
            cast(Any, loop), concurrency, 0, ReplicaCost(config), self.source, series=series
        )
        self.concurrency = concurrency

    @property
    def started(self) -> int:
        """Samples started so far."""
        return self.loop.started

    @property
    def finished(self) -> int:
        """Samples finished so far."""
        return self.loop.finished

    @property
    def updates(self) -> list[Any]:
        """The update log the replica reads (empty: a closed loop syncs no weights)."""
        return self.loop.updates

    def run(self, samples: int) -> dict[str, float]:
        """Run until ``samples`` sequences finished; the replica's figures over the run."""
        check_int("samples", samples, 1, MAX_POOL_TASKS, "each sample keeps a row of the token side table")
        loop = self.loop
        loop.limit = samples
        for _ in range(min(self.concurrency, samples)):
            loop.start()
        with during_run():  # as ``Pipeline.run``: many long-lived small objects, no cycles
            self.env.run()
        T = self.env.now
        s = self.replica.stats(T)
        return {
            "concurrency": float(self.concurrency),
            "samples": float(loop.finished),
            "sim_time_s": T,
            "tokens_per_s": s["tokens_generated"] / T if T > 0 else 0.0,
            "tokens_per_s_per_seq": s["tokens_generated"] / T / s["mean_running"]
            if T > 0 and s["mean_running"]
            else 0.0,
            "mean_running": s["mean_running"],
            "preemptions": float(s["preemptions"]),
            "compute_bound_share": s["compute_bound_share"],
            "peak_kv_share": s["peak_kv_tokens"] / s["kv_budget_tokens"],
        }
