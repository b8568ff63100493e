"""Eight modules over the style's ~400 lines were split: a cohesive piece of each moved to a module
of its own, and every name that moved is still importable from where it was, as the same object
(tests, users and ``monkeypatch.setattr(module, NAME)`` read it there), and the checks that
moved still refuse by field name through their old entry points."""

from __future__ import annotations

import importlib

import pytest

MOVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "pipesim.io.fit": ("pipesim.io.fit_qq", ("log_ticks", "model_quantiles", "qq_figure", "write_qq")),
    "pipesim.io.fit_readers": (
        "pipesim.io.fit_dropped",
        ("SHOWN_ROWS", "Dropped", "DroppedRow", "describe_dropped", "row_labels", "row_lines"),
    ),
    "pipesim.compute.profile": (
        "pipesim.compute.profile_stop",
        ("STOP_SIGNALS", "TooLarge", "stop_once"),
    ),
    "pipesim.io.cli_common": ("pipesim.io.cli_outputs", ("write_run_outputs",)),
    "pipesim.io.registry": ("pipesim.io.registry_entry", ("Entry", "PresetFile")),
    "pipesim.compute.measured": ("pipesim.compute.measured_gpu", ("caveats", "pick_gpu")),
}
# fit re-exports the readers' names, and so still gives the moved Dropped types
MOVED_TWICE = {"pipesim.io.fit": ("pipesim.io.fit_dropped", ("Dropped", "DroppedRow"))}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_moved_name_imports_from_its_old_module_as_the_same_object(old: str) -> None:
    for moves in (MOVED, MOVED_TWICE):
        if old not in moves:
            continue
        home, names = moves[old]
        was, now = importlib.import_module(old), importlib.import_module(home)
        for name in names:
            assert getattr(was, name) is getattr(now, name), f"{old}.{name}"


def test_the_moved_compute_checks_still_refuse_by_field_name() -> None:
    """run_compute's argument checks (pipesim.compute.run_inputs) and ModelSpec.from_hf_config's
    reader (pipesim.compute.models_hf) refuse through their old entry points, naming the field."""
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.models import ModelSpec
    from pipesim.compute.trainer import TrainerConfig
    from pipesim.compute.workload import TokenWorkload
    from pipesim.config import Scenario
    from pipesim.core.validate import FieldError

    with pytest.raises(FieldError) as info:
        run_compute("not a scenario", None, None)  # type: ignore[arg-type]
    assert info.value.field == "scenario"
    model, h100 = MODELS["qwen3-0.6b"], GPUS["h100-sxm"]
    cluster = Cluster(engine=EngineConfig(model=model, gpu=h100), n_gpus=2, trainer_gpus=1)
    wrong = TrainerConfig(model=model, gpu=h100, n_gpus=2)  # the placement trains on 1
    with pytest.raises(FieldError) as info:
        run_compute(Scenario(), cluster, TokenWorkload(), trainer=wrong)
    assert info.value.field == "trainer.n_gpus"
    with pytest.raises(FieldError) as info:
        ModelSpec.from_hf_config({"model_type": "gpt2"})
    assert info.value.field == "model_type"
