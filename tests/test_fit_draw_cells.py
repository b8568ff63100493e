"""``pipesim fit``'s agent model draws :data:`AGENT_DRAWS` episodes of the fit, fewer where a base
model's ``max_turns`` would pass the cells one draw may hold (``MAX_WHOLE_DRAW_CELLS``): a base of
4,000 turns was refused naming ``n``, an argument a fit user never gives, once draws were bounded."""

from __future__ import annotations

import numpy as np
import pytest

import pipesim.io.fit_models as fm
from pipesim.workload.durations import MAX_WHOLE_DRAW_CELLS, AgentDurations


@pytest.mark.parametrize("max_turns", [1, 40, 3355, 3356, 4000, 65536])
def test_the_fit_draws_what_one_draw_may_hold(max_turns: int) -> None:
    n = fm.agent_draws(AgentDurations(max_turns=max_turns, mean_turns=1.5, draws="numpy"))
    assert 1 <= n <= fm.AGENT_DRAWS and n * max_turns <= MAX_WHOLE_DRAW_CELLS
    assert n == fm.AGENT_DRAWS or (n + 1) * max_turns > MAX_WHOLE_DRAW_CELLS  # no fewer than fit


def test_a_base_past_the_bound_fits_on_fewer_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fm, "MAX_WHOLE_DRAW_CELLS", 40 * 1_000)  # as if 40 turns were 3,355+
    x = np.random.default_rng(0).lognormal(np.log(60.0), 0.8, 300)
    fit = fm.fit_agent(x, AgentDurations(draws="numpy"))
    assert fit.how.startswith("1,000 draws of the fit")
    assert 1 <= fit.params["mean_turns"] <= 40
