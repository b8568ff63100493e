"""The hardware and model layer of a compute-grounded engine: pure data and small pure functions.

* :mod:`pipesim.compute.gpus` -- :class:`GPUSpec` and the datasheet catalog :data:`GPUS`;
* :mod:`pipesim.compute.models` -- :class:`ModelSpec` (shapes, parameter and byte counts,
  ``from_hf_config``);
* :mod:`pipesim.compute.catalog` -- :data:`MODELS`, the shipped specs;
* :mod:`pipesim.compute.roofline` -- :class:`Efficiency` and kernel times from a roofline, checked
  against Vidur's H100 measurements;
* the compute engine (``docs/compute.md``): :mod:`~pipesim.compute.cost` (:class:`EngineConfig`,
  :class:`ReplicaCost`), :mod:`~pipesim.compute.engine` (:class:`ComputeReplica`, continuous
  batching on a fluid token clock, in three layers: :mod:`~pipesim.compute.batch`,
  :mod:`~pipesim.compute.driver` and the port), :mod:`~pipesim.compute.series` (a replica over
  time, verl's step metrics), :mod:`~pipesim.compute.workload` (:class:`TokenWorkload`, length
  models), :mod:`~pipesim.compute.source` (:class:`TokenSource`), :mod:`~pipesim.compute.trainer` (a step
  in the phases of :mod:`~pipesim.compute.phases`, its collectives in
  :mod:`~pipesim.compute.phasecomm`, profiles in :mod:`~pipesim.compute.profiles`,
  fitted by :mod:`~pipesim.compute.phasefit`), :mod:`~pipesim.compute.sync` (the weight sync),
  :mod:`~pipesim.compute.ledger`, :mod:`~pipesim.compute.cluster` (:class:`Cluster`,
  :func:`run_compute`) and :mod:`~pipesim.compute.closedloop`. The modules that need the kernel
  are imported on first use, so ``import pipesim`` does not load them.

The compiled build (``setup.py``, ``make fast``) turns the engine's hot modules into C with mypyc;
:func:`is_compiled` says whether this import runs it.

Nothing here imports ``torch`` or ``transformers``.
"""

from __future__ import annotations

from types import ModuleType

from pipesim.compute.catalog import HF_CONFIGS, MODELS, model
from pipesim.compute.cost import KV_POLICIES, EngineConfig, ReplicaCost
from pipesim.compute.gpus import GPUS, GPUSpec, gpu
from pipesim.compute.ledger import TokenLedger, token_ledger
from pipesim.compute.lengths import LENGTHS, LengthSpec, length_spec
from pipesim.compute.models import DTYPE_BYTES, ModelSpec, dtype_bytes
from pipesim.compute.phasefit import PhaseObservation, ProfileFit, fit_profile
from pipesim.compute.phases import PHASES, FrameworkProfile
from pipesim.compute.roofline import (
    DEFAULT_EFFICIENCY,
    Efficiency,
    decode_attention_time_s,
    experts_touched,
    gemm_time_s,
    kernel_time_s,
    linear_time_s,
    linear_times_s,
)
from pipesim.compute.source import TokenSource
from pipesim.compute.sync import SyncModel
from pipesim.compute.trainer import DEFAULT_TRAINER_MFU, ComputeTrainer, TrainerConfig
from pipesim.compute.trajectory import LengthPoint, LengthTrajectory
from pipesim.compute.workload import (
    AgentTurns,
    EmpiricalLengths,
    LengthModel,
    LogNormalLengths,
    TokenWorkload,
)
from pipesim.core.errors import shown

_LAZY = {
    "ComputeReplica": "pipesim.compute.engine",
    "Cluster": "pipesim.compute.cluster",
    "ComputeRun": "pipesim.compute.cluster",
    "Offload": "pipesim.compute.offload",
    "run_compute": "pipesim.compute.cluster",
    "ClosedLoop": "pipesim.compute.closedloop",
}


def is_compiled(module: ModuleType | None = None) -> bool:
    """Whether the compute engine runs as the compiled build (``setup.py``: its hot modules as C
    extensions, about twice as fast) rather than as pure Python; with ``module``, whether that
    module is a C extension."""
    import importlib.machinery

    from pipesim.compute import batch

    path = (batch if module is None else module).__file__
    return str(path).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipesim.compute' has no attribute {shown(name)}")


__all__ = [
    "DEFAULT_EFFICIENCY",
    "DEFAULT_TRAINER_MFU",
    "AgentTurns",
    "KV_POLICIES",
    "ClosedLoop",
    "Cluster",
    "ComputeReplica",
    "ComputeRun",
    "ComputeTrainer",
    "FrameworkProfile",
    "PHASES",
    "PhaseObservation",
    "ProfileFit",
    "SyncModel",
    "fit_profile",
    "EmpiricalLengths",
    "EngineConfig",
    "LENGTHS",
    "LengthModel",
    "LengthPoint",
    "LengthSpec",
    "LengthTrajectory",
    "length_spec",
    "LogNormalLengths",
    "Offload",
    "ReplicaCost",
    "TokenLedger",
    "TokenSource",
    "TokenWorkload",
    "TrainerConfig",
    "run_compute",
    "token_ledger",
    "DTYPE_BYTES",
    "GPUS",
    "HF_CONFIGS",
    "MODELS",
    "Efficiency",
    "GPUSpec",
    "ModelSpec",
    "decode_attention_time_s",
    "dtype_bytes",
    "experts_touched",
    "gemm_time_s",
    "gpu",
    "kernel_time_s",
    "linear_time_s",
    "linear_times_s",
    "is_compiled",
    "model",
]
