"""The published systems' trainers and presets carry their sources' knobs (issue 41).

AReaL v0.3 trains with realhf's Megatron backend at data parallel 32 (async) or 64 (sync), tensor
and pipeline parallel 1, four PPO mini-batches, 30,720 tokens per micro-batch, the proximal
log-probs recomputed and no reference model (``scenarios/published/areal.py`` names the files).
The runs are recorded, not simulated: ``common.measure`` is replaced by a recorder.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipesim.compute.phases import phase_parts
from pipesim.compute.profiles import profile
from scenarios.published import areal, common


@pytest.fixture
def areal_calls(monkeypatch):
    """Every AReaL run of the table (the sync run, the eta sweep), recorded: (scenario, trainer)."""
    calls: list[tuple[Any, Any]] = []
    placeholder = common.PLACEHOLDER

    def fake(scenario, cluster, workload, trainer, warmup, seed=0):
        calls.append((scenario, trainer))
        return placeholder

    monkeypatch.setattr(common, "measure", fake)
    areal.areal_run.cache_clear()
    areal.areal_sync()
    for eta in areal.AREAL_TREND_ETAS:
        areal.areal_run(eta)
    areal.areal_run.cache_clear()
    return calls


def test_areal_trainer_is_realhf_megatron_at_its_stated_knobs(areal_calls):
    assert len(areal_calls) == 1 + len(areal.AREAL_TREND_ETAS)
    megatron = profile("megatron-dense")
    for sc, tr in areal_calls:
        prof = tr.framework
        # the registry's megatron-dense by name, constants untouched, at d{dp}p1m1
        assert prof.name == "megatron-dense" and prof.backend == "megatron"
        assert (prof.tp, prof.pp) == (1, 1)
        assert (prof.fwd_bwd_efficiency, prof.fwd_efficiency) == (
            megatron.fwd_bwd_efficiency,
            megatron.fwd_efficiency,
        )
        assert (prof.micro_batch_s, prof.optimizer_step_s) == (
            megatron.micro_batch_s,
            megatron.optimizer_step_s,
        )
        batch = sc.pipeline.batch_size
        assert batch == 512 * 16
        assert tr.ppo_mini_batch_samples * 4 == batch  # ppo.ppo_n_minibatches=4
        assert tr.micro_batch_tokens == 30720  # actor_train.mb_spec.max_tokens_per_mb
        assert tr.recompute_old_logp and not tr.reference_model  # decoupled PPO; kl_ctl 0
        sync = sc.pipeline.max_staleness == 0
        # actor_inf: realhf's default MicroBatchSpec in the sync runner, 30720 in async-ppo.yaml
        assert tr.log_prob_micro_batch_tokens == (10**12 if sync else 30720)
    assert {tr.n_gpus for _, tr in areal_calls} == {32, 64}


def test_areal_step_has_four_optimizer_steps_and_token_budgeted_micro_batches(areal_calls):
    """The phase split the knobs give: 4 optimizer steps a step whatever the GPUs; each rank's
    mini-batch in ceil(tokens / 30720) micro-batches; no per-micro-batch parameter gather (the
    Megatron distributed optimizer communicates once per optimizer step, so the exposed
    communication is the same for any token count)."""
    for sc, tr in areal_calls:
        samples = sc.pipeline.batch_size
        for tokens_per_sample in (2000.0, 6000.0):
            tokens = samples * tokens_per_sample
            parts = phase_parts(tr, tokens, samples)
            upd = parts["update_actor"]
            assert upd["opt"] == 4
            dp = tr.n_gpus
            per_rank_mini = tokens / 4 / dp
            assert upd["micro"] == 4 * math.ceil(per_rank_mini / 30720)
            assert parts["ref"]["compute_flop_s"] == 0.0
        comm = [phase_parts(tr, samples * t, samples)["update_actor"]["comm_s"] for t in (2000.0, 6000.0)]
        assert comm[0] == pytest.approx(comm[1])
