"""What a compute replica keeps over a long run: its bookkeeping is bounded by what is resident.

The replica's admission order (``BatchState.admitted``, which preemption reads newest first) used
to keep an entry per admission for the whole run, and with it every finished sequence and its
episode: a closed loop of 40,000 samples held 80,000 tracked objects at its end (the collector's
first pass after the run scanned them all), and the verl-scale benchmark of 100 steps peaked at
886 MB in pure Python (342 MB with the compaction). These tests pin the bound and check that the
compaction leaves preemption exactly as the step-by-step reference has it; and that the cost
tables the replicas of one configuration share (``pipesim.compute.cost.SHARED_TABLE_CONFIGS``) hold
what a replica computing its own would.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading

import numpy as np
import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.gpus import GPUSpec
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.episode import Episode
from tests.test_compute_engine import _own_tables, config_with_budget, max_rel_error, reference, run_replica

WORK = TokenWorkload(response=LogNormalLengths(200.0, 0.7), prompt=64, max_response_tokens=512)


def _live_episodes() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Episode)


@pytest.mark.parametrize("kv_policy", ["preempt", "reserve"])
def test_a_long_closed_loop_keeps_only_what_is_resident(kv_policy: str) -> None:
    concurrency, samples = 64, 4_000
    cfg = config_with_budget(6000, max_num_seqs=concurrency, kv_policy=kv_policy)
    loop = ClosedLoop(cfg, WORK, concurrency)
    before = _live_episodes()
    out = loop.run(samples)
    assert out["samples"] == samples
    admitted = loop.replica.admitted
    if kv_policy == "preempt":
        assert out["preemptions"] > 0  # the order was read, after compactions
        assert len(admitted) <= 2 * concurrency + 64
    else:
        assert out["preemptions"] == 0 and admitted == []  # nothing reads it under "reserve"
    # the finished samples' episodes are freed (before the compaction: all 4,000 stayed alive)
    assert _live_episodes() - before <= 4 * concurrency


def test_preemption_after_compactions_matches_the_step_by_step_reference() -> None:
    """Enough admissions (preemptions re-admit too) for the order to be compacted several times,
    on a budget that preempts often: every completion time agrees with the reference, which
    keeps its own admission order whole."""
    cfg = config_with_budget(3000, max_num_seqs=16)  # the default (measured) attention constants
    seqs = [(0.02 * i, 100 + (37 * i) % 200, 150 + (53 * i) % 400) for i in range(160)]
    fluid, rep = run_replica(cfg, seqs)
    admissions = rep.completions + rep.preemptions
    assert rep.preemptions > 50 and admissions > 2 * (2 * 16 + 64)
    assert len(rep.admitted) <= 2 * 16 + 64
    assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-9


# -- the cost tables replicas of one configuration share -------------------------------------------
def _fresh(cfg: EngineConfig) -> ReplicaCost:
    """A cost model of ``cfg`` with tables of its own (as before they were shared)."""
    return _own_tables(ReplicaCost(cfg))


def test_replicas_of_an_equal_configuration_share_their_tables() -> None:
    a = ReplicaCost(config_with_budget(5000, max_num_seqs=48))
    b = ReplicaCost(config_with_budget(5000, max_num_seqs=48))  # equal, another object
    assert a._a is b._a and a._lin is b._lin and a._lm is b._lm
    other = ReplicaCost(config_with_budget(5000, max_num_seqs=32))
    assert other._a is not a._a
    # equal by ==, not by repr: a numpy float computes its own tables (they hold its arithmetic)
    base = config_with_budget(5000, max_num_seqs=48)
    f, g = (dataclasses.replace(base, iteration_overhead_s=x) for x in (0.003, np.float64(0.003)))
    assert f == g and ReplicaCost(f)._a is not ReplicaCost(g)._a


def test_shared_tables_hold_what_a_replica_of_its_own_computes() -> None:
    cfg = config_with_budget(5000, max_num_seqs=300)
    shared, own = ReplicaCost(cfg), _fresh(cfg)
    for b in (1, 7, 300, 64, 0):
        assert shared.fixed_s(b) == own.fixed_s(b) and shared.lm_head_s(b) == own.lm_head_s(b)
    assert shared.prefill_s(777, 1e5, 3) == own.prefill_s(777, 1e5, 3)


def test_shared_tables_grow_correctly_from_several_threads() -> None:
    cfg = config_with_budget(4000, max_num_seqs=1000, iteration_overhead_s=0.00123)  # tables of its own
    costs = [ReplicaCost(cfg) for _ in range(4)]
    assert len(costs[0]._a) == 1  # nobody filled them yet
    start = threading.Barrier(len(costs))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: a race shows

    def grow(cost: ReplicaCost) -> None:
        start.wait()
        for b in range(0, 1001, 7):
            cost.fixed_s(b)
            cost.lm_head_s(b)

    threads = [threading.Thread(target=grow, args=(c,)) for c in costs]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    own = _fresh(cfg)
    assert costs[0]._a == [own.fixed_s(b) for b in range(len(costs[0]._a))]
    assert costs[0]._lm == [own.lm_head_s(b) for b in range(len(costs[0]._lm))]


def test_specs_of_two_classes_that_share_a_name_do_not_share_tables() -> None:
    """A repr names a spec's class but not which of two with one name: a subclass may override a
    derived figure (here the NVLink bandwidth, so the all-reduce of tp = 2)."""

    def link_gpu(factor: float) -> GPUSpec:
        @dataclasses.dataclass(frozen=True)
        class LinkGPU(GPUSpec):
            @property
            def nvlink_bandwidth_per_direction_bytes_per_s(self) -> float:
                return self.nvlink_bandwidth_bytes_per_s / factor

        return LinkGPU(**dataclasses.asdict(GPUS["h100-sxm"]))

    fast, slow = (EngineConfig(model=MODELS["qwen3-8b"], gpu=link_gpu(f), tp=2) for f in (2.0, 200.0))
    assert repr(fast) == repr(slow)
    a, b = ReplicaCost(fast), ReplicaCost(slow)
    assert a._a is not b._a
    assert b.fixed_s(64) == _fresh(slow).fixed_s(64) > a.fixed_s(64)
