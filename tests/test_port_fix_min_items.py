"""A batch policy's ``min_items`` is a count: below 0 (or not an int) it is refused, naming the
policy and the method, as any other answer of the wrong type is (``pipesim.core.decisions``,
``pipesim.core.quiet``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim import EngineOptions, PipelineConfig, PipelineError, Scenario, run
from pipesim.core.engine import Pipeline


@dataclass(frozen=True)
class MinItems:
    n: object

    def min_items(self, p: Any) -> object:
        return self.n

    def select(self, buffer: list[Any], p: Any) -> Any:
        if len(buffer) < p.batch_size:
            return None, []
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        return batch, []


@pytest.mark.parametrize("n", [-1, np.int64(-3), 2.0], ids=["-1", "np-3", "float"])
@pytest.mark.parametrize("hints", [True, False])
def test_a_min_items_below_zero_or_not_an_int_is_refused_naming_the_policy(n: object, hints: bool) -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=8, batch_size=8, steps=4), batching=MinItems(n))  # type: ignore[arg-type]
    if not hints:  # the hint is not read at all: nothing to refuse
        Pipeline(sc, pipesim.draw_pool(sc).tolist(), options=EngineOptions(hints=False)).run()
        return
    with pytest.raises(PipelineError, match=r"MinItems\.min_items must return"):
        run(sc)


def test_a_min_items_of_zero_is_a_count() -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=8, batch_size=8, steps=4), batching=MinItems(0))  # type: ignore[arg-type]
    assert run(sc).summary()["episodes_trained"] == 32
