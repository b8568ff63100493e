"""What a compute replica keeps over a long run: its bookkeeping is bounded by what is resident.

The replica's admission order (``BatchState.admitted``, which preemption reads newest first) used
to keep an entry per admission for the whole run, and with it every finished sequence and its
episode: a closed loop of 40,000 samples held 80,000 tracked objects at its end (the collector's
first pass after the run scanned them all), and the verl-scale benchmark of 100 steps peaked at
886 MB in pure Python (342 MB with the compaction). These tests pin the bound and check that the
compaction leaves preemption exactly as the step-by-step reference has it.
"""

from __future__ import annotations

import gc

import pytest

from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.episode import Episode
from tests.test_compute_engine import config_with_budget, max_rel_error, reference, run_replica

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
    cfg = config_with_budget(3000, max_num_seqs=16)
    seqs = [(0.02 * i, 100 + (37 * i) % 200, 150 + (53 * i) % 400) for i in range(160)]
    fluid, rep = run_replica(cfg, seqs)
    admissions = rep.completions + rep.preemptions
    assert rep.preemptions > 50 and admissions > 2 * (2 * 16 + 64)
    assert len(rep.admitted) <= 2 * 16 + 64
    assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-6
