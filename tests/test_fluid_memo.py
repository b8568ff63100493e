"""The fluid ceiling is one value per (tp, trainer GPUs, synchronous or not): the first cut shares
one memo over a space of designs (767,200 for an n_gpus=6400 spec took 81 s, one ceiling a design),
and each design's ceiling must be what it is alone, exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pipesim.plan as plan
from pipesim.plan.fluid import ceiling

ROOT = Path(__file__).resolve().parent.parent


def test_a_shared_memo_gives_each_design_its_own_ceiling() -> None:
    spec = plan.load(ROOT / "examples" / "plan_qwen3_8b.toml")
    designs = plan.candidates(spec)
    memo: dict[Any, float] = {}
    shared = {d: ceiling(spec, d, memo) for d in designs}
    assert all(shared[d] == ceiling(spec, d, {}) for d in designs)
    keys = {(d.tp, d.trainer_gpus, d.eta == 0 and d.oversample <= 1) for d in designs}
    assert len(keys) < len(designs) / 5  # the memo pays: many designs a key
