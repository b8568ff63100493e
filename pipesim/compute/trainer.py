"""A compute-grounded trainer: a step's seconds from the tokens in its batch.

:class:`ComputeTrainer` implements :class:`pipesim.TrainerModel`. For a batch holding ``T`` tokens
(prompt, generated response and tool observations of every sample, from the
:class:`~pipesim.compute.workload.TokenSource` side table) of a model with ``N`` active
parameters, on ``n_gpus`` GPUs::

    flops = 6 N T                      # forward and backward
          + 2 N T   if recompute_old_logp   # the behaviour policy's log-probs (verl, PPO/GRPO)
          + 2 N T   if reference_model      # a KL reference forward
    train_time_s = flops / (n_gpus * bf16_flops_per_s * mfu) + step_overhead_s

Attention FLOPs (quadratic in the sequence length) are not counted; ``mfu`` absorbs them, as it
absorbs communication, recomputation of activations and load imbalance. The default MFU,
:data:`DEFAULT_TRAINER_MFU`, is a round figure inside what FSDP/Megatron RL trainers report
(30-45%), not a measurement: override it with what your cluster does.

Memory check: the weights, gradients and Adam state (``optimizer_bytes_per_param``, 16 bytes for
bf16 weights and gradients with fp32 master weights and two moments) are sharded over the trainer
GPUs (ZeRO-3 / FSDP); if they exceed the GPUs' HBM the config raises ``ValueError`` naming
``n_gpus``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.models import ModelSpec
from pipesim.core.errors import check_int, check_number, shown

if TYPE_CHECKING:
    from pipesim.compute.source import TokenSource
    from pipesim.core.episode import Episode

DEFAULT_TRAINER_MFU = 0.4
"""Model FLOP utilisation of a training step; a global default every config may override."""


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """The trainer: ``model`` trained on ``n_gpus`` GPUs of type ``gpu`` at ``mfu``."""

    model: ModelSpec
    gpu: GPUSpec
    n_gpus: int
    mfu: float = DEFAULT_TRAINER_MFU
    recompute_old_logp: bool = True
    reference_model: bool = False
    step_overhead_s: float = 0.0
    optimizer_bytes_per_param: float = 16.0

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise ValueError(f"model must be a pipesim.ModelSpec, got {shown(self.model)}")
        if not isinstance(self.gpu, GPUSpec):
            raise ValueError(f"gpu must be a pipesim.GPUSpec, got {shown(self.gpu)}")
        check_int("n_gpus", self.n_gpus, 1)
        if isinstance(self.mfu, bool) or not isinstance(self.mfu, int | float) or not 0 < self.mfu <= 1:
            raise ValueError(f"mfu must be in (0, 1], got {shown(self.mfu)}")
        for name in ("recompute_old_logp", "reference_model"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {shown(getattr(self, name))}")
        for name in ("step_overhead_s", "optimizer_bytes_per_param"):
            check_number(name, getattr(self, name), 0)
        need = self.model.n_params * self.optimizer_bytes_per_param / self.n_gpus
        if need > self.gpu.hbm_bytes:
            raise ValueError(
                f"n_gpus: training {self.model.name} needs {need / 2**30:.1f} GiB per GPU on {self.n_gpus} "
                f"GPUs, more than a {self.gpu.name}'s {self.gpu.hbm_bytes / 2**30:.0f} GiB; use more GPUs"
            )

    @functools.cached_property
    def flops_per_token(self) -> float:
        """Training FLOPs per token: forward and backward (6 per active parameter), plus 2 each
        for recomputing the old log-probs and for the reference model where configured. Computed
        once (a frozen config; every step reads it)."""
        n = self.model.n_active_params
        passes = 6.0 + 2.0 * self.recompute_old_logp + 2.0 * self.reference_model
        return passes * n

    def step_time_s(self, tokens: float) -> float:
        """Seconds of one step over ``tokens`` tokens."""
        peak = self.n_gpus * self.gpu.bf16_flops_per_s * self.mfu
        return self.flops_per_token * tokens / peak + self.step_overhead_s


class ComputeTrainer:
    """The :class:`pipesim.TrainerModel` of a :class:`TrainerConfig`, reading the side table.

    ``switch_s`` is added to every step: a colocated engine's offload and reload
    (:class:`pipesim.compute.cluster.Offload`), during which the engines stay paused as they are
    while the trainer trains. ``log`` holds ``(step, tokens, seconds)`` per step, ``seconds``
    being the training compute alone (the kernel's ``train_log`` spans compute and switch).
    """

    def __init__(self, config: TrainerConfig, source: TokenSource, switch_s: float = 0.0) -> None:
        if not isinstance(config, TrainerConfig):
            raise ValueError(f"config must be a TrainerConfig, got {shown(config)}")
        check_number("switch_s", switch_s, 0)
        self.config, self.source = config, source
        self.switch_s = float(switch_s)
        self.log: list[tuple[int, float, float]] = []

    def batch_tokens(self, batch: list[Episode]) -> float:
        return float(self.source.batch_tokens(batch))

    def train_time_s(self, step: int, batch: list[Episode]) -> float:
        tokens = self.batch_tokens(batch)
        seconds = self.config.step_time_s(tokens)
        self.log.append((step, tokens, seconds))
        return seconds + self.switch_s
