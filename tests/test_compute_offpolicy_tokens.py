"""Off-policy tokens: which tokens of a trained sample an older policy generated (compute engine).

A replica that gets new weights notes, for every sequence on it, the tokens it has generated so
far (``Episode.tokens_before_update`` when it finishes); the ledger counts a trained sample's
tokens as off-policy whole when its newest generating version is older than the trainer's, and
for the part before its last update when it finished under the trainer's version
(``tokens_offpolicy_trained``, ``offpolicy_token_share``, ``mixed_version_share``), and slime's
own per-round ratio of resumed prefixes (``partial_rollout/off_policy_ratio``).

Checked here: on one replica driven by hand, the prefixes noted at an update plus the responses
finished before it equal the replica's own decode counter at that instant (a separate path: the
counter integrates the batch, the prefixes are per sequence), with preemptions; a pause that
changes no weights notes nothing; and on whole runs of every weight-update family, the bounds, a
synchronous run's zero and a draining run's closed form (no sample spans an update, so the
off-policy tokens are exactly those of the stale samples).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.engine import ComputeReplica
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.results.columns import S_TRAINED
from tests.test_compute_engine import FixedTokens, StubPipeline, config_with_budget
from tests.test_prop_compute import GROUPED, SMALL, compute_cases

ARRIVALS = st.lists(
    st.tuples(st.floats(0.0, 0.3), st.integers(1, 300), st.integers(1, 600)), min_size=1, max_size=14
)


def _drive(
    seqs: list[tuple[float, int, int]], budget: int, update_s: float, new_weights: bool
) -> tuple[list[pipesim.Episode], float, list[bool]]:
    """Run ``(arrival_s, prompt, response)`` sequences on one replica, pausing it at ``update_s``
    for 10 ms (with new weights, or for a colocated trainer's turn); return the episodes, the
    replica's decode counter at the pause, and which episodes had finished by then."""
    p = StubPipeline()
    src = FixedTokens([s[1] for s in seqs], [s[2] for s in seqs])
    rep = ComputeReplica(p, len(seqs), 0, ReplicaCost(config_with_budget(budget)), src)  # type: ignore[arg-type]
    eps = [pipesim.Episode(i, i, 0.0, 0) for i in range(len(seqs))]
    seen: dict[str, Any] = {}

    def arrivals() -> Any:
        for ep, (at, _, _) in sorted(zip(eps, seqs, strict=True), key=lambda x: x[1][0]):
            if at > p.env.now:  # at the absolute time (timeout(at - now) can land an ulp off)
                yield p.env.wake_at(p.env.wake_up(), at)
            rep.start(ep, p.env.now)

    def update() -> Any:
        yield p.env.timeout(update_s)
        rep.pause()
        seen["counter"] = rep.tokens_generated
        seen["done"] = [ep.end_s is not None for ep in eps]
        if new_weights:
            rep.version = 1  # what the kernel's end_sync does before it resumes the replica
        yield p.env.timeout(0.01)
        rep.resume()

    p.env.process(arrivals())
    p.env.process(update())
    p.env.run()
    assert len(p.finished) == len(seqs)
    return eps, seen["counter"], seen["done"]


@settings(max_examples=40, deadline=None)
@given(ARRIVALS, st.sampled_from([1100, 3000, 100_000]), st.floats(0.001, 0.4))
def test_prefixes_at_an_update_add_up_to_the_replicas_decode_counter(
    seqs: list[tuple[float, int, int]], budget: int, update_s: float
) -> None:
    """Tokens decoded before the update = the responses finished by then + the prefixes the
    sequences still on the replica had generated (queued, preempted or resident), each prefix at
    most its response; sequences that finished before it, or arrived after it, note none."""
    eps, counter, done = _drive(seqs, budget, update_s, new_weights=True)
    before = np.array([ep.tokens_before_update for ep in eps])
    response = np.array([r for _, _, r in seqs], dtype=float)
    finished = np.array(done)
    assert math.isclose(
        math.fsum(response[finished]) + math.fsum(before[~finished]), counter, rel_tol=1e-9, abs_tol=1e-6
    )
    assert (before >= 0).all() and (before <= response * (1 + 1e-12)).all()
    assert (before[finished] == 0).all()
    late = np.array([at > update_s for at, _, _ in seqs])
    assert (before[late] == 0).all()


@settings(max_examples=15, deadline=None)
@given(ARRIVALS, st.floats(0.001, 0.4))
def test_a_pause_that_changes_no_weights_notes_nothing(
    seqs: list[tuple[float, int, int]], update_s: float
) -> None:
    """A colocated trainer's pause (the version stays) leaves every sample on one policy."""
    eps, _, _ = _drive(seqs, 100_000, update_s, new_weights=False)
    assert all(ep.tokens_before_update == 0 for ep in eps)


def _trained(out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per trained episode of a run: its tokens, tokens before its last update, trained and newest
    versions (the tokens from the ledger's own side table, read back through the episodes)."""
    c = out.result.columns
    sel = c.status == S_TRAINED
    return (
        c.tokens_before_update[sel],
        c.trained_version[sel],
        out.result.newest_versions[sel],
        c.version[sel],
    )


@settings(max_examples=12, deadline=None)
@given(compute_cases())
def test_offpolicy_tokens_are_bounded_by_the_stale_and_the_mixed_samples(
    case: tuple[pipesim.Scenario, Any, int],
) -> None:
    """Under every weight update the compute engine runs: 0 <= off-policy <= trained tokens; a
    sample that never ran through a weight change noted nothing; the share matches the ledger."""
    sc, cluster, seed = case
    out = run_compute(sc, cluster, GROUPED, seed=seed, slots_per_replica=16)
    before, trained_v, newest, version = _trained(out)
    assert (before[newest == version] == 0).all()
    led, s = out.ledger, out.summary()
    assert 0.0 <= led.offpolicy_trained <= led.trained * (1 + 1e-12)
    assert s["offpolicy_token_share"] == pytest.approx(led.offpolicy_trained / led.trained, rel=1e-12)
    assert 0.0 <= s["mixed_version_share"] <= 1.0
    if (trained_v == version).all() and (before == 0).all():
        assert led.offpolicy_trained == 0.0
    # slime's ratio: each prefix was decoded once, so it is at most half of decoded + prefixes
    ratio = s["partial_rollout/off_policy_ratio"]
    resumed = float(out.result.columns.tokens_before_update.sum())
    assert 0.0 <= ratio <= 0.5 and (ratio == 0.0) == (resumed == 0.0)


EQUAL = TokenWorkload(response=LogNormalLengths(150.0, 0.0), prompt=64, max_response_tokens=400)
"""Every sample 150 tokens: a run's off-policy tokens are 150 per stale sample, in closed form."""


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 3), st.integers(0, 2**16), st.integers(2, 4))
def test_a_draining_run_is_off_policy_exactly_for_its_stale_samples(
    staleness: int, seed: int, gpus: int
) -> None:
    """Drain finishes every sample under the weights it started with: none spans an update, and
    the off-policy tokens are those of the samples trained on a newer version (none at eta 0)."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=8, steps=4, max_staleness=staleness),
        weight_update=pipesim.Drain(),
        pool_size=4000,
    )
    cluster = Cluster(engine=SMALL, n_gpus=gpus, trainer_gpus=1)
    out = run_compute(sc, cluster, EQUAL, seed=seed, slots_per_replica=16)
    before, trained_v, newest, version = _trained(out)
    assert (before == 0).all() and (newest == version).all()
    assert out.ledger.trained == 150.0 * len(version)
    assert out.ledger.offpolicy_trained == 150.0 * int((trained_v > version).sum())
    s = out.summary()
    assert s["partial_rollout/off_policy_ratio"] == s["mixed_version_share"] == 0.0
    if staleness == 0:
        assert s["offpolicy_token_share"] == 0.0


def test_a_partial_rollout_mixes_versions_within_samples() -> None:
    """Pausing and continuing under new weights (the chapter's partial rollout) leaves samples
    generated by two policies: long-tailed samples run through updates and note a prefix, and
    only samples that ran through a weight change note one."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=8, steps=5, max_staleness=1),
        weight_update=pipesim.PartialRollout(),
        pool_size=4000,
    )
    tail = TokenWorkload(response=LogNormalLengths(150.0, 1.0), prompt=64, max_response_tokens=1000)
    cluster = Cluster(engine=SMALL, n_gpus=3, trainer_gpus=1)
    out = run_compute(sc, cluster, tail, seed=3, slots_per_replica=16)
    before, _, newest, version = _trained(out)
    assert (before > 0).any() and (newest[before > 0] > version[before > 0]).all()
    s = out.summary()
    assert s["mixed_version_share"] == pytest.approx(float((before > 0).mean()))
    assert 0.0 < s["offpolicy_token_share"] < 1.0
