"""What a plan searches: the cluster, model, workload and constraints, and the space of designs.

:class:`Space` holds the values each field of a :class:`~pipesim.plan.design.Design` is drawn from
(a placement, the TP degree, ``eta``, the over-sampling factor, the weight-update policy and the
sync interval: :mod:`pipesim.plan.design`, which also names the policies), and :class:`PlanSpec`
everything else a plan needs, checked as a whole (the task pool a design of the space draws
included). The limits a feasible design meets are :class:`~pipesim.plan.constraints.Constraints`.
:mod:`pipesim.plan.build` turns a design into what :func:`pipesim.compute.run_compute` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pipesim.compute import GPUSpec, ModelSpec, TokenWorkload
from pipesim.compute.balance import BALANCES
from pipesim.compute.models import DTYPE_BYTES
from pipesim.compute.phases import FrameworkProfile
from pipesim.compute.profiles import check_layout
from pipesim.compute.trainer import MIN_EFFICIENCY
from pipesim.core.errors import MAX_DURATION_POOL, MAX_POOL_TASKS, MAX_SLOTS, FieldError, shown
from pipesim.plan.checks import (
    MAX_BUDGET,
    MAX_ETA,
    MAX_GPUS,
    MAX_OVERSAMPLE,
    MAX_SIM_SEED,
    MAX_SYNC_EVERY,
    MAX_TOKENS,
    SEED_SPAN,
    PlanError,
    did_you_mean,
    integer,
    ints,
    number,
    optional_number,
)
from pipesim.plan.constraints import CONSTRAINT_METRICS as CONSTRAINT_METRICS  # re-exported
from pipesim.plan.constraints import Constraints
from pipesim.plan.design import UPDATES, Design, check_baseline
from pipesim.plan.resolve import resolve_gpu, resolve_model
from pipesim.plan.runspec_calibration import MAX_STEP_TIME_S

__all__ = [
    "BATCH_KNOBS",
    "UPDATES",
    "Constraints",
    "Design",
    "PlanError",
    "PlanSpec",
    "Space",
    "resolve_gpu",
    "resolve_model",
]

BATCH_KNOBS = (
    "ppo_mini_batch_samples",
    "micro_batch_tokens",
    "log_prob_micro_batch_tokens",
    "sequence_parallel",
)
"""The trainer's batch knobs: :class:`PlanSpec` fields, ``[model]`` keys and
:class:`~pipesim.compute.TrainerConfig` fields of the same names (verl's in :mod:`pipesim.plan.keys`)."""
METHODS = ("auto", "grid", "slices", "optuna")


MAX_SEEDS = 100
"""The most seeds a plan repeats each full run on (``search.seeds``)."""


@dataclass(frozen=True)
class Space:
    """The values searched. ``placement`` holds trainer-GPU counts (0: colocated); None: every
    split the GPU count allows at replica granularity, and colocated."""

    placement: tuple[int, ...] | None = None
    tp: tuple[int, ...] = (1,)
    eta: tuple[int, ...] = (0, 1, 2)
    update: tuple[str, ...] = ("drain", "partial", "abort_reprefill", "inflight")
    sync_every: tuple[int, ...] = (1,)
    oversample: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        for name in ("placement", "tp", "eta", "update", "sync_every", "oversample"):
            v = getattr(self, name)
            if isinstance(v, list):  # frozen: a list becomes the tuple it stands for
                object.__setattr__(self, name, v := tuple(v))
            if not isinstance(v, tuple) and not (name == "placement" and v is None):
                raise PlanError(f"space.{name} must be a tuple, got {shown(v)}", f"space.{name}")
            if v is not None and not v:
                raise PlanError(f"space.{name} is empty", f"space.{name}")
        bad = [u for u in self.update if u not in UPDATES]
        if bad:
            hint = did_you_mean(bad[0], UPDATES)
            raise PlanError(
                f"space.update: unknown {bad}{hint} (choose from {list(UPDATES)})", "space.update"
            )
        if self.placement is not None:
            ints("space.placement", self.placement, 0, MAX_GPUS)
        ints("space.tp", self.tp, 1, MAX_GPUS)
        ints("space.eta", self.eta, 0, MAX_ETA)
        ints("space.sync_every", self.sync_every, 1, MAX_SYNC_EVERY)
        for i, f in enumerate(self.oversample):
            number(f"space.oversample[{i}]", f, 1, MAX_OVERSAMPLE)


@dataclass(frozen=True)
class PlanSpec:
    """Everything a plan needs. ``batch_size`` counts samples per step (prompts x samples)."""

    gpu: GPUSpec
    n_gpus: int
    model: ModelSpec
    workload: TokenWorkload
    batch_size: int
    constraints: Constraints = field(default_factory=Constraints)
    space: Space = field(default_factory=Space)
    steps: int = 12
    """Training steps of a full run."""
    screen_steps: int = 3
    """Training steps of a screening run (the first rung of successive halving)."""
    seeds: int = 3
    """Seeds per design in full runs (the confidence interval and the paired test; the default
    was raised from 2 to 3: with 2 the t interval has one degree of freedom)."""
    sim_seed: int = 0
    """The simulations use seeds ``sim_seed, sim_seed + 1, ...``; the plan's seed drives Optuna."""
    max_model_len: int | None = None
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.9
    mfu: float = 0.4
    share_group_prefix: bool = False
    """The engines share a prompt group's prefix KV (vLLM's prefix caching,
    ``EngineConfig.share_group_prefix``) and route a group's samples to one replica
    (:class:`~pipesim.policies.replicas.GroupAffinity`), so a group prefills its prompt once."""
    sync_time_s: float | None = None
    """Seconds per weight sync; None: the cluster's default (weights over the slowest link)."""
    sync_scale: float = 1.0
    inflight_load_time_s: float = 1.0
    method: str = "auto"
    """``grid``, ``slices`` (:mod:`pipesim.plan.slices`), ``optuna`` or ``auto`` (the grid when the
    space has at most ``grid_limit`` designs, else Optuna)."""
    trials: int = 200
    """Optuna: designs to screen; slices: designs to screen, and full-length probes, each at most."""
    grid_limit: int = 256
    reduction: int = 3
    """Successive halving: keep 1 / reduction of a rung's designs for the next."""
    min_full: int = 6
    """Designs run in full at least (when the space has that many)."""
    batch: int = 16
    """Optuna: trials asked and told together (independent of the worker count)."""
    step_overhead_s: float = 0.0
    """The trainer's fixed seconds per step (``TrainerConfig.step_overhead_s``; calibrated)."""
    iteration_overhead_s: float | None = None
    """The engine's fixed seconds per decode iteration (None: ``EngineConfig``'s; calibrated)."""
    framework: FrameworkProfile | None = None
    """The trainer's framework profile (``model.framework``, calibrated constants applied); None:
    the one-MFU model at ``mfu`` (:class:`~pipesim.compute.TrainerConfig`)."""
    recompute_old_logp: bool = True
    """The trainer recomputes the old log-probs (``model.recompute_old_logp``; false: it takes the
    rollout's, verl's ``use_rollout_log_probs``, and has no ``old_log_prob`` phase)."""
    reference_model: bool = False
    """The trainer runs a reference model's forward (``model.reference_model``: a KL term, verl's
    ``use_kl_loss`` or ``use_kl_in_reward``; its ``timing_s/ref`` phase); default false."""
    ppo_mini_batch_samples: int | None = None
    """Samples per optimizer step (``model.ppo_mini_batch_samples``: verl's ``ppo_mini_batch_size``
    x ``rollout.n``; None: the whole batch is one; :class:`~pipesim.compute.TrainerConfig`)."""
    micro_batch_tokens: int | None = None
    """Tokens per GPU per training micro-batch (``model.micro_batch_tokens``: verl's
    ``ppo_max_token_len_per_gpu`` under ``use_dynamic_bsz``; None: the trainer's default)."""
    log_prob_micro_batch_tokens: int | None = None
    """Tokens per GPU per forward-only micro-batch (``model.log_prob_micro_batch_tokens``; None:
    the training budget)."""
    sequence_parallel: int = 1
    """Ulysses sequence parallelism of the trainer (``model.sequence_parallel``): a split's trainer
    GPUs must be a multiple of it."""
    balance: str | None = None
    """How the trainer's framework deals samples to its ranks (``model.balance``,
    :data:`pipesim.compute.balance.BALANCES`); None: the profile's (``"step"``, verl before its PR
    #3605, for every registered profile but ``ideal``). ``"sorted"`` is verl's default since."""
    baseline: Design | None = None
    """The user's current design (``[baseline]``): run in full beside the plan's, and every
    design is compared with it."""
    env_workers: int | None = None
    """Environment workers (sandboxes) shared by every replica (``Cluster(env_workers=...)``): an
    agent's tool call waits for a free one; None: as many as there are calls."""
    tool_kv: str = "keep"
    """A sequence's KV during a tool call: ``keep`` or ``drop`` (``EngineConfig.tool_kv``)."""
    episodes_per_replica: int | None = None
    """Episodes each replica holds at once, tool calls included (``model.episodes_per_replica``, a
    run spec's key of the same name: every design's ``Cluster.slots_per_replica``); None:
    ``max_num_seqs``. A report's slot note (:mod:`pipesim.plan.slots`) says when to raise it."""
    weight_dtype: str = "bf16"
    """How the engines store the weights (``model.weight_dtype``: ``bf16``, ``fp8``, ``int8``,
    ``int4``, ... :data:`~pipesim.compute.models.DTYPE_BYTES`; ``EngineConfig.weight_dtype``,
    weight-only quantization): the weights each GPU holds, so the KV budget, and the bytes every
    decode GEMM reads. The trainer's copy stays bf16."""
    kv_dtype: str = "bf16"
    """How the engines store the KV cache (``model.kv_dtype``, vLLM's ``kv_cache_dtype``;
    ``EngineConfig.kv_dtype``): the bytes per cached token, so the KV budget and attention reads."""
    cost_per_gpu_hour: float | None = None
    """Price of one GPU-hour (any currency): adds ``cost_per_mtok`` (per million trained tokens)."""
    first_cut: bool = True
    """Rule out designs whose fluid ceiling is below what a proved design reaches
    (:mod:`pipesim.plan.fluid`) before screening."""

    def __post_init__(self) -> None:
        # a Python argument that is no spec object: its own name (a file's names resolve first)
        if not isinstance(self.gpu, GPUSpec):
            raise PlanError(f"gpu must be a GPUSpec, got {shown(self.gpu)}", "gpu")
        if not isinstance(self.model, ModelSpec):
            raise PlanError(f"model must be a ModelSpec, got {shown(self.model)}", "model")
        if not isinstance(self.workload, TokenWorkload):
            raise PlanError(f"workload must be a TokenWorkload, got {shown(self.workload)}", "workload")
        if not isinstance(self.constraints, Constraints) or not isinstance(self.space, Space):
            name = "constraints" if not isinstance(self.constraints, Constraints) else "space"
            msg = f"constraints and space must be a Constraints and a Space, got {shown(getattr(self, name))}"
            raise PlanError(msg, name)
        integer("cluster.n_gpus", self.n_gpus, 1, MAX_GPUS)
        # each a count of tasks or places a run draws: above the largest pool a run may draw they
        # are no plan (and a 300-digit int read from 1e308 overflowed the pool's float product)
        integer("workload.batch_size", self.batch_size, 1, MAX_POOL_TASKS)
        n = self.workload.samples_per_prompt
        if self.batch_size % n:  # 10 samples of 4 per prompt: the group designs train whole prompts
            raise PlanError(
                f"workload.batch_size must be a multiple of workload.samples_per_prompt ({n}), "
                f"got {self.batch_size}: a step trains whole prompts",
                "workload.batch_size",
            )
        for name in ("steps", "screen_steps", "trials", "batch"):
            integer(f"search.{name}", getattr(self, name), 1, MAX_POOL_TASKS)
        # each rung keeps 1 / reduction of the last: at 1 no rung is ever cut and the rung lengths
        # never grow (rung_steps looped forever)
        integer("search.reduction", self.reduction, 2, MAX_POOL_TASKS)
        # (seeds has its own range, said whole: [1, 268435456] for seeds = 0 hid the limit of 100)
        # every full run is repeated on each seed: 100 already gives a mean's interval to a tenth of
        # the runs' spread, and the paired test needs far fewer
        integer("search.seeds", self.seeds, 1, MAX_SEEDS)
        for name in ("grid_limit", "min_full"):
            integer(f"search.{name}", getattr(self, name), 0)
        integer("search.sim_seed", self.sim_seed, 0, MAX_SIM_SEED - SEED_SPAN * self.seeds)
        if self.max_model_len is not None:
            integer("model.max_model_len", self.max_model_len, 1, MAX_TOKENS)
        # the engine's own bound (EngineConfig): each sequence is a Python object
        integer("model.max_num_seqs", self.max_num_seqs, 1, MAX_SLOTS)
        number("model.gpu_memory_utilization", self.gpu_memory_utilization, hi=1, above=0, what=" in (0, 1]")
        # below the trainer's floor a step's seconds are no time: refused here as the key, not
        # later as "cannot be trained on the whole cluster" (TrainerConfig's MIN_EFFICIENCY)
        number("model.mfu", self.mfu, MIN_EFFICIENCY, 1)
        if not isinstance(self.share_group_prefix, bool):
            raise PlanError(
                f"model.share_group_prefix must be true or false, got {shown(self.share_group_prefix)}",
                "model.share_group_prefix",
            )
        # seconds of one sync or load: up to a week, the longest time a step may take (a longer
        # one is a unit slip, and 1e308 overflowed the simulated clock mid-run, naming no key)
        optional_number("search.sync_time_s", self.sync_time_s, 0, MAX_STEP_TIME_S)
        number("search.inflight_load_time_s", self.inflight_load_time_s, 0, MAX_STEP_TIME_S)
        number("sync_scale", self.sync_scale, above=0)
        number("calibration.values.step_overhead_s", self.step_overhead_s, 0)
        optional_number("calibration.values.iteration_overhead_s", self.iteration_overhead_s, 0)
        if self.framework is not None and not isinstance(self.framework, FrameworkProfile):
            msg = f"model.framework must be a profile, got {shown(self.framework)}"
            raise PlanError(msg, "model.framework")
        if not isinstance(self.method, str) or self.method not in METHODS:
            hint = did_you_mean(self.method, METHODS)
            msg = f"search.method must be auto, grid, slices or optuna, got {shown(self.method)}{hint}"
            raise PlanError(msg, "search.method")
        # a budget at most 2**53 (past every batch it is no cap): 1e308 read as an int overflowed
        # the trainer's float arithmetic mid-run, as a clock overflow naming no key
        for name in ("ppo_mini_batch_samples", "micro_batch_tokens", "log_prob_micro_batch_tokens"):
            if getattr(self, name) is not None:
                integer(f"model.{name}", getattr(self, name), 1, MAX_BUDGET)
        integer("model.sequence_parallel", self.sequence_parallel, 1, MAX_GPUS)
        try:  # the trainer's split of the model (tp, pp, Ulysses), what Megatron and verl refuse
            check_layout(self.model, self.framework, self.sequence_parallel)
        except FieldError as e:
            said = (
                f"model.framework: {str(e).removeprefix('profile: ')}"
                if e.field == "profile"
                else f"model.{e}"
            )
            raise PlanError(
                said, "model.framework" if e.field == "profile" else "model.sequence_parallel"
            ) from None
        mini = self.ppo_mini_batch_samples
        if mini is not None and mini > self.batch_size:  # verl: train_batch_size >= ppo_mini_batch_size
            raise PlanError(
                f"model.ppo_mini_batch_samples ({mini:,}) exceeds the batch ({self.batch_size:,} samples), "
                "which verl refuses (a mini-batch is a part of the step's batch)",
                "model.ppo_mini_batch_samples",
            )
        longest = self.workload.max_sequence_tokens
        for name in ("micro_batch_tokens", "log_prob_micro_batch_tokens"):
            budget = getattr(self, name)
            if budget is not None and budget * self.sequence_parallel < longest:
                # verl: seqlen_balancing.rearrange_micro_batches asserts max_token_len >= the sequence length
                msg = (
                    f"model.{name} ({budget:,}) x model.sequence_parallel ({self.sequence_parallel}) is "
                    f"below the longest sample ({longest:,} tokens: prompt and responses), which verl "
                    f"refuses (a micro-batch holds at least one whole sample); raise it to at least "
                    f"{-(-longest // self.sequence_parallel):,}"
                )
                raise PlanError(msg, f"model.{name}")
        if self.balance is not None and self.balance not in BALANCES:
            hint = did_you_mean(str(self.balance), BALANCES)
            msg = f"model.balance must be one of {', '.join(BALANCES)}, got {shown(self.balance)}{hint}"
            raise PlanError(msg, "model.balance")
        if self.baseline is not None:
            check_baseline(self.baseline, self.n_gpus)
        if self.env_workers is not None:
            integer("cluster.env_workers", self.env_workers, 1, MAX_GPUS * 1024)
        if self.episodes_per_replica is not None:  # the run spec's bounds (runspec_checks.read_engine)
            integer("model.episodes_per_replica", self.episodes_per_replica, 1, MAX_SLOTS)
        if self.tool_kv not in ("keep", "drop"):
            hint = did_you_mean(str(self.tool_kv), ("keep", "drop"))
            msg = f"model.tool_kv must be 'keep' or 'drop', got {shown(self.tool_kv)}{hint}"
            raise PlanError(msg, "model.tool_kv")
        for name in ("weight_dtype", "kv_dtype"):  # the engine's storage types (DTYPE_BYTES)
            v = getattr(self, name)
            if not isinstance(v, str) or v.lower() not in DTYPE_BYTES:
                hint = did_you_mean(str(v), DTYPE_BYTES)
                msg = f"model.{name} must be one of {', '.join(DTYPE_BYTES)}, got {shown(v)}{hint}"
                raise PlanError(msg, f"model.{name}")
        optional_number("cluster.cost_per_gpu_hour", self.cost_per_gpu_hour, 0)
        if self.constraints.cost_per_mtok is not None and self.cost_per_gpu_hour is None:
            raise PlanError(
                "constraints.cost_per_mtok needs cluster.cost_per_gpu_hour (the price of a GPU-hour)",
                "cluster.cost_per_gpu_hour",
            )
        if not isinstance(self.first_cut, bool):
            raise PlanError(
                f"search.first_cut must be true or false, got {shown(self.first_cut)}", "search.first_cut"
            )
        self._check_least_pool()
        if self.screen_steps > self.steps:
            msg = f"search.screen_steps ({self.screen_steps}) exceeds search.steps ({self.steps})"
            raise PlanError(msg, "search.screen_steps")

    def _check_least_pool(self) -> None:
        """PlanError naming ``search.steps`` where even the least pool any design draws passes
        :data:`MAX_POOL_TASKS` (``model.max_num_seqs`` is bounded on its own, as the engine bounds it).

        The least pool is :func:`pipesim.plan.pools.pool_tasks` at its smallest: eta 0, no
        oversampling, one engine replica, ``(steps + 1) x batch + max_num_seqs``. It holds for a
        plan spec and a run spec's alike, whatever the space or the design, so the message states
        that sum and nothing of a space (a run spec has none). It is coarse: every run's pool is
        held to :data:`~pipesim.core.errors.MAX_DURATION_POOL` where the design is known
        (:func:`~pipesim.plan.pools.check_pool`, :func:`~pipesim.plan.build.check_plan_pool`,
        :func:`~pipesim.plan.build.check_run_pool`); this refuses at load what no design runs.
        Before, it took the space's largest eta and oversampling and every GPU as a replica: a run
        spec was told of its default space (``oversample 1.25 x 3``), a limit of 268,435,456, and
        ``max_num_seqs x n_gpus`` as twice that product."""
        least = (self.steps + 1) * self.batch_size + self.max_num_seqs
        if least > MAX_POOL_TASKS:
            raise PlanError(
                f"search.steps ({self.steps:,}): a run draws at least (steps + 1) x batch + one engine "
                f"replica's sequences, (search.steps {self.steps:,} + 1) x batch {self.batch_size:,} + "
                f"model.max_num_seqs {self.max_num_seqs:,} = {least:,} tasks, more than the "
                f"{MAX_DURATION_POOL:,} a run's task pool may hold; fewer steps or a smaller batch "
                "(workload.prompts_per_step x workload.samples_per_prompt)",
                "search.steps",
            )

    def with_(self, **changes: Any) -> PlanSpec:
        return replace(self, **changes)

    @property
    def has_groups(self) -> bool:
        return self.workload.samples_per_prompt > 1
