""":func:`pipesim.plan.search.first_cut` on a stub evaluator with set ceilings: the floor is
``FLOOR_SHARE`` of the best feasible anchor, and an audited design disagrees when it reaches the
floor or beats its own ceiling (:mod:`pipesim.plan.fluid`'s docstring)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from pipesim.plan.design import Design
from pipesim.plan.fluid import FLOOR_SHARE
from tests.test_plan import small_spec

search_mod = importlib.import_module("pipesim.plan.search")  # the package re-exports a function of that name

_ANCHORS = {Design(trainer_gpus=0): 100.0, Design(trainer_gpus=1): 50.0}  # proved: their throughputs
# the others: (ceiling, screened throughput)
_OTHERS = {
    Design(trainer_gpus=2): (90.0, 85.0),  # ceiling above the floor: kept
    Design(trainer_gpus=3): (70.0, 50.0),  # ruled out, agrees
    Design(trainer_gpus=4): (60.0, 65.0),  # ruled out, beats its ceiling (under the floor): disagrees
    Design(trainer_gpus=5): (30.0, 20.0),  # ruled out, agrees
}


class _Ev:
    def evaluate(self, designs: list[Design], steps: int, n_seeds: int, desc: str = "") -> list[Any]:
        tp = {**_ANCHORS, **{d: v[1] for d, v in _OTHERS.items()}}
        return [SimpleNamespace(design=d, throughput=tp[d], feasible=True) for d in designs]


def test_floor_and_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    ceilings = {**dict.fromkeys(_ANCHORS, 1000.0), **{d: v[0] for d, v in _OTHERS.items()}}
    monkeypatch.setattr(search_mod, "ceiling", lambda spec, d, memo=None: ceilings[d])
    monkeypatch.setattr(search_mod, "proved", lambda spec, d: d in _ANCHORS)
    pool = [*_ANCHORS, *_OTHERS]
    kept, cut = search_mod.first_cut(small_spec(), _Ev(), pool, 2, 1, 0)  # type: ignore[arg-type]
    assert set(cut.anchors) == set(_ANCHORS)
    floor = FLOOR_SHARE * max(_ANCHORS.values())
    assert cut.floor == pytest.approx(floor)
    ruled = {d for d, (c, _) in _OTHERS.items() if c < floor}
    assert set(cut.ruled_out) == ruled and set(cut.audited) == ruled  # 3 ruled out: all audited
    beats = {d for d in ruled if _OTHERS[d][1] >= floor or _OTHERS[d][1] > _OTHERS[d][0]}
    assert beats == {Design(trainer_gpus=4)}
    assert set(cut.disagreed) == beats
    assert set(kept) == set(pool) - (ruled - beats)
