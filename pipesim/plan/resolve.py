"""The GPU and the model a spec names: catalog names, Vidur's and the vendors' GPU spellings
(:data:`pipesim.compute.gpus.GPU_ALIASES`), Hugging Face ids (:data:`pipesim.compute.catalog.HF_IDS`);
each error names the key (``cluster.gpu``, ``model.name``) with the closest valid name."""

from __future__ import annotations

from pipesim.compute import GPUS, MODELS, GPUSpec, ModelSpec
from pipesim.core.errors import shown
from pipesim.plan.checks import PlanError, did_you_mean

__all__ = ["resolve_gpu", "resolve_model"]


def resolve_gpu(name: str | GPUSpec) -> GPUSpec:
    if isinstance(name, GPUSpec):
        return name
    from pipesim.compute.gpus import GPU_ALIASES, NOT_CATALOGUED, OWN_GPU, normalize_gpu_name

    key = normalize_gpu_name(str(name))
    if key not in GPUS:
        # a GPU often named that no entry stands in for: say why, and suggest none of them (the
        # closest spelling of 'h100-nvl' is 'h100', the substitution NOT_CATALOGUED explains is wrong)
        why = NOT_CATALOGUED.get(key)
        hint = f"; {why}" if why else did_you_mean(key, [*GPUS, *GPU_ALIASES])
        raise PlanError(
            f"cluster.gpu: unknown GPU {shown(name)}{hint} (choose from {sorted(GPUS)}, "
            "or Vidur's and the vendors' spellings such as 'h100', 'a100', 'NVIDIA H100 80GB HBM3'); "
            f"{OWN_GPU}",
            "cluster.gpu",
        )
    return GPUS[key]


def resolve_model(name: str | ModelSpec) -> ModelSpec:
    if isinstance(name, ModelSpec):
        return name
    from pipesim.compute.catalog import model_key

    key = model_key(str(name))
    if key not in MODELS:
        hint = did_you_mean(key, MODELS)
        raise PlanError(
            f"model.name: unknown model {shown(name)}{hint} (choose from {sorted(MODELS)}, their Hugging "
            "Face ids such as 'Qwen/Qwen3-8B', or a path to a config.json)",
            "model.name",
        )
    return MODELS[key]
