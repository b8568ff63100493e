"""The weight sync's parts as :mod:`pipesim.compute.sync`'s docstring states them: the overlapped
sync is the longer of transfer and load, and the transfer is bounded by whichever end is slower,
``max(W / sources, W received per rollout GPU)`` with ``W / engine tp`` received when per shard."""

from __future__ import annotations

import pytest

from pipesim.compute import GPUS, MODELS, EngineConfig
from pipesim.compute.profiles import profile
from pipesim.compute.sync import SyncModel

_ENGINE = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], tp=4, max_model_len=4096)
_PROF = profile("fsdp2-dense")  # one source by default (no pipeline stages)


def _parts(**kw: object) -> dict[str, float]:
    return SyncModel(link_efficiency=0.5, **kw).parts_s(_ENGINE, _PROF, 8, False, 16)  # type: ignore[arg-type]


@pytest.mark.parametrize("load_efficiency", [0.5, 1e-4])  # the transfer longer, then the load
def test_overlapped_sync_is_fixed_gather_and_the_longer_of_transfer_and_load(load_efficiency: float) -> None:
    for overlap in (False, True):
        m = SyncModel(
            link_efficiency=0.5, load_efficiency=load_efficiency, overlap_load=overlap, fixed_s=0.25
        )
        p = m.parts_s(_ENGINE, _PROF, 8, False, 16)
        assert p["transfer"] > 0 and p["load"] > 0 and p["transfer"] != p["load"]
        move = max(p["transfer"], p["load"]) if overlap else p["transfer"] + p["load"]
        got = m.sync_time_s(_ENGINE, _PROF, 8, False, 16)
        assert got == pytest.approx(p["fixed"] + p["gather"] + move, rel=1e-12)


def test_transfer_is_bounded_by_the_slower_end() -> None:
    base = _parts()["transfer"]
    assert base > 0
    # more sources alone: every rollout GPU still takes all W bytes
    assert _parts(sources=4)["transfer"] == pytest.approx(base, rel=1e-12)
    # per shard alone: one source still sends all W bytes
    assert _parts(per_shard=True)["transfer"] == pytest.approx(base, rel=1e-12)
    # both: the transfer is divided by min(sources, engine tp)
    for sources in (2, 4, 8):
        both = _parts(sources=sources, per_shard=True)["transfer"]
        assert both == pytest.approx(base / min(sources, _ENGINE.tp), rel=1e-12)
