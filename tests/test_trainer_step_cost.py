"""What a balanced trainer step and the profiles' calibration cost (docs/performance.md, stop 62):
each does its work once, and gives what the public, checked path gives."""

from __future__ import annotations

import numpy as np
import pytest

import pipesim.compute.phases as phases_mod
import pipesim.compute.profiles as profiles_mod
from pipesim.compute import GPUS, MODELS, LogNormalLengths, TokenWorkload, TrainerConfig
from pipesim.compute.source import TokenSource
from pipesim.compute.trainer import ComputeTrainer
from pipesim.core.episode import Episode


def _source(n: int) -> TokenSource:
    work = TokenWorkload(response=LogNormalLengths(300.0, 0.8), prompt=100, max_response_tokens=2048)
    src = TokenSource(work, np.random.default_rng(3))
    for i in range(n):
        src.work_s(i, i, 0, -1)
    return src


@pytest.mark.parametrize("order", ["arrival", "submission", "shuffled"])
def test_a_balanced_step_reads_the_batch_once_and_matches_the_checked_phases(
    order: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = TrainerConfig(
        model=MODELS["qwen3-0.6b"],
        gpu=GPUS["h100-sxm"],
        n_gpus=8,
        ppo_mini_batch_samples=16,
        batch_order=order,
    )
    assert cfg.framework.balance != "exact"
    src = _source(64)
    batch = [Episode(i, i, 0, 0.0) for i in reversed(range(64))]
    expect_tokens = float(src.batch_tokens(batch))

    def no_second_pass(_batch: list[Episode]) -> int:
        raise AssertionError("the batch's tokens were summed in a second pass over the batch")

    monkeypatch.setattr(src, "batch_tokens", no_second_pass)
    tr = ComputeTrainer(cfg, src, switch_s=1.5)
    seconds = tr.train_time_s(7, batch)
    ((step, tokens, phases),) = tr.phase_log
    ((dealt_step, dealt),) = tr.dealt_log
    assert step == dealt_step == 7 and tokens == expect_tokens and sum(dealt) == expect_tokens
    # the same numbers, bit for bit, as the public method with its checks
    assert phases == cfg.phase_times_s(tokens, 64, list(dealt))
    assert tr.balanced_update_s == [cfg.phase_times_s(tokens, 64)["update_actor"]]
    assert seconds == sum(phases[p] for p in phases_mod.PHASES) + 1.5


def test_the_calibration_partitions_each_draw_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = phases_mod.phase_parts

    def counted(*args: object, **kw: object) -> dict[str, dict[str, float]]:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(phases_mod, "phase_parts", counted)
    got = profiles_mod.calibrated_fsdp2_dense()
    assert len(calls) == profiles_mod.CALIBRATION_DRAWS
    # and the profile is the registry's, unchanged
    assert got == profiles_mod.profiles()["fsdp2-dense"]


_DRAWN = [
    profiles_mod.calibration_workload(),
    # one sample a prompt: difficulty blocks are read mid-run, between response blocks
    TokenWorkload(
        response=LogNormalLengths(300.0, 2.0),
        prompt=7,
        max_response_tokens=50,
        samples_per_prompt=1,
        difficulty_sigma=0.7,
    ),
    TokenWorkload(
        response=LogNormalLengths(300.0, 0.5), prompt=7, max_response_tokens=5000, samples_per_prompt=3
    ),
    TokenWorkload(
        response=LogNormalLengths(0.3, 0.5),
        prompt=1,
        max_response_tokens=5000,
        samples_per_prompt=2,
        difficulty_sigma=3.0,
    ),
]


@pytest.mark.parametrize("workload", _DRAWN)
@pytest.mark.parametrize("samples", [0, 1, 17, 4095, 4096, 4097, 8192 + 5])
def test_drawing_in_blocks_gives_the_sources_samples_bit_for_bit(
    workload: TokenWorkload, samples: int
) -> None:
    for seed in (0, 3):
        fast = profiles_mod.drawn_sample_tokens(workload, samples, seed)
        assert fast == profiles_mod._drawn_by_source(workload, samples, seed)
        assert all(type(t) is int for t in fast)


def test_a_workload_the_blocks_do_not_cover_is_drawn_by_the_source() -> None:
    from pipesim.compute import AgentTurns

    agent = TokenWorkload(
        response=LogNormalLengths(64.0, 0.6), prompt=128, max_response_tokens=256, agent=AgentTurns(turns=3)
    )
    got = profiles_mod.drawn_sample_tokens(agent, 50, 1)
    assert got == profiles_mod._drawn_by_source(agent, 50, 1)
    assert min(got) >= 128 + 3  # the prompt and at least a token a turn
