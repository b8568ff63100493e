"""System presets: each runs, keeps every invariant, and shows the behaviour that sets it apart."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pipesim import run
from pipesim.core.validate import FieldError
from pipesim.policies.systems import (
    OpenRLHFBatches,
    PipelineRLLag,
    RollGroupAdmission,
    RollGroupExpiry,
    SlimeAsyncWorker,
    VerlMessageQueue,
    VerlRollouter,
    roll_create_step,
    verl_put_accepted,
)
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants, check_promises
from pipesim.workload.durations import LogNormalDurations
from scenarios import systems
from tests.test_refusals_core import check_refusal

SMALL: dict[str, Any] = dict(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=8.0, steps=8)


def checked(sc: Any) -> RunResult:
    r = run(sc)
    check_invariants(r, sc)
    return r


@pytest.mark.parametrize("name", sorted(systems.PRESETS))
def test_every_preset_runs_and_keeps_the_invariants(name: str) -> None:
    sc = systems.PRESETS[name](**SMALL)
    assert sc.pipeline.n_slots == 16
    checked(sc)


def test_presets_document_their_keys() -> None:
    keys = {
        systems.areal: "max_head_offpolicyness",
        systems.verl_fully_async: "trigger_parameter_sync_step",
        systems.slime: "--partial-rollout",
        systems.openrlhf_async: "async_queue_size",
        systems.roll: "async_generation_ratio",
        systems.pipelinerl: "max_lag",
        systems.april: "over-sampling",
    }
    for fn, key in keys.items():
        assert key in (fn.__doc__ or ""), fn.__name__


def test_presets_cite_their_source() -> None:
    sources = {
        systems.verl_one_step_off_policy: ("volcengine/verl", "recipe/one_step_off_policy/ray_trainer.py"),
        systems.verl_fully_async: ("volcengine/verl", "fully_async_rollouter.py"),
        systems.areal: ("inclusionAI/AReaL", "areal/core/staleness_manager.py"),
        systems.slime: ("THUDM/slime", "slime/rollout/fully_async_rollout.py"),
        systems.openrlhf_async: ("OpenRLHF/OpenRLHF", "openrlhf/trainer/ppo_trainer_async.py"),
        systems.roll: ("alibaba/ROLL", "roll/distributed/scheduler/rollout_scheduler.py"),
        systems.pipelinerl: ("ServiceNow/PipelineRL", "pipelinerl/actor.py"),
        systems.april: ("RLsys-Foundation/APRIL", "slime/rollout/sglang_example.py"),
    }
    for fn, (repo, path) in sources.items():
        doc = " ".join((fn.__doc__ or "").split())
        assert repo in doc and path in doc, fn.__name__


def test_verl_one_step_off_policy_is_exactly_one_version_behind() -> None:
    r = checked(systems.verl_one_step_off_policy(**SMALL))
    tr = r.trained
    assert tr["staleness"].max() == 1 and (tr["versions_spanned"] == 1).all()
    # the first batch is generated before any step (fresh); every later one is one step behind
    assert (tr.loc[tr["step"] == 0, "staleness"] == 0).all()
    assert (tr.loc[tr["step"] >= 1, "staleness"] == 1).all()


@pytest.mark.parametrize("preset", [systems.verl_one_step_off_policy, systems.slime_drain])
@pytest.mark.parametrize("n_slots", [4, 16])
def test_one_step_presets_generate_whole_batches_after_the_sync(preset: Any, n_slots: int) -> None:
    """verl ``fit`` launches batch k + 1 after awaiting batch k and syncing; slime's train_async
    after rollout k returned and the update before it: no episode of batch k + 1 starts while one
    of batch k runs (CountThrottle would fill the stragglers' free slots), nor before the sync
    that follows the training of batch k - 1 ends."""
    r = checked(preset(**{**SMALL, "n_slots": n_slots}))
    eps = r.episode_table
    batch = eps["episode_id"] // 8
    first_start = eps.groupby(batch)["start_s"].min()
    last_end = eps.groupby(batch)["end_s"].max()
    synced = {u.version_after: u.end_s for u in r.updates if u.kind == "sync"}
    for k in range(1, int(batch.max()) + 1):
        assert first_start[k] >= last_end[k - 1]
        if k >= 2:  # weights v_(k-1) (batch k - 2 trained) reached the engines before batch k
            assert first_start[k] >= synced[k - 1]
    tr = r.trained  # one version per batch, even with fewer slots than the batch (BatchDrain)
    assert (tr.loc[tr["step"] == 0, "staleness"] == 0).all()
    assert (tr.loc[tr["step"] >= 1, "staleness"] == 1).all() and (tr["versions_spanned"] == 1).all()


def test_verl_fully_async_caps_samples_per_version_and_syncs_every_k() -> None:
    r = checked(systems.verl_fully_async(staleness_threshold=0.25, **SMALL))
    assert r.episode_table["version"].value_counts().max() <= int(1.25 * 8)
    k2 = checked(systems.verl_fully_async(trigger_parameter_sync_step=2, **SMALL))
    assert [u.version_after for u in k2.updates] == [2, 4, 6, 8]
    drain = checked(systems.verl_fully_async(partial_rollout=False, **SMALL))
    assert (drain.trained["versions_spanned"] == 1).all() and r.trained["versions_spanned"].max() > 1


VERL_BIG: dict[str, Any] = dict(n_slots=1024, batch_size=128, train_time_s=60.0, sync_time_s=2.0)


def verl_big(steps: int, **kw: Any) -> RunResult:
    sc = systems.verl_fully_async(0.5, steps=steps, **VERL_BIG, **kw)
    return checked(sc.with_(durations=LogNormalDurations(120.0, 1.0), pool_size=(steps + 4) * 128 + 1024))


def test_verl_counter_resets_to_work_in_flight_so_staleness_stays_bounded() -> None:
    """verl's update_param_version resets the counter to the work in flight and queued: when
    rollout outpaces training the backlog cannot grow (main's preset: mean staleness 1.34, 2.93
    and 6.39 after 10, 20 and 40 steps, 2,005 episodes buffered at the end)."""
    means = []
    for steps in (10, 20, 40):
        r = verl_big(steps)
        means.append(r.trained["staleness"].mean())
        assert sum(e.status == "buffered" for e in r.episodes) < 64  # a few dozen, not thousands
    assert all(0.25 < m < 0.75 for m in means), means  # near the threshold, not growing
    assert means[-1] < means[0] + 0.25


def test_verl_counter_formula_and_concurrency_cap() -> None:
    """At every start: started - dropped - V * B < int((1 + threshold) * k * B) with V the last
    parameter version, and at most min(max_concurrent_samples, that) samples in flight."""
    b, k, thr = 8, 2, 0.5
    r = checked(
        systems.verl_fully_async(thr, trigger_parameter_sync_step=k, max_concurrent_samples=10, **SMALL)
    )
    cap = int((1 + thr) * k * b)
    for e in r.episodes:  # no drops here; e.id = starts before it; version = the trainer's then
        param_version = (e.version // k) * k
        assert e.id - param_version * b < cap
    assert (
        max(sum(f.start_s <= e.start_s < (f.end_s or math.inf) for f in r.episodes) for e in r.episodes) <= 10
    )


def test_verl_stream_off_policy_and_on_policy_modes() -> None:
    """Threshold 0: k = 1 is synchronous; k > 1 streams exactly k * B samples per weight version,
    each trained at most k - 1 steps late, and partial_rollout changes nothing."""
    on = checked(systems.verl_fully_async(0.0, **SMALL))
    assert on.trained["staleness"].max() == 0
    k = 3
    runs = [
        checked(systems.verl_fully_async(0.0, k, partial, **SMALL, pool_size=500))
        for partial in (True, False)
    ]
    for r in runs:
        assert r.trained["staleness"].max() == k - 1 and (r.trained["versions_spanned"] == 1).all()
        per_param_version = r.episode_table["version"].floordiv(k).value_counts()
        assert (per_param_version.loc[per_param_version.index < 8 // k] == k * 8).all()
    assert [e.end_s for e in runs[0].episodes] == [e.end_s for e in runs[1].episodes]


def test_verl_require_batches_multiplies_the_step() -> None:
    a = systems.verl_fully_async(require_batches=2, **SMALL)
    assert a.pipeline.batch_size == 16
    rest = {k: v for k, v in SMALL.items() if k != "batch_size"}
    b = systems.verl_fully_async(ppo_mini_batch_size=4, require_batches=2, **rest)
    assert b.pipeline.batch_size == 8
    check_refusal(lambda: systems.verl_fully_async(ppo_mini_batch_size=4, **SMALL), FieldError, "batch_size")


def test_areal_reprefills_interrupted_rollouts_and_caps_concurrency() -> None:
    r = checked(systems.areal(max_head_offpolicyness=2, max_concurrent_rollouts=10, **SMALL))
    assert r.summary()["reprefill_tokens"] > 0
    assert (
        max(
            sum(e.start_s <= t < (e.end_s or math.inf) for e in r.episodes)
            for t in [e.start_s for e in r.episodes]
        )
        <= 10
    )


@pytest.mark.parametrize(("eta", "max_concurrent"), [(0, None), (1, None), (2, 10), (3, 5)])
def test_areal_admits_by_get_capacity(eta: int, max_concurrent: int | None) -> None:
    """StalenessManager.get_capacity: a rollout is submitted only while
    min(max_concurrent - running, (eta + v + 1) * B - (accepted + running)) > 0, and the bound is
    reached when concurrency allows it (no drops here, so accepted + running = started)."""
    r = checked(systems.areal(max_head_offpolicyness=eta, max_concurrent_rollouts=max_concurrent, **SMALL))
    cap = max_concurrent if max_concurrent is not None else 16
    for e in r.episodes:  # e.id = rollouts submitted before it; e.version = the version then
        assert e.id < (eta + e.version + 1) * 8
        assert sum(f.start_s <= e.start_s < (f.end_s or math.inf) for f in r.episodes) <= cap
    if max_concurrent is None:
        assert (r.episode_table["version"] == 0).sum() == min((eta + 1) * 8, len(r.episodes))


def test_slime_drain_never_mixes_versions_and_fully_async_resumes_with_a_reprefill() -> None:
    drain = checked(systems.slime("drain", **SMALL))
    assert (drain.trained["versions_spanned"] == 1).all() and drain.summary()["episodes_aborted"] == 0
    fa = checked(systems.slime("fully_async", **SMALL))
    s = fa.summary()
    # slime's fully async worker: aborted requests are resent with their partial response, so
    # nothing is lost, trajectories span versions, and each resumption re-prefills its prefix
    assert s["episodes_aborted"] == 0 and s["lost_work_s"] == 0 and s["reprefill_tokens"] > 0
    assert fa.trained["versions_spanned"].max() > 1
    check_refusal(lambda: systems.slime("sometimes"), FieldError, "mode")


def test_slime_fully_async_bounds_concurrency_and_the_queue_not_versions() -> None:
    """AsyncRolloutWorker._loop: top up while active < C and completed-but-unconsumed < C."""
    fast = dict(SMALL, train_time_s=200.0)  # training is slow: the queue fills
    r = checked(systems.slime("fully_async", max_concurrent=6, **fast))
    taken = {step: a for step, a, _, _ in r.train_log}
    for e in r.episodes:
        t = e.start_s
        running = sum(f.start_s < t < (f.end_s or math.inf) for f in r.episodes)
        queued = sum(
            (f.end_s or math.inf) <= t and not (f.trained_step >= 0 and taken[f.trained_step] <= t)
            for f in r.episodes
        )
        assert running < 6 and queued < 6
    assert r.trained["staleness"].max() >= 2  # no version bound


def test_openrlhf_queue_is_back_pressure() -> None:
    r = checked(systems.openrlhf_async(async_queue_size=1, **SMALL))
    taken = {step: a for step, a, _, _ in r.train_log}
    for e in r.episodes:  # at any start, episodes launched but not yet taken by the trainer <= one batch
        live = sum(
            f.start_s <= e.start_s and not (f.trained_step >= 0 and taken[f.trained_step] <= e.start_s)
            for f in r.episodes
        )
        assert live <= 8
    assert r.trained["staleness"].max() >= 1  # generation overlaps training


@pytest.mark.parametrize("queue_size", [1, 2])
def test_openrlhf_generates_whole_batches_one_at_a_time(queue_size: int) -> None:
    """GenerateSamplesActor.fit generates a whole prompt batch per call: batch k + 1 starts only
    once every episode of batch k has finished (main's QueueAhead streamed episode by episode)."""
    r = checked(systems.openrlhf_async(async_queue_size=queue_size, **{**SMALL, "n_slots": 32}))
    eps = r.episode_table
    batch = eps["episode_id"] // 8
    first_start = eps.groupby(batch)["start_s"].min()
    last_end = eps.groupby(batch)["end_s"].max()
    for k in range(1, int(batch.max()) + 1):
        assert first_start[k] >= last_end[k - 1]
    assert r.trained["versions_spanned"].max() == 1  # drained before each broadcast


def test_roll_ratio_bounds_episodes_per_version_and_zero_is_synchronous() -> None:
    r = checked(systems.roll(async_generation_ratio=1, **SMALL))
    for v in range(8):
        assert sum(e.version <= v for e in r.episodes) <= (v + 2) * 8
    assert r.trained["staleness"].max() > 0
    sync = checked(systems.roll(async_generation_ratio=0, **SMALL))
    assert sync.trained["staleness"].max() == 0
    # ROLL's advance_step needs an integer (range(async_generation_ratio))
    check_refusal(lambda: systems.roll(0.5), FieldError, "ratio")


@pytest.mark.parametrize("ratio", [1, 2])
def test_roll_expires_groups_older_than_the_ratio(ratio: int) -> None:
    """GroupQueue.advance_step drops groups created more than the ratio steps ago: no trained
    episode is staler than the ratio (main's preset never expired anything: 14-22% of its trained
    episodes exceeded the ratio on these runs)."""
    for seed in range(3):
        # the preset now follows GroupQueue.get's order (tests/test_roll_order.py); the
        # first-finished order with expiry stays available as RollGroupExpiry
        r = checked(systems.roll(ratio, seed=seed, **SMALL).with_(batching=RollGroupExpiry(ratio)))
        assert (r.trained["staleness"] <= ratio).all()
        assert r.summary()["episodes_discarded"] > 0  # the expired groups' rollouts were ignored
        for e in r.episodes:  # groups are not replaced: every start counts against the supply
            assert e.id < (e.version + 1 + ratio) * 8


def test_roll_create_step_follows_advance_step() -> None:
    # the first advance_step creates (1 + ratio) steps of groups at step 0, then one step each
    assert [roll_create_step(i, 4, 2) for i in range(0, 24, 4)] == [0, 0, 0, 1, 2, 3]
    assert [roll_create_step(i, 4, 0) for i in (0, 3, 4, 9)] == [0, 0, 1, 2]


def test_pipelinerl_never_pauses_beyond_its_load() -> None:
    r = checked(systems.pipelinerl(load_time_s=0.5, **SMALL))
    assert all(u.end_s - u.start_s <= 0.5 + 1e-9 for u in r.updates if u.paused)
    paused = sum(u.end_s - u.start_s for u in r.updates if u.paused)
    assert math.isclose(paused, 0.5 * 8)
    assert r.trained["versions_spanned"].max() > 1  # in-flight sequences mix versions


@pytest.mark.parametrize(("max_lag", "attempts"), [(0, 1), (8, 1), (12, 1), (16, 4), (5, 2)])
def test_pipelinerl_admits_by_its_formula(max_lag: int, attempts: int) -> None:
    """ActorLoop: submit while submitted groups < ceil(max_lag / attempts) + (v + 1) * groups per
    update, and the bound is reached (here B = 8 samples a step, one episode a rollout; a group
    counts when its first attempt starts)."""
    r = checked(systems.pipelinerl(max_lag=max_lag, attempts=attempts, **SMALL))
    limit, groups = math.ceil(max_lag / attempts), 8 // attempts
    eps = r.episode_table
    firsts = eps[eps["task_id"] % attempts == 0]
    assert (firsts["task_id"] // attempts < limit + (firsts["version"] + 1) * groups).all()
    assert (firsts["version"] == 0).sum() == limit + groups  # the bound is reached


def test_pipelinerl_max_lag_zero_is_synchronous_and_one_batch_runs_one_ahead() -> None:
    """max_lag = 0 is synchronous; max_lag = B lets one more batch run ahead (main's LagBound(B)
    was synchronous: one batch off)."""
    sync = checked(systems.pipelinerl(max_lag=0, **SMALL))
    assert sync.trained["staleness"].max() == 0
    one = checked(systems.pipelinerl(max_lag=8, **SMALL))
    assert one.trained["staleness"].max() >= 1
    assert (one.episode_table["version"] == 0).sum() == 16


def test_april_carries_over_or_aborts_the_extra_episodes() -> None:
    carry = checked(systems.april(oversample_factor=1.5, carry_over=True, **SMALL))
    abort = checked(systems.april(oversample_factor=1.5, carry_over=False, **SMALL))
    assert carry.summary()["episodes_aborted"] == 0 and carry.trained["staleness"].max() > 0
    sa = abort.summary()
    assert sa["episodes_aborted"] > 0 and sa["lost_work_s"] > 0
    assert sa["trained_duration_mean"] < sa["launched_duration_mean"]  # the first B to finish are short ones


def test_april_carried_rollouts_reprefill_their_prefix_and_wait_out_training() -> None:
    """APRIL's abort + resend of prompt + response: every carried-over rollout re-prefills what it
    had generated (main's preset paused and resumed it for free), and nothing generates while
    the trainer trains (slime's generate / train / update loop)."""
    r = checked(systems.april(oversample_factor=1.5, carry_over=True, **SMALL))
    tr = r.trained
    spanned = set(tr.loc[tr["versions_spanned"] > 1, "episode_id"])
    assert spanned and all(r.episodes[i].reprefill_tokens > 0 for i in spanned)
    assert all(r.episodes[i].reprefill_tokens == 0 for i in set(tr["episode_id"]) - spanned)
    assert r.summary()["reprefill_tokens"] > 0
    assert any(u.kind == "train" for u in r.updates)  # generation paused during training
    apart = checked(systems.april(carry_over=True, **{**SMALL, "colocated": False}))
    assert not any(u.kind == "train" for u in apart.updates)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: VerlRollouter(-0.1), "staleness_threshold"),
        (lambda: VerlRollouter(0.5, 0), "trigger_parameter_sync_step"),
        (lambda: VerlRollouter(0.5, 1, 0), "max_concurrent"),
        (lambda: RollGroupAdmission(-1), "ratio"),
        (lambda: RollGroupExpiry(1.5), "ratio"),  # type: ignore[arg-type]
        (lambda: PipelineRLLag(-1), "max_lag"),
        (lambda: PipelineRLLag(4, 0), "attempts"),
        (lambda: SlimeAsyncWorker(0), "max_concurrent"),
        (lambda: OpenRLHFBatches(0), "queue_size"),
        (lambda: VerlMessageQueue(0), "max_queue_size"),
        (lambda: VerlMessageQueue(None, -1.0), "staleness_threshold"),
    ],
)
def test_system_policies_validate_their_parameters(make: Any, field: str) -> None:
    check_refusal(make, FieldError, field)


def test_verl_max_required_samples_truncates_like_verl() -> None:
    assert VerlRollouter(0.5).max_required_samples(128) == 192
    assert VerlRollouter(0.25).max_required_samples(10) == 12  # int(12.5): truncated, not rounded up


def test_verl_partial_rollout_resends_and_reprefills_its_prefix() -> None:
    """verl's pause cancels the samples in flight and clears the KV cache; they are sent again as
    prompt + response (PartialSingleTurnAgentLoop.run), so every sample that spans a sync
    re-prefills (main's preset paused and resumed them for free, PartialRollout)."""
    r = checked(systems.verl_fully_async(0.5, **SMALL))
    tr = r.trained
    spanned = set(tr.loc[tr["versions_spanned"] > 1, "episode_id"])
    assert spanned and all(r.episodes[i].reprefill_tokens > 0 for i in spanned)
    assert all(r.episodes[i].reprefill_tokens == 0 for i in set(tr["episode_id"]) - spanned)
    drain = checked(systems.verl_fully_async(0.5, partial_rollout=False, **SMALL))
    assert drain.summary()["reprefill_tokens"] == 0


def test_verl_message_queue_evicts_the_oldest_sample_when_full() -> None:
    """MessageQueue.put_sample: a full deque pops its oldest sample. With a queue of one batch
    behind a slow trainer, samples are evicted, and each eviction takes the oldest finished:
    none of them finished after a sample that was queued beside it and later trained."""
    kw = {**SMALL, "train_time_s": 60.0}
    r = checked(systems.verl_fully_async(2.0, max_queue_size=8, **kw))
    evicted = [e for e in r.episodes if e.status == "discarded"]
    assert evicted and r.summary()["episodes_discarded"] == len(evicted)
    taken_at = {step: start for step, start, _, _ in r.train_log}
    ends = {e.id: e.end_s or 0.0 for e in r.episodes}
    trained = [e for e in r.episodes if e.status == "trained"]
    for d in evicted:
        t = d.discarded_s or 0.0
        beside = [e for e in trained if ends[e.id] <= t <= taken_at[e.trained_step]]
        assert all(ends[d.id] <= ends[e.id] for e in beside)
    # the default queue (verl's max_required_samples) never overflows: nothing is evicted
    assert checked(systems.verl_fully_async(2.0, **kw)).summary()["episodes_discarded"] == 0


def test_verl_put_freshness_check_and_it_never_fires_under_verls_sync_order() -> None:
    """put_sample drops a sample whose version lags the queue's by more than the threshold; the
    versions it compares are equal at every put under verl's sync (pause, queue version, weights,
    rollouter version, resume), so in the issue's scenario nothing is dropped and the counter
    alone bounds staleness."""
    assert verl_put_accepted(3, 3, 0.5) and not verl_put_accepted(4, 3, 0.5)
    assert not verl_put_accepted(1, 0, 0.0) and verl_put_accepted(2, 0, 3.0)
    r = verl_big(10)
    assert r.summary()["episodes_discarded"] == 0
    assert VerlMessageQueue().capacity(128) == VerlRollouter(0.5).max_required_samples(128) == 192
    assert VerlMessageQueue(None, 0.5, 4).capacity(128) == 768


def _trained_groups(r: RunResult, n: int) -> dict[tuple[int, int], int]:
    """(step, group) -> trained samples of that group in that step."""
    out: dict[tuple[int, int], int] = {}
    for e in r.episodes:
        if e.status == "trained":
            key = (e.trained_step, e.task_id // n)
            out[key] = out.get(key, 0) + 1
    return out


def test_april_trains_whole_groups_in_the_order_they_complete() -> None:
    """generate_rollout_async collects finished *groups*: each batch is B / n whole groups, the
    first to complete among those buffered; a group's finished samples wait for the rest of it
    (main's preset trained the first B samples, whatever their group)."""
    n = 4
    r = checked(systems.april(oversample_factor=2.0, samples_per_prompt=n, **SMALL))
    per_group = _trained_groups(r, n)
    assert per_group and set(per_group.values()) == {n}
    assert len({g for _, g in per_group}) == len(per_group)  # a group is trained in one step
    done: dict[int, float] = {}  # group -> when its last sample finished
    step_of: dict[int, int] = {}
    for e in r.episodes:
        if e.status == "trained":
            g = e.task_id // n
            done[g] = max(done.get(g, 0.0), e.end_s or 0.0)
            step_of[g] = e.trained_step
    for g, end in done.items():  # a group completed earlier is never trained later
        assert all(step_of[h] <= step_of[g] for h, other in done.items() if other < end)
    per_sample = checked(systems.april(oversample_factor=2.0, **SMALL))
    assert set(_trained_groups(per_sample, n).values()) != {n}  # the first B samples: mixed groups


def test_april_without_partial_rollout_drops_unfinished_groups_whole() -> None:
    """Without --partial-rollout abort collects nothing: an unfinished group is gone, finished
    samples and all, so none of its samples is ever trained and none waits in the buffer."""
    n = 4
    r = checked(systems.april(oversample_factor=2.0, carry_over=False, samples_per_prompt=n, **SMALL))
    per_group = _trained_groups(r, n)
    assert set(per_group.values()) == {n}
    discarded = [e for e in r.episodes if e.status == "discarded"]
    assert discarded and r.summary()["episodes_aborted"] > 0
    assert not {e.task_id // n for e in discarded} & {g for _, g in per_group}


@pytest.mark.parametrize("system", ["verl", "roll", "areal"])
def test_group_batching_trains_whole_groups(system: str) -> None:
    """verl queues a prompt's rollout.n responses as one RolloutSample, ROLL's GroupQueue hands
    over complete groups, AReaL's RLVRWorkflow gathers a prompt's n_samples: with
    samples_per_prompt = n every trained step is whole groups, each trained once."""
    n = 4
    make = {
        "verl": lambda: systems.verl_fully_async(0.5, samples_per_prompt=n, **SMALL),
        "roll": lambda: systems.roll(1, samples_per_prompt=n, **SMALL),
        "areal": lambda: systems.areal(2, samples_per_prompt=n, **SMALL),
    }[system]
    r = checked(make())
    per_group = _trained_groups(r, n)
    assert len(per_group) == SMALL["steps"] * SMALL["batch_size"] // n
    assert set(per_group.values()) == {n}
    assert len({g for _, g in per_group}) == len(per_group)


def test_verl_queue_of_groups_evicts_the_oldest_group_and_roll_expires_groups_whole() -> None:
    n = 4
    kw = {**SMALL, "train_time_s": 60.0, "n_slots": 32}
    r = checked(systems.verl_fully_async(4.0, max_queue_size=8, samples_per_prompt=n, **kw))
    evicted = [e for e in r.episodes if e.status == "discarded"]
    assert evicted
    by_group: dict[int, int] = {}
    for e in evicted:
        by_group[e.task_id // n] = by_group.get(e.task_id // n, 0) + 1
    assert set(by_group.values()) == {n}  # whole groups, never part of one
    assert not set(by_group) & {g for _, g in _trained_groups(r, n)}
    assert VerlMessageQueue(None, 0.5, 4, 16).group_capacity(2048) == 768  # int(128 * 1.5 * 4) prompts
    # ROLL: an expired group is gone whole; none of its samples is trained
    slow = {**SMALL, "n_slots": 32}
    rr = checked(
        systems.roll(1, samples_per_prompt=n, **slow).with_(
            durations=LogNormalDurations(20.0, 1.0), batching=RollGroupExpiry(1, n)
        )
    )
    gone = {e.task_id // n for e in rr.episodes if e.status == "discarded"}
    assert gone and not gone & {g for _, g in _trained_groups(rr, n)}
    assert rr.trained["staleness"].max() <= 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: systems.verl_fully_async(0.5, samples_per_prompt=4, **SMALL),
        lambda: systems.verl_fully_async(
            4.0, max_queue_size=8, samples_per_prompt=4, **{**SMALL, "train_time_s": 60.0, "n_slots": 32}
        ),
        lambda: systems.roll(1, samples_per_prompt=4, **SMALL),
        lambda: systems.areal(2, samples_per_prompt=4, **SMALL),
        lambda: systems.april(over_sampling_batch_size=4, n_samples_per_prompt=4, **SMALL),
    ],
)
def test_group_batch_rules_keep_their_hints_honest(make: Any) -> None:
    """The ready / min_items hints of the group-aware batch rules change nothing: the run with the
    engine's shortcuts equals the run without them (pipesim.testing.check_promises)."""
    check_promises(make())
