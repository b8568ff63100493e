"""Every plan-spec key and the config keys verl, AReaL, slime and ROLL use for the same knob
(``pipesim plan --explain-keys``; the table in ``docs/plan.md``).

Read from the systems' own sources (the commits below):

* verl ``b178a3c``: ``verl/trainer/config/data/legacy_data.yaml`` (``data.*``),
  ``verl/trainer/config/rollout/rollout.yaml`` (``actor_rollout_ref.rollout.*``),
  ``verl/trainer/config/ppo_trainer.yaml`` (``trainer.*``),
  ``verl/experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml``
  (``async_training.*``, ``rollout.nnodes``/``n_gpus_per_node``),
  ``verl/trainer/ppo/metric_utils.py`` (``perf/throughput``: tokens per second per GPU);
* AReaL ``4aef98d``: ``areal/api/cli_args.py`` (``InferenceEngineConfig`` as ``rollout.*``,
  ``GenerationHyperparameters`` as ``gconfig.*``, ``allocation_mode``, ``train_dataset.batch_size``,
  ``vllm.*``/``sglang.*``);
* slime ``624b824``: ``slime/utils/arguments.py`` (command-line flags);
* ROLL ``8eb27cc``: ``roll/configs/base_config.py``, ``roll/pipeline/rlvr/rlvr_config.py``,
  ``roll/configs/generating_args.py``, ``roll/pipeline/agentic/agentic_config.py``.

``-`` means the system has no such knob (pipesim's search settings, constraints and workload
shape are not system settings); a note says where the meaning differs.
"""

from __future__ import annotations

__all__ = ["KEYS", "explain"]

# spec key -> (verl, AReaL, slime, ROLL, where the meaning differs)
KEYS: dict[str, tuple[str, str, str, str, str]] = {
    "cluster.gpu": (
        "-",
        "-",
        "-",
        "-",
        "the hardware; aliases as Vidur and nvidia-smi spell them, or a table of `GPUSpec`'s fields",
    ),
    "cluster.n_gpus": (
        "trainer.nnodes x trainer.n_gpus_per_node (+ rollout.* in fully async)",
        "cluster.n_nodes x cluster.n_gpus_per_node",
        "--actor-num-nodes x --actor-num-gpus-per-node + --rollout-num-gpus",
        "the devices of every worker's device_mapping",
        "pipesim counts the whole cluster; the systems count per role",
    ),
    "cluster.env_workers": (
        "-",
        "-",
        "-",
        "env_manager max_env_num_per_worker x workers (agentic)",
        "sandboxes shared by all replicas; a tool call queues for one",
    ),
    "cluster.cost_per_gpu_hour": ("-", "-", "-", "-", "a price, for the cost column and budget"),
    "model.name": (
        "actor_rollout_ref.model.path",
        "actor.path",
        "--hf-checkpoint",
        "pretrain",
        "a catalog name, a Hugging Face id or a config.json; only its shape matters here",
    ),
    "model.max_model_len": (
        "actor_rollout_ref.rollout.max_model_len",
        "vllm.max_model_len / sglang.context_length",
        "--rollout-max-context-len",
        "sequence_length",
        "",
    ),
    "model.max_num_seqs": (
        "actor_rollout_ref.rollout.max_num_seqs",
        "vllm.max_num_seqs / sglang.max_running_requests",
        "--sglang-max-running-requests",
        "actor_infer.strategy_args.strategy_config.max_num_seqs",
        "",
    ),
    "model.gpu_memory_utilization": (
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "vllm.gpu_memory_utilization / sglang.mem_fraction_static",
        "--sglang-mem-fraction-static",
        "actor_infer.strategy_args.strategy_config.gpu_memory_utilization",
        "SGLang's fraction is of memory left after the weights in some versions",
    ),
    "model.mfu": (
        "-",
        "-",
        "-",
        "-",
        "the trainer's model FLOP utilisation: a model input, verl logs perf/mfu",
    ),
    "model.framework": (
        "actor_rollout_ref.actor.strategy (fsdp, fsdp2, megatron)",
        "the training backend of allocation_mode (fsdp, megatron)",
        "the Megatron backend (slime trains with Megatron)",
        "actor_train.strategy_args.strategy_name (megatron_train, deepspeed_train)",
        "a pipesim framework profile (fsdp2-dense, megatron-dense, megatron-moe, ideal): its "
        "efficiencies and fixed costs, set from published breakdowns, not the systems' own knob",
    ),
    "model.recompute_old_logp": (
        "not actor_rollout_ref.rollout.use_rollout_log_probs (the fully-async recipe's switch)",
        "-",
        "-",
        "-",
        "whether the trainer recomputes old log-probs (verl's timing_s/old_log_prob phase); false "
        "takes the rollout's; default true",
    ),
    "model.reference_model": (
        "actor_rollout_ref.actor.use_kl_loss or algorithm.use_kl_in_reward (a reference policy)",
        "-",
        "-",
        "-",
        "whether the trainer runs a reference model's forward (verl's timing_s/ref phase); default false",
    ),
    "model.ppo_mini_batch_samples": (
        "actor_rollout_ref.actor.ppo_mini_batch_size x rollout.n (verl counts prompts)",
        "the batch / actor.ppo_n_minibatches (AReaL counts mini-batches)",
        "--global-batch-size",
        "actor_train.training_args: per_device_train_batch_size x gradient_accumulation_steps x dp",
        "samples per optimizer step; none: the whole batch is one",
    ),
    "model.micro_batch_tokens": (
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu (use_dynamic_bsz)",
        "actor.mb_spec.max_tokens_per_mb",
        "--max-tokens-per-gpu (--use-dynamic-batch-size)",
        "actor_train.max_tokens_per_microbatch_in_train (use_dynamic_batching_in_train)",
        "tokens per GPU per training micro-batch",
    ),
    "model.log_prob_micro_batch_tokens": (
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
        "-",
        "--log-probs-max-tokens-per-gpu",
        "actor_train.max_tokens_per_microbatch_in_infer",
        "tokens per GPU per forward-only micro-batch; none: the training budget",
    ),
    "model.sequence_parallel": (
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        "-",
        "--context-parallel-size (Megatron's context parallelism, not Ulysses)",
        "-",
        "ranks that split each sequence; the trainer's GPUs must be a multiple",
    ),
    "model.balance": (
        "trainer.balance_batch (step: before PR #3605; sorted: since; mini_batch: keep_minibatch)",
        "-",
        "-",
        "-",
        "how the trainer deals a step's samples to its ranks (pipesim.compute.balance); none: the profile's",
    ),
    "model.share_group_prefix": (
        "actor_rollout_ref.rollout.enable_prefix_caching",
        "vllm.enable_prefix_caching / SGLang's radix cache",
        "SGLang's radix cache (on by default)",
        "actor_infer.strategy_args.strategy_config.enable_prefix_caching",
        "pipesim also routes a group to one replica",
    ),
    "model.tool_kv": (
        "-",
        "-",
        "-",
        "-",
        "KV kept or dropped during a tool call (the engine's cache policy)",
    ),
    "model.episodes_per_replica": (
        "-",
        "-",
        "-",
        "-",
        "episodes a replica holds at once, tool calls included (Cluster.slots_per_replica); default "
        "max_num_seqs, which caps the resident ones; the systems' own keys for it were not traced",
    ),
    "model.weight_dtype": (
        "-",
        "-",
        "-",
        "-",
        "the engines' weights, as vLLM's quantization (weight-only here: the math stays at the bf16 "
        "peak); the systems' own keys for it were not traced; the trainer keeps bf16",
    ),
    "model.kv_dtype": (
        "-",
        "-",
        "-",
        "-",
        "the engines' KV cache, as vLLM's kv_cache_dtype; the systems' own keys for it were not traced",
    ),
    "workload.prompts_per_step": (
        "data.train_batch_size",
        "train_dataset.batch_size",
        "--rollout-batch-size",
        "rollout_batch_size (RLVR); rollout_batch_size / train_env_manager.group_size (agentic)",
        "prompts; verl's ppo_mini_batch_size and slime's --global-batch-size split a step further; "
        "ROLL's agentic rollout_batch_size counts trajectories, its RLVR one prompts",
    ),
    "workload.batch_size": (
        "data.train_batch_size x actor_rollout_ref.rollout.n",
        "train_dataset.batch_size x gconfig.n_samples",
        "--rollout-batch-size x --n-samples-per-prompt",
        "rollout_batch_size x num_return_sequences_in_group (RLVR); rollout_batch_size (agentic)",
        "samples (not prompts) per step; ROLL's agentic get_batch collects rollout_batch_size "
        "trajectories in whole groups",
    ),
    "workload.samples_per_prompt": (
        "actor_rollout_ref.rollout.n",
        "gconfig.n_samples",
        "--n-samples-per-prompt",
        "num_return_sequences_in_group (agentic: train_env_manager.group_size)",
        "",
    ),
    "workload.prompt_tokens": (
        "data.max_prompt_length (a cap)",
        "-",
        "--rollout-max-prompt-len (a cap)",
        "prompt_length (a cap)",
        "pipesim's is the prompt length itself; the systems' are caps",
    ),
    "workload.max_prompt_tokens": (
        "data.max_prompt_length",
        "-",
        "--rollout-max-prompt-len",
        "prompt_length",
        "",
    ),
    "workload.response": (
        "-",
        "-",
        "-",
        "-",
        "the length distribution: the model's behaviour, not a setting",
    ),
    "workload.response_trace": ("-", "-", "-", "-", "observed lengths (a CSV)"),
    "workload.max_response_tokens": (
        "data.max_response_length",
        "gconfig.max_new_tokens",
        "--rollout-max-response-len",
        "actor_infer.generating_args.max_new_tokens",
        "per response; verl's agent loop caps a whole episode's response with it "
        '(`rollout.response_length`), which pipesim does not model (docs/compute.md, "Not modelled yet")',
    ),
    "workload.difficulty_sigma": ("-", "-", "-", "-", "per-prompt spread of lengths"),
    "workload.drift_per_version": ("-", "-", "-", "-", "lengths growing as training goes"),
    "workload.agent": (
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns",
        "the workflow's turns (e.g. max_turns of a multi-turn workflow)",
        "the custom generate function's turns",
        "max_actions_per_traj (agentic)",
        "pipesim draws turns, tool latency and observation tokens; the systems run real tools",
    ),
    "constraints.mean_staleness": ("-", "-", "-", "-", "a limit on the result, not a setting"),
    "constraints.max_staleness": (
        "async_training.staleness_threshold (a share, not versions)",
        "rollout.max_head_offpolicyness (enforced at admission)",
        "-",
        "async_generation_ratio (steps generated ahead)",
        "pipesim judges the trained samples' staleness; the systems bound admission",
    ),
    "constraints.discarded_share": ("-", "-", "-", "-", "a limit on the result"),
    "constraints.offpolicy_token_share": (
        "-",
        "-",
        "partial_rollout/off_policy_ratio (resumed prefixes over decoded tokens: another ratio)",
        "-",
        "a limit on the result: trained tokens an older policy generated, over trained tokens",
    ),
    "constraints.min_trainer_gpus": ("-", "-", "-", "-", "a limit on the placements searched"),
    "constraints.cost_per_mtok": ("-", "-", "-", "-", "a budget on the result (needs cost_per_gpu_hour)"),
    "space.placement": (
        "actor_rollout_ref.hybrid_engine (colocated) / fully async rollout.n_gpus_per_node",
        "allocation_mode (e.g. sglang:d32+fsdp:d32)",
        "--colocate / --rollout-num-gpus",
        "actor_train.device_mapping vs actor_infer.device_mapping",
        "pipesim searches trainer GPUs; 0 is colocated",
    ),
    "space.tp": (
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "allocation_mode's t (e.g. sglang:d16t2)",
        "--rollout-num-gpus-per-engine",
        "actor_infer.strategy_args.strategy_config.tensor_parallel_size",
        "",
    ),
    "space.eta": (
        "async_training.staleness_threshold (a share of a batch, not versions)",
        "rollout.max_head_offpolicyness",
        "-",
        "async_generation_ratio",
        "pipesim's eta counts versions as AReaL's does; verl's threshold is a fraction of samples",
    ),
    "space.update": (
        "async_training.partial_rollout (partial vs drain)",
        "-  (weights update between rollouts; interrupted requests resume)",
        "--partial-rollout",
        "-",
        "pipesim's drain/partial/abort_reprefill/inflight/abort are policies the systems mix",
    ),
    "space.sync_every": (
        "async_training.trigger_parameter_sync_step",
        "-",
        "--update-weights-interval",
        "-",
        "",
    ),
    "space.oversample": (
        "-",
        "rollout.max_concurrent_rollouts (a concurrency, not a factor)",
        "--over-sampling-batch-size / --rollout-batch-size",
        "max_additional_running_prompts / rollout_batch_size (is_use_additional_prompts)",
        "pipesim's is a factor; slime's and ROLL's are counts of prompts",
    ),
    "space.oversample_prompts": (
        "-",
        "-",
        "--over-sampling-batch-size",
        "rollout_batch_size + max_additional_running_prompts",
        "prompts launched per step, as slime counts them",
    ),
}
for _key in ("placement", "tp", "eta", "update", "sync_every", "oversample"):
    _v, _a, _s, _r, _n = KEYS[f"space.{_key}"]
    KEYS[f"baseline.{_key}"] = (_v, _a, _s, _r, "the user's current design: " + (_n or "as in [space]"))
for _key in (
    "steps",
    "screen_steps",
    "seeds",
    "method",
    "trials",
    "grid_limit",
    "reduction",
    "min_full",
    "batch",
    "sim_seed",
    "first_cut",
):
    KEYS[f"search.{_key}"] = ("-", "-", "-", "-", "pipesim's search, no system knob")
KEYS["search.sync_time_s"] = (
    "-",
    "-",
    "-",
    "-",
    "seconds per weight sync; the systems measure it (timing_s/update_weights in verl)",
)
KEYS["search.inflight_load_time_s"] = ("-", "-", "-", "-", "a double-buffered update's load pause")

SYSTEMS = ("verl", "AReaL", "slime", "ROLL")


def explain() -> str:
    """The key map as text: one block per spec key."""
    out = ["spec key -> verl | AReaL | slime | ROLL (where the meaning differs); '-': no such knob", ""]
    for key, (*names, note) in KEYS.items():
        out.append(key)
        for system, name in zip(SYSTEMS, names, strict=True):
            out.append(f"  {system:6} {name}")
        if note:
            out.append(f"  note   {note}")
    return "\n".join(out)


def markdown() -> str:
    """The key map as the Markdown table of ``docs/plan.md``."""
    rows = [
        "| spec key | verl | AReaL | slime | ROLL | where the meaning differs |",
        "|---|---|---|---|---|---|",
    ]
    for key, (v, a, s, r, note) in KEYS.items():
        cells = [f"`{key}`", *(c if c == "-" else f"`{c}`" for c in (v, a, s, r)), note]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
