"""The published systems' trainers and presets carry their sources' knobs (issue 41).

ROLL's RLVR claim runs ROLL's RLVR replay buffer (``systems.roll_rlvr``,
``pipesim.policies.roll.RollReplayBuffer``), not the agentic pipeline's ``GroupQueue``: batches take
prompt groups oldest start window first, waiting on that window's stragglers.

AReaL v0.3 trains with realhf's Megatron backend at data parallel 32 (async) or 64 (sync), tensor
and pipeline parallel 1, four PPO mini-batches, 30,720 tokens per micro-batch, the proximal
log-probs recomputed and no reference model (``scenarios/published/areal.py`` names the files).
The runs are recorded, not simulated: ``common.measure`` is replaced by a recorder.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipesim import run
from pipesim.compute.phases import phase_parts
from pipesim.compute.profiles import profile
from pipesim.core.validate import FieldError
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.roll import RollReplayBuffer
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants, check_promises
from pipesim.workload.durations import LogNormalDurations
from scenarios import systems
from scenarios.published import areal, common, roll

SMALL: dict[str, Any] = dict(n_slots=32, batch_size=8, train_time_s=20.0, sync_time_s=8.0, steps=8)
TAIL = LogNormalDurations(20.0, 1.0)
"""A heavy tail: long groups of an early window still run when later, short ones finish."""


@pytest.fixture
def areal_calls(monkeypatch):
    """Every AReaL run of the table (the sync run, the eta sweep), recorded: (scenario, trainer)."""
    calls: list[tuple[Any, Any]] = []
    placeholder = common.PLACEHOLDER

    def fake(scenario, cluster, workload, trainer, warmup, seed=0):
        calls.append((scenario, trainer))
        return placeholder

    monkeypatch.setattr(common, "measure", fake)
    areal.areal_run.cache_clear()
    areal.areal_sync()
    for eta in areal.AREAL_TREND_ETAS:
        areal.areal_run(eta)
    areal.areal_run.cache_clear()
    return calls


def test_areal_trainer_is_realhf_megatron_at_its_stated_knobs(areal_calls):
    assert len(areal_calls) == 1 + len(areal.AREAL_TREND_ETAS)
    megatron = profile("megatron-dense")
    for sc, tr in areal_calls:
        prof = tr.framework
        # the registry's megatron-dense by name, constants untouched, at d{dp}p1m1
        assert prof.name == "megatron-dense" and prof.backend == "megatron"
        assert (prof.tp, prof.pp) == (1, 1)
        assert (prof.fwd_bwd_efficiency, prof.fwd_efficiency) == (
            megatron.fwd_bwd_efficiency,
            megatron.fwd_efficiency,
        )
        assert (prof.micro_batch_s, prof.optimizer_step_s) == (
            megatron.micro_batch_s,
            megatron.optimizer_step_s,
        )
        batch = sc.pipeline.batch_size
        assert batch == 512 * 16
        assert tr.ppo_mini_batch_samples * 4 == batch  # ppo.ppo_n_minibatches=4
        assert tr.micro_batch_tokens == 30720  # actor_train.mb_spec.max_tokens_per_mb
        assert tr.recompute_old_logp and not tr.reference_model  # decoupled PPO; kl_ctl 0
        sync = tr.n_gpus == areal.AREAL_SYNC_TRAIN_GPUS
        # actor_inf: realhf's default MicroBatchSpec in the sync runner, 30720 in async-ppo.yaml
        assert tr.log_prob_micro_batch_tokens == (10**12 if sync else 30720)
    assert {tr.n_gpus for _, tr in areal_calls} == {32, 64}


def test_areal_step_has_four_optimizer_steps_and_token_budgeted_micro_batches(areal_calls):
    """The phase split the knobs give: 4 optimizer steps a step whatever the GPUs; each rank's
    mini-batch in ceil(tokens / 30720) micro-batches; no per-micro-batch parameter gather (the
    Megatron distributed optimizer communicates once per optimizer step, so the exposed
    communication is the same for any token count)."""
    for sc, tr in areal_calls:
        samples = sc.pipeline.batch_size
        for tokens_per_sample in (2000.0, 6000.0):
            tokens = samples * tokens_per_sample
            parts = phase_parts(tr, tokens, samples)
            upd = parts["update_actor"]
            assert upd["opt"] == 4
            dp = tr.n_gpus
            per_rank_mini = tokens / 4 / dp
            assert upd["micro"] == 4 * math.ceil(per_rank_mini / 30720)
            assert parts["ref"]["compute_flop_s"] == 0.0
        comm = [phase_parts(tr, samples * t, samples)["update_actor"]["comm_s"] for t in (2000.0, 6000.0)]
        assert comm[0] == pytest.approx(comm[1])


def _windows_by_step(r: RunResult, n: int) -> dict[int, set[int]]:
    """Trained step -> the start windows of its groups (a group's window: the version under which
    its first sample started; task ids are start order, nothing is relaunched)."""
    first = {e.task_id: e.version for e in r.episodes}
    out: dict[int, set[int]] = {}
    for e in r.episodes:
        if e.trained_step >= 0:
            out.setdefault(e.trained_step, set()).add(first[(e.task_id // n) * n])
    return out


def _oldest_first(r: RunResult, n: int) -> bool:
    """No trained group of an older window is trained after one of a newer window."""
    seen = -1
    for _step, windows in sorted(_windows_by_step(r, n).items()):
        if min(windows) < seen:
            return False
        seen = max(seen, max(windows))
    return True


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("n", [1, 4])
def test_roll_rlvr_takes_windows_oldest_first_waiting_on_stragglers(ratio: int, n: int) -> None:
    """ItemsGroup.get_batch waits on the oldest window's running prompts: batches never take a newer
    window's group while an older one is still to be trained. The same supply taking groups in
    completion order (``systems.areal`` at eta = ratio) breaks this on the same runs: the rule
    can fail."""
    control_broke = False
    for seed in range(3):
        sc = systems.roll_rlvr(ratio, samples_per_prompt=n, seed=seed, **SMALL).with_(durations=TAIL)
        r = run(sc)
        check_invariants(r, sc)
        assert _oldest_first(r, n)
        assert (r.trained["staleness"] <= ratio).all() and r.trained["staleness"].max() > 0
        trained = [e for e in r.episodes if e.trained_step >= 0]
        assert len(trained) == SMALL["steps"] * SMALL["batch_size"]
        groups: dict[int, int] = {}
        for e in trained:
            groups[e.task_id // n] = groups.get(e.task_id // n, 0) + 1
        assert set(groups.values()) == {n}  # whole groups, each trained once
        # the supply: started - dropped < (v + 1 + r) B when each episode started
        gone = sorted(e.discarded_s for e in r.episodes if e.discarded_s is not None)
        for e in r.episodes:
            dropped = sum(t <= e.start_s for t in gone)
            assert e.id - dropped < (e.version + 1 + ratio) * SMALL["batch_size"]
        # the same supply rule taking groups in completion order (AReaL's) is not oldest first
        fifo = systems.areal(ratio, samples_per_prompt=n, seed=seed, **SMALL).with_(durations=TAIL)
        control_broke |= not _oldest_first(run(fifo), n)
    assert control_broke


def test_roll_rlvr_promises_change_nothing() -> None:
    for ratio, n in ((1, 1), (1, 4), (2, 4)):
        check_promises(systems.roll_rlvr(ratio, samples_per_prompt=n, **SMALL).with_(durations=TAIL))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: RollReplayBuffer(0), "ratio"),
        (lambda: RollReplayBuffer(1.5), "ratio"),  # type: ignore[arg-type]
        (lambda: RollReplayBuffer(1, 0), "samples_per_group"),
        (lambda: systems.roll_rlvr(0), "async_generation_ratio"),
        (lambda: systems.roll_rlvr(1, max_staleness=2), "max_staleness"),
    ],
)
def test_roll_rlvr_bad_input_names_the_field(make: Any, field: str) -> None:
    with pytest.raises(FieldError) as e:
        make()
    assert e.value.field == field


def test_published_roll_runs_the_rlvr_replay_buffer(monkeypatch) -> None:
    calls: list[Any] = []

    def fake(scenario, cluster, workload, trainer, warmup, seed=0):
        calls.append(scenario)
        return common.PLACEHOLDER

    monkeypatch.setattr(common, "measure", fake)
    roll.roll_run.cache_clear()
    roll.roll_run(True)
    roll.roll_run.cache_clear()
    (sc,) = calls
    assert isinstance(sc.admission, AReaLThrottle)
    assert sc.batching == RollReplayBuffer(roll.ROLL_RATIO, roll.ROLL_N)  # async_generation_ratio 1, n 8
    assert sc.pipeline.max_staleness == roll.ROLL_RATIO == 1


@pytest.mark.parametrize("ratio", roll.ROLL_DIAG_RATIOS)
def test_the_roll_diagnosis_runs_each_ratio_past_its_warm_up(monkeypatch, ratio: int) -> None:
    """The ROLL row's diagnosis (not scored) runs ROLL's RLVR buffer at each ratio; a rollout that
    may run ``ratio`` steps ahead is measured after ``1 + ratio`` steps (2 at the guide's 1, as the
    scored run always was), within the diagnosis's run length."""
    seen: list[tuple[Any, int]] = []

    def fake(scenario, cluster, workload, trainer, warmup, seed=0):
        seen.append((scenario, warmup))
        return common.PLACEHOLDER

    monkeypatch.setattr(common, "measure", fake)
    roll.roll_run.cache_clear()
    roll.roll_run(True, roll.ROLL_DIAG_STEPS, common.POINT, ratio)
    roll.roll_run.cache_clear()
    ((sc, warmup),) = seen
    assert sc.batching == RollReplayBuffer(ratio, roll.ROLL_N) and sc.pipeline.max_staleness == ratio
    assert warmup == 1 + ratio < roll.ROLL_DIAG_STEPS
