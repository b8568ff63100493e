"""Weight sync in three parts: the trainer's gather, the bucketed transfer, and the engine's load.

A sync moves the ``W`` bytes of the bf16 weights from the trainer's layout to the engines'::

    sync_s = fixed_s + gather_s + transfer_s (+) load_s + n_buckets x bucket_latency_s

* **gather** (trainer side). FSDP keeps every parameter sharded over the ``G`` trainer GPUs; verl
  materialises each as a full tensor (``DTensor.full_tensor()``, an all-gather) before handing it
  over, so each GPU receives ``W (G - 1) / G`` bytes. Megatron keeps whole layers per pipeline
  stage, splits the routed experts' bytes ``W_e`` over tensor and expert parallelism and the rest,
  ``W - W_e``, over tensor parallelism alone (replicated over ``ep``); converting to the Hugging
  Face layout all-gathers each stage's ``(W - W_e) / pp`` over its ``tp`` ranks and ``W_e / pp``
  over its ``tp x ep`` ranks (stages in parallel).
* **transfer** (disaggregated only). The gathered buckets (``bucket_bytes``: verl's
  ``checkpoint_engine.device_buffer_size_M``, 4096 MB by default) are broadcast from
  ``sources`` trainer ranks to every rollout GPU, pipelined bucket by bucket: ``W / sources``
  bytes leave through one link and each rollout GPU takes ``W`` (``W / engine tp`` when
  ``per_shard``: each rank receives only its shard). Colocated engines take the gathered tensors
  in place (CUDA IPC): no transfer.
* **load** (engine side): vLLM's ``load_weights`` copies the engine's shard into its parameters,
  ``weights per GPU / (HBM bandwidth x load_efficiency)``; summed with the transfer, or
  overlapped with it (``overlap_load``: verl's ``overlap_broadcast_and_consume``, off by default).

Links: NVLink (one direction) within a node of :data:`~pipesim.compute.phases.GPUS_PER_NODE`
GPUs, the per-GPU network beyond; both at ``link_efficiency``.

**Set from one published sync time** (:data:`CALIBRATION`): verl's checkpoint-engine ablation
(``verl/experimental/fully_async_policy/README.md``, "checkpoint-engine Ablation Experiment": H20,
Megatron trainer, default checkpoint-engine settings), the Qwen3-30B-A3B row, 16 trainer and 16
rollout GPUs, checkpoint engine on: 4.38 s. It sets ``link_efficiency`` alone (closed form, with
the Megatron-MoE layout tp 1, ep 8 and the engine at tp 4, both assumed: the README does not
state them); the other rows are scored in ``docs/compute.md``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.compute.phases import GPUS_PER_NODE, expert_params, link_bytes_per_s
from pipesim.compute.roofline import check_gpu_rates
from pipesim.core.errors import FieldError, check_int, check_number, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.gpus import GPUSpec
    from pipesim.compute.phases import FrameworkProfile

DEFAULT_BUCKET_BYTES = 4096 * 2**20
"""verl's ``checkpoint_engine.device_buffer_size_M`` default, 4096 MB."""

CALIBRATION = "volcengine/verl fully_async_policy README, checkpoint-engine ablation, Qwen3-30B-A3B 16:16, on"
CALIBRATION_SECONDS = 4.38


@dataclass(frozen=True, kw_only=True)
class SyncModel:
    """The constants of a weight sync (see the module docstring); ``link_efficiency`` None: calibrated."""

    bucket_bytes: float = DEFAULT_BUCKET_BYTES
    bucket_latency_s: float = 0.0
    """Fixed seconds per bucket (a round prior of 0: the calibration absorbs it)."""
    link_efficiency: float | None = None
    """Share of a link's bandwidth the gather and the broadcast reach; None: :func:`calibrated`."""
    load_efficiency: float = 0.5
    """Share of HBM bandwidth the engine's weight load reaches (a stated prior)."""
    overlap_load: bool = False
    per_shard: bool = False
    sources: int | None = None
    """Trainer ranks sending in parallel; None: the pipeline stages (1 for FSDP)."""
    fixed_s: float = 0.0

    def __post_init__(self) -> None:
        # at least a byte: 1e-300 made the bucket count infinite (a bare OverflowError from ceil)
        check_number("bucket_bytes", self.bucket_bytes, 1.0)
        for name in ("bucket_latency_s", "fixed_s"):
            check_number(name, getattr(self, name), 0.0)
        for name in ("link_efficiency", "load_efficiency"):
            value = getattr(self, name)
            if value is None and name == "link_efficiency":
                continue
            check_number(name, value, 0.0, strict=True)
            if value > 1:
                raise refuse(name, f"must be in (0, 1], got {shown(value)}")
        for name in ("overlap_load", "per_shard"):
            if not isinstance(getattr(self, name), bool):
                raise refuse(name, f"must be a bool, got {shown(getattr(self, name))}")
        if self.sources is not None:
            check_int("sources", self.sources, 1)

    @property
    def efficiency(self) -> float:
        return calibrated_link_efficiency() if self.link_efficiency is None else self.link_efficiency

    def parts_s(
        self, engine: EngineConfig, prof: FrameworkProfile, trainer_gpus: int, colocated: bool, n_gpus: int
    ) -> dict[str, float]:
        """Seconds of ``gather``, ``transfer``, ``load`` and ``fixed`` (buckets included) of one sync
        from a trainer of profile ``prof`` on ``trainer_gpus`` GPUs to the engines of a cluster of
        ``n_gpus`` GPUs."""
        gpu, eff = engine.gpu, self.efficiency
        check_gpu_rates(gpu, ("hbm_bandwidth_bytes_per_s",))  # the load's; each link's as it is crossed
        w = engine.model.weight_bytes("bf16")
        g = trainer_gpus
        if prof.backend == "fsdp":
            gather = w * (g - 1) / g / (_link(gpu, g) * eff) if g > 1 else 0.0
        else:  # each part over the ranks that split it: the routed experts over tp x ep, the rest over tp
            w_e = w * expert_params(engine.model) / engine.model.n_params if prof.ep > 1 else 0.0
            gather = 0.0
            for part, k in ((w - w_e, prof.tp), (w_e, prof.tp * prof.ep)):
                if k > 1:
                    gather += part / prof.pp * (k - 1) / k / (_link(gpu, k) * eff)
        buckets = math.ceil(w / self.bucket_bytes)
        if colocated:
            transfer = 0.0
        else:
            sources = prof.pp if self.sources is None else self.sources
            receive = w / engine.tp if self.per_shard else w
            link = _link(gpu, n_gpus)
            transfer = max(w / sources, receive) / (link * eff)
        load = engine.weight_bytes_per_gpu / (gpu.hbm_bandwidth_bytes_per_s * self.load_efficiency)
        return {
            "gather": gather,
            "transfer": transfer,
            "load": load,
            "fixed": self.fixed_s + buckets * self.bucket_latency_s,
        }

    def sync_time_s(
        self, engine: EngineConfig, prof: FrameworkProfile, trainer_gpus: int, colocated: bool, n_gpus: int
    ) -> float:
        """Seconds of one sync (see the module docstring); ``ValueError`` naming the link at fault
        when a link of a few bytes a second makes it overflow."""
        p = self.parts_s(engine, prof, trainer_gpus, colocated, n_gpus)
        move = max(p["transfer"], p["load"]) if self.overlap_load else p["transfer"] + p["load"]
        seconds = p["fixed"] + p["gather"] + move
        if p["fixed"] == math.inf:  # a bucket count times a huge latency
            n = math.ceil(engine.model.weight_bytes("bf16") / self.bucket_bytes)
            raise FieldError(
                f"bucket_latency_s ({shown(self.bucket_latency_s)}) x {n:,} buckets of bucket_bytes "
                f"({shown(self.bucket_bytes)}) overflows a sync's seconds",
                "bucket_latency_s",
            )
        if not seconds < math.inf:
            gpu = engine.gpu
            span = trainer_gpus if colocated or p["gather"] == math.inf else n_gpus
            which = (
                "nvlink_bandwidth_bytes_per_s" if span <= GPUS_PER_NODE else "network_bandwidth_bytes_per_s"
            )
            if p["load"] == math.inf:
                which = "hbm_bandwidth_bytes_per_s"
            raise FieldError(
                f"GPUSpec {shown(gpu.name)}: {which} ({shown(getattr(gpu, which))}) makes the weight sync of "
                f"{engine.model.weight_bytes('bf16'):.3g} bytes overflow; pass sync_time_s to set it",
                f"gpu.{which}",
            )
        return seconds


def _link(gpu: GPUSpec, span: int) -> float:
    """:func:`~pipesim.compute.phases.link_bytes_per_s`, its link's rate first checked against
    :data:`~pipesim.compute.roofline.MIN_BANDWIDTH_BYTES_PER_S` (5e-324 halved to zero: a bare
    ``ZeroDivisionError``), naming ``gpu.`` the link's field."""
    which = "nvlink_bandwidth_bytes_per_s" if span <= GPUS_PER_NODE else "network_bandwidth_bytes_per_s"
    check_gpu_rates(gpu, (which,))
    return link_bytes_per_s(gpu, span)


@functools.cache
def calibrated_link_efficiency() -> float:
    """``link_efficiency`` from :data:`CALIBRATION` (closed form; see the module docstring)."""
    from pipesim.compute.catalog import MODELS
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.gpus import GPUS
    from pipesim.compute.profiles import profile

    model, gpu = MODELS["qwen3-30b-a3b"], GPUS["h20"]
    engine = EngineConfig(model=model, gpu=gpu, tp=4, max_model_len=4096)
    unit = SyncModel(link_efficiency=1.0)
    p = unit.parts_s(engine, profile("megatron-moe"), 16, colocated=False, n_gpus=32)
    load = engine.weight_bytes_per_gpu / (gpu.hbm_bandwidth_bytes_per_s * unit.load_efficiency)
    # at efficiency e: fixed + (gather + transfer) / e + load = the published seconds
    return (p["gather"] + p["transfer"]) / (CALIBRATION_SECONDS - p["fixed"] - load)
