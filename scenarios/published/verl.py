"""verl ``recipe/fully_async_policy``: the README's five step-time rows and its 2.35x headline.

Sources: volcengine/verl ``recipe/fully_async_policy/README.md`` ("Experiments") and the scripts
under ``recipe/fully_async_policy/exp/qwen2-7B-math_128/`` (named beside each value). The preset
is :func:`scenarios.systems.verl_fully_async` (the rollouter's counter and its concurrency cap, both
in prompts of ``rollout.n`` responses; the message queue; partial rollouts resent with a re-prefill).
A fully async run's ``gen`` is verl's: the trainer's wait for samples without the weight sync
(:class:`VerlAsyncMeasured`). ``docs/published.md`` ("verlasync") answers what verl measures and
does, with file and line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig, ModelSpec, TokenWorkload
from pipesim.compute.profiles import calibration_workload
from scenarios import systems
from scenarios.published import common
from scenarios.published.common import (
    POINT,
    Measured,
    RunCache,
    Variant,
    _cluster,
    _trainer,
)

VERL_MODEL: ModelSpec = dataclasses.replace(MODELS["qwen2.5-math-7b"], max_context_len=32768)
"""Qwen2.5-Math-7B with ``max_position_embeddings`` 32,768: the recipe's scripts say "modify the
max_position_embeddings in config.json to 32768" and pass
``override_config.max_position_embeddings=32768``."""
VERL_PROMPTS, VERL_N, VERL_MINI = 512, 16, 32  # train_batch_size, rollout.n, ppo_mini_batch_size (README)
VERL_REQUIRE_BATCHES, VERL_SYNC_STEP = 4, 4  # require_batches, trigger_parameter_sync_step (README)
VERL_STEPS = 400  # the README's step count (total time over 400 steps)
VERL_BATCH: dict[str, Any] = {
    "ppo_mini_batch_samples": VERL_MINI * VERL_N,  # ppo_mini_batch_size 32 prompts x rollout.n (README)
    "micro_batch_tokens": 2 * (2048 + 28 * 1024),  # use_dynamic_bsz, actor_ppo_max_token_len (run.sh)
    "log_prob_micro_batch_tokens": 3 * (2048 + 28 * 1024),  # infer_ppo_max_token_len (run.sh)
    "sequence_parallel": 4,  # sp_size=4: ulysses_sequence_parallel_size (run.sh)
}
"""The trainer's batch knobs as the 7B scripts set them (``exp/qwen2-7B-math_128/{fsdp2_colocate,
fsdp2_fully-async_64-64}/run.sh`` at 8f62a942ab; the same in ``shell/dapo_7b_math_fsdp2_*.sh``
later), which the default profile's calibration row also trained with
(:func:`pipesim.compute.profiles._calibration_config`). Samples reach the ranks as verl's
``_balance_batch`` dealt them then (``balance = "step"``, :mod:`pipesim.compute.balance`)."""


def verl_engine() -> EngineConfig:
    """The rollout's vLLM engine as the recipe ran it. Sources, at verl 8f62a942ab (2025-09-18,
    the last commit with ``recipe/fully_async_policy/exp/``): the scripts
    ``exp/qwen2-7B-math_128/{fsdp2_colocate,fsdp2_fully-async_64-64}/run.sh``; the rollout config
    defaults ``verl/trainer/config/rollout/rollout.yaml``; and the engines built from them, the
    colocated ``vLLMRollout`` (``verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py``: vLLM's
    ``LLM`` with ``distributed_executor_backend="external_launcher"``, each TP group running
    ``LLM.generate`` on its fixed share of the batch) and the fully-async servers
    (``vllm_rollout/vllm_async_server.py``: ``vllm serve`` with the same engine arguments).
    ``free_cache_engine`` (True, rollout.yaml) frees the KV cache between generations (vLLM's
    sleep mode): it costs the colocated step a re-allocation, not the decode, so it is not here."""
    return EngineConfig(
        model=VERL_MODEL,
        gpu=GPUS["h20"],  # README: "Machine: H20"
        tp=4,  # scripts: gen_tp=4 (rollout.tensor_model_parallel_size)
        gpu_memory_utilization=0.80,  # scripts: rollout.gpu_memory_utilization=0.80
        max_num_seqs=1024,  # verl's rollout config default (max_num_seqs: 1024)
        max_model_len=2048 + 28 * 1024,  # max_prompt_length 2K + max_response_length 28K (scripts)
        # scripts: enable_chunked_prefill=True, max_num_batched_tokens=max_prompt_length +
        # max_response_length (vllm_rollout_spmd.py refuses a smaller one with chunked prefill)
        max_num_batched_tokens=2048 + 28 * 1024,
        enforce_eager=False,  # rollout.yaml: enforce_eager: False (CUDA graphs; the scripts keep it)
        share_group_prefix=True,  # rollout.yaml: enable_prefix_caching: True (both engines pass it)
        # both engines pass disable_custom_all_reduce=True (vllm_rollout_spmd.py's LLM(...),
        # vllm_async_server.py's server args): TP all-reduces go through NCCL
        disable_custom_all_reduce=True,
    )


def verl_workload(v: Variant = POINT) -> TokenWorkload:
    """README: max_response_length 28K, rollout.n 16; Qwen2.5-Math-7B base model lengths. The one
    definition the default profile's calibration also reads its tokens per sample from
    (:func:`pipesim.compute.profiles.calibration_workload`)."""
    return calibration_workload(scale=v.scale)


@RunCache
def verl_colocate(n_gpus: int, v: Variant = POINT) -> Measured:
    """Colocated sync (``verl.trainer.main_ppo``, hybrid engine): every GPU generates the 512 x 16
    samples, then every GPU trains them; old log-probs recomputed (the README's old_log_prob column)."""
    eng = verl_engine()
    batch = VERL_PROMPTS * VERL_N
    cfg = pipesim.PipelineConfig(batch_size=batch, steps=3, max_staleness=0)
    sc = pipesim.Scenario(
        pipeline=cfg,
        name=f"verl colocate {n_gpus}",
        admission=pipesim.CountThrottle(),
        weight_update=pipesim.Drain(),
    )
    cl = _cluster(eng, n_gpus, 0)
    # generate_sequences returns the batch in prompt order: the trainer deals it out in that order
    tr = _trainer(eng, n_gpus, old_logp=True, v=v, batch={**VERL_BATCH, "batch_order": "submission"})
    # the hybrid engine hands each TP group a contiguous chunk of the batch, whose rollout.n copies
    # of a prompt are adjacent (``repeat(interleave=True)``): whole prompt groups per replica
    routing = pipesim.GroupAffinity(VERL_N)
    return common.measure(sc, cl, verl_workload(v), tr, warmup=1, seed=v.seed, routing=routing)


@dataclasses.dataclass(frozen=True)
class VerlAsyncMeasured(Measured):
    """A fully async run, whose ``gen`` is verl's: the trainer's wait for its samples, the weight
    sync *not* included. ``fully_async_trainer.py`` (``fit``): the ``gen`` timer wraps
    ``_get_samples_from_queue`` alone, and ``_trigger_parameter_sync_after_step`` times
    ``wait_last_valid`` and ``sync_weights`` into their own ``timing_s/param_sync`` dict, outside
    ``timing_s/step``; the ``MetricsAggregator`` sums ``timing_s/*`` over the
    ``trigger_parameter_sync_step`` trainer steps of one parameter version (``detach_utils.py``,
    ``time_sum``), so a README step's ``gen`` is the wait of its k trainer steps. (Colocated, verl's
    ``gen`` wraps ``generate_sequences``, whose weight resharding into vLLM it includes:
    :meth:`Measured.gen_s` is that one.)"""

    def gen_s(self, k: int) -> float:
        syncs = k / VERL_SYNC_STEP  # one weight sync per trigger_parameter_sync_step trainer steps
        return max(super().gen_s(k) - syncs * self.sync_s, 0.0)


@RunCache
def verl_async(
    n_gpus: int, staleness_threshold: float, partial_rollout: bool, v: Variant = POINT
) -> Measured:
    """verl fully async on an even split (README: 64:64 of 128, 32:32 of 64). One kernel step is one
    trainer step of require_batches x ppo_mini_batch_size = 128 prompts; the README's "step" is
    trigger_parameter_sync_step = 4 of them (512 prompts). old_log_prob comes from the rollout
    (``use_rollout_log_probs``; the README's old_log_prob column is empty), so it is not recomputed."""
    eng = verl_engine()
    train_gpus = n_gpus // 2
    cl = _cluster(eng, n_gpus, train_gpus)
    # fully_async_rollouter: max_concurrent_samples = servers * 16 prompts, each of rollout.n samples
    concurrent = cl.n_replicas * 16 * VERL_N
    published_steps = 4
    sc = systems.verl_fully_async(
        staleness_threshold=staleness_threshold,
        trigger_parameter_sync_step=VERL_SYNC_STEP,
        partial_rollout=partial_rollout,
        require_batches=VERL_REQUIRE_BATCHES,
        ppo_mini_batch_size=VERL_MINI * VERL_N,
        max_concurrent_samples=concurrent,
        samples_per_prompt=VERL_N,  # a RolloutSample is one prompt's rollout.n responses
        steps=published_steps * VERL_SYNC_STEP,
    )
    # the queue's order: whole prompts as they complete (assemble_batch_from_rollout_samples)
    tr = _trainer(eng, train_gpus, old_logp=False, v=v, batch=VERL_BATCH)
    m = common.measure(sc, cl, verl_workload(v), tr, warmup=VERL_SYNC_STEP, seed=v.seed)
    return VerlAsyncMeasured(**{f.name: getattr(m, f.name) for f in dataclasses.fields(m)})


def verl_step_s(m: Measured, kernel_steps_per_step: int) -> float:
    """The README's seconds per step: the 400-step total (extrapolated) over 400."""
    return m.total_s(VERL_STEPS * kernel_steps_per_step) / VERL_STEPS


def verl_diag(m: Measured, k: int) -> str:
    """The step in phases; a fully async run also says whether its rollouter kept up: the wait
    (verl's ``gen``) apart from the weight sync, and the rollouter's idle share (verl's
    ``rollouter/idle_ratio``, over the whole run: near 0 means generation-bound); and the share
    of the actor update spent waiting for the busiest rank (``trainer/rank_wait_share``)."""
    train = m.steady_train_s * k
    step = m.steady_step_s * k
    ranks = (
        f" ({m.summary.get('trainer/rank_wait_share', 0.0):.0%} of the update waiting for the busiest rank)"
    )
    if not isinstance(m, VerlAsyncMeasured):
        return f"wait {step - train:.1f} s, train {train:.1f} s{ranks}"
    idle = m.summary.get("fully_async/rollouter/idle_ratio", float("nan"))
    return (
        f"wait {m.gen_s(k):.1f} s + sync {step - train - m.gen_s(k):.1f} s, train {train:.1f} s{ranks}, "
        f"rollouter idle {idle:.0%}"
    )
