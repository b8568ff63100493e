"""Numbers a mutation audit of ``pipesim/results`` and ``pipesim/workload`` found unguarded.

Each test passes on the current code and fails under one mutant of the audit (named in its
docstring, e.g. W13 = ``tokens_per_turn`` refused unless lo < hi). They are small: a few draws,
hand-built run results of two episodes, one straggler table.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pytest

from pipesim import (
    AgentDurations,
    ExponentialDurations,
    LogNormalDurations,
    PipelineConfig,
    Scenario,
    TraceDurations,
)
from pipesim.core.episode import TRAINED, Episode, UpdateRecord
from pipesim.core.validate import FieldError
from pipesim.results.run import RunResult
from pipesim.workload.durations import draw, straggler_ratios
from tests.test_refusals_core import check_refusal

# -- AgentDurations: draws ------------------------------------------------------------------------

NUMPY_AGENT_SEED0 = [
    109.89973450337574,
    46.81768377500612,
    13.285021330661047,
    6.185213415153556,
    166.20150357599672,
]


def test_numpy_agent_draws_of_a_seed_are_pinned() -> None:
    """W1 (turns from ``log(u)`` instead of ``log1p(-u)``), W3 (tool latencies drawn before the
    decode lengths): the first five of ``draw(AgentDurations(draws="numpy"), 5, 0)``.

    Golden numbers on purpose: a seed's exact draws are the promise (two designs run on one pool,
    a saved run redraws it). numpy's ``Generator`` streams (PCG64 ``random`` and the ziggurat
    ``standard_normal``) are the same on every platform; only the elementwise ``log1p``/``exp``
    may differ in the last ulp (SIMD paths), hence rel=1e-12 and not equality.
    """
    got = draw(AgentDurations(draws="numpy"), 5, 0).tolist()
    assert got == pytest.approx(NUMPY_AGENT_SEED0, rel=1e-12)


def test_an_agent_episode_is_the_sum_of_its_turns_bit_for_bit() -> None:
    """W26 (``sample`` as ``mean(-1) * max_turns``): ``sample`` is exactly the sum over turns of
    ``sample_turns``' decode + tool seconds, on both generators.

    Not a sha256 of the chapter's pool: its float32 bits depend on the CPU torch dispatches to
    (measured here with torch 2.13: ``ATEN_CPU_CAPABILITY=default`` gives another sha256 than
    avx2/avx512, which agree), and the chapter's JSON pins it only to 4 decimals, which the mutant
    keeps. Recomputing on the same machine with the same kernels is exact anywhere; the mutant's
    rounding of ``(s / 40) * 40`` differs from ``s`` in about one episode in ten (of 1,000: 104
    numpy, 101 torch).
    """
    model = AgentDurations(draws="numpy")
    decode, tool = model.sample_turns(1000, np.random.default_rng(3))
    total = model.sample(1000, np.random.default_rng(3))
    assert np.array_equal(total, (decode + tool).sum(-1))
    torch = pytest.importorskip("torch")
    chapter = AgentDurations()
    decode_t, tool_t = chapter.sample_turns(1000, torch.Generator().manual_seed(0))
    total_t = chapter.sample(1000, torch.Generator().manual_seed(0))
    assert total_t.dtype == torch.float32
    assert torch.equal(total_t, (decode_t + tool_t).sum(-1))


def test_equal_token_bounds_decode_a_fixed_length() -> None:
    """W13 (lo < hi required): ``tokens_per_turn=(300, 300)`` is a fixed length, taken; every turn
    taken decodes 300 tokens at 40 tok/s = 7.5 s."""
    model = AgentDurations(tokens_per_turn=(300, 300), max_turns=2, tool_sigma=0.0, draws="numpy")
    decode = model.sample_turns(3, np.random.default_rng(0))[0]
    taken = decode[decode != 0]
    assert len(taken) > 0
    assert (taken == 7.5).all(), decode


# -- AgentDurations: refusals ---------------------------------------------------------------------


def test_a_decode_past_float32_is_refused_for_the_chapters_draws() -> None:
    """W27 (the decode bound without its ``log(max_turns)``): 40 turns of 1e38 tokens at 1 tok/s
    is 4e39 s, past float32's 3.4e38 though one turn is not; refused naming tokens_per_turn. In
    float64 (draws="numpy") it fits and is taken."""

    def big(draws: Literal["chapter", "numpy"]) -> AgentDurations:
        return AgentDurations(
            tokens_per_turn=(0, 1e38), decode_rate_tok_s=1.0, tool_median_s=1.0, tool_sigma=0.0, draws=draws
        )

    check_refusal(lambda: big("chapter"), FieldError, "tokens_per_turn")
    assert big("numpy").max_turns == 40


def test_a_mean_of_one_turn_is_refused() -> None:
    """W12 (mean_turns >= 1 taken): a geometric mean of 1 turn has q = 0 and log(1 - 1/1) = -inf."""
    check_refusal(lambda: AgentDurations(mean_turns=1), FieldError, "mean_turns")
    check_refusal(lambda: AgentDurations(mean_turns=1, draws="numpy"), FieldError, "mean_turns")


def _models() -> list[tuple[str, Any, Any]]:
    rng = np.random.default_rng
    rows: list[tuple[str, Any, Any]] = [
        ("trace", TraceDurations.from_values([2.0, 7.0]), lambda: rng(0)),
        ("lognormal", LogNormalDurations(), lambda: rng(0)),
        ("exponential", ExponentialDurations(), lambda: rng(0)),
        ("agent-numpy", AgentDurations(draws="numpy"), lambda: rng(0)),
    ]
    try:
        import torch
    except ImportError:
        return rows
    rows.append(("agent-chapter", AgentDurations(), lambda: torch.Generator().manual_seed(0)))
    return rows


@pytest.mark.parametrize("n", [True, False], ids=["True", "False"])
@pytest.mark.parametrize(("model", "gen"), [r[1:] for r in _models()], ids=[r[0] for r in _models()])
def test_a_bool_count_is_refused_naming_n(model: Any, gen: Any, n: bool) -> None:
    """W11 (bool accepted as a count): ``sample(True)`` drew one duration and ``sample(False)``
    none; every model refuses either, naming n."""
    check_refusal(lambda: model.sample(n, gen()), FieldError, "n")


# -- straggler ratios -----------------------------------------------------------------------------


def test_straggler_ratio_divides_by_the_whole_pools_mean() -> None:
    """W15 (numpy path divided by the mean of the batched part only): durations 1..10 in batches
    of 4 use 1..8, whose batch maxima are 4 and 8 (mean 6); the pool's mean is 5.5: 12/11 (the
    mutant: 6 / 4.5). numpy and the chapter's torch path agree on a pool of 1,000, whose batches
    of 64 and 512 leave 40 and 488 out."""
    assert straggler_ratios(np.arange(1.0, 11.0), (4,)) == pytest.approx({4: 12 / 11}, rel=1e-15)
    torch = pytest.importorskip("torch")
    pool = LogNormalDurations().sample(1000, np.random.default_rng(7))
    by_numpy = straggler_ratios(pool)
    by_torch = straggler_ratios(torch.from_numpy(pool))  # float64 tensor: the torch path
    assert by_numpy == pytest.approx(by_torch, rel=1e-12)


# -- run results ----------------------------------------------------------------------------------


def _trained(i: int, replica: int, slot: int, end_s: float = 5.0) -> Episode:
    """Episode ``i`` generated under version 0 over [0, end_s), trained at step 0 into version 1,
    across update log entries [0, 1)."""
    e = Episode(i, i, end_s, 0, slot=slot, replica=replica)
    e.end_s, e.status, e.update_from, e.update_to = end_s, TRAINED, 0, 1
    e.trained_step, e.trained_version = 0, 1
    return e


def test_replica_ids_not_starting_at_zero_keep_their_own_updates() -> None:
    """R32 (the rows of replicas 1 and 2 not shifted to 0 and 1): episode 0 on replica 1 spans
    replica 1's update to version 1 (2 versions, 0 behind the newest); episode 1 on replica 2 saw
    no update (1 version, generated under 0 and trained into 1: 1 behind the newest)."""
    cfg = PipelineConfig(n_slots=3, batch_size=2, train_time_s=1.0, sync_time_s=1.0, max_staleness=1, steps=1)
    result = RunResult(
        Scenario(pipeline=cfg),
        10.0,
        [_trained(0, 1, 0), _trained(1, 2, 1)],
        [UpdateRecord(2.0, 3.0, 1, True, replica=1)],
        [(0, 6.0, 7.0, 1)],
        [],
    )
    t = result.trained.set_index("episode_id")
    assert t.loc[0, "versions_spanned"] == 2 and t.loc[0, "staleness_newest"] == 0
    assert t.loc[1, "versions_spanned"] == 1 and t.loc[1, "staleness_newest"] == 1


def test_a_double_booked_slot_reports_its_overshoot() -> None:
    """R14 (every busy share clamped to 1): two episodes of 10 s on the one slot of a 10 s run is
    a busy share of 2.0, left for the invariants to catch, not hidden as 1.0."""
    cfg = PipelineConfig(n_slots=1, batch_size=2, train_time_s=1.0, sync_time_s=1.0, max_staleness=1, steps=1)
    episodes = [_trained(0, 0, 0, 10.0), _trained(1, 0, 0, 10.0)]
    for e in episodes:
        e.update_to = 0  # no updates
    s = RunResult(Scenario(pipeline=cfg), 10.0, episodes, [], [(0, 9.0, 10.0, 1)], []).summary()
    assert s["gen_util"] == 2.0
    assert s["gen_util_total"] == 2.0
