"""What a user writing policies is told when one goes wrong: the message names the real culprit.

From a walkthrough of writing one's own policies (docs/policies.md, "When a policy of your own goes
wrong"; docs/testing.md, the kit):

* a helper process that never ends (a heartbeat started with ``p.process``) kept a stalled run
  going, and the run was blamed on it, at t=100,218 s, while the admission rule that stalled the run
  at t=218 s went unnamed; two such helpers (one per sync) hung the run for good;
* a sync that returns without ``end_sync`` was said to move the version "from 0 to 0";
* a broken staleness promise named no episode;
* ``pipesim run`` printed a staleness past a policy's promised bound with no remark.

Each test asserts the exception type and what the user relies on (the class, the time, the
episode named), not the wording.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim import PipelineError
from pipesim.core.decisions import SPIN_LIMIT
from pipesim.testing import InvariantError, check_invariants

BASE = pipesim.Scenario(
    pipeline=pipesim.PipelineConfig(n_slots=16, batch_size=8, steps=4, max_staleness=1, sync_time_s=5),
    seed=0,
)


@dataclass(frozen=True)
class FirstBatchOnly:
    """Admits the first batch and two more, then nothing: the run stalls at version 1."""

    def admits(self, p: Any) -> bool:
        return bool(p.started < p.batch_size + 2)


@dataclass(frozen=True)
class TwoBatchesOnly:
    """Admits two batches and two more: the run stalls at version 2, after two syncs."""

    def admits(self, p: Any) -> bool:
        return bool(p.started < 2 * p.batch_size + 2)


def _beat(p: Any) -> Generator[Any, Any, None]:
    while True:  # never ends: it keeps the queue from running dry
        yield p.timeout(1.0)


@dataclass(frozen=True)
class HeartbeatSync:
    """A sync that starts a heartbeat process (which never ends) at each sync."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.process(_beat(p))
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class PollsForever:
    """A sync that polls, a second at a time, for a buffer it never gets: the sync is the culprit."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        while p.n_buffered < 10**9:
            yield p.timeout(1.0)
        p.end_sync()


def _stall_time(err: BaseException | str) -> str:
    found = re.search(r"stalled at t=([0-9.e+]+) s", str(err))
    assert found is not None, str(err)
    return found.group(1)


def test_a_heartbeat_that_never_ends_does_not_hide_the_admission_stall() -> None:
    """The stall FirstBatchOnly gives alone, at the same time, with the heartbeat named beside it."""
    with pytest.raises(PipelineError) as alone:
        pipesim.run(BASE.with_(admission=FirstBatchOnly()))
    with pytest.raises(PipelineError) as info:
        pipesim.run(BASE.with_(admission=FirstBatchOnly(), weight_update=HeartbeatSync()))
    said = str(info.value)
    assert "FirstBatchOnly" in said, said  # the culprit
    assert "_beat" in said, said  # what kept the run going
    assert _stall_time(info.value) == _stall_time(alone.value), said  # when it stalled, not 100,000 s on


@pytest.mark.timeout(120)  # the guard: it hung before
def test_two_heartbeats_left_together_end_the_run_with_its_stall() -> None:
    """One heartbeat per sync: after two syncs neither is ever the only event left, and the run
    never returned; now it reports the stall TwoBatchesOnly causes, at its time."""
    with pytest.raises(PipelineError) as alone:
        pipesim.run(BASE.with_(admission=TwoBatchesOnly()))
    with pytest.raises(PipelineError) as info:
        pipesim.run(BASE.with_(admission=TwoBatchesOnly(), weight_update=HeartbeatSync()))
    said = str(info.value)
    assert "TwoBatchesOnly" in said and "_beat" in said, said
    assert _stall_time(info.value) == _stall_time(alone.value), said


def test_a_sync_that_polls_forever_is_still_named_itself() -> None:
    """A sync spinning alone is its own culprit: the message names it, not a stall's other cause."""
    with pytest.raises(PipelineError) as info:
        pipesim.run(BASE.with_(weight_update=PollsForever()))
    assert "PollsForever.sync" in str(info.value)
    assert "stalled" not in str(info.value)
    assert f"{SPIN_LIMIT:,} events" in str(info.value)  # refused at the limit, not one event later


def _poll(p: Any) -> Generator[Any, Any, None]:
    while True:  # a second at a time while work runs; once nothing runs, at one instant forever
        yield p.timeout(1.0 if p.n_running else 0.0)


def _slow_beat(p: Any) -> Generator[Any, Any, None]:
    while True:  # its last beat with the run still going comes long before the stall
        yield p.timeout(1000.0)


def _waits_on(event: Any) -> Generator[Any, Any, None]:
    yield event


@dataclass(frozen=True)
class HelperSync:
    """A paused sync of ``sync_time_s`` beside the helpers a case names: ``poll`` (:func:`_poll`),
    ``slow`` (:func:`_slow_beat`, at the first sync only), ``beats`` heartbeats and a helper that
    waits on the sync's own timeout (``shared``); ``drain``: it waits for a drain that cannot come
    while the engines are paused; ``skip``: it publishes with skip_sync alone."""

    poll: bool = False
    slow: bool = False
    beats: int = 0
    shared: bool = False
    drain: bool = False
    skip: bool = False

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        if self.poll:
            p.process(_poll(p))
        if self.slow and p.version == 0:
            p.process(_slow_beat(p))
        for _ in range(self.beats):
            p.process(_beat(p))
        if self.skip:
            p.skip_sync()
            return
        p.begin_sync(pause=True)
        own = p.drained() if self.drain else p.timeout(p.config.sync_time_s)
        if self.shared:
            p.process(_waits_on(own))
        yield own
        p.end_sync()


@dataclass(frozen=True)
class ExactBatches:
    """Admits exactly ``n`` batches: the trainer then waits for one more, after the last sync."""

    n: int = 2

    def admits(self, p: Any) -> bool:
        return bool(p.started < self.n * p.batch_size)


def _stalls(scenario: pipesim.Scenario) -> str:
    with pytest.raises(PipelineError) as info:
        pipesim.run(scenario)
    return str(info.value)


@pytest.mark.timeout(60)  # the guard: two beats hung the run
@pytest.mark.parametrize("beats", [1, 2])
def test_heartbeats_beside_a_sync_that_waits_forever_end_the_run_with_its_stall(beats: int) -> None:
    """A sync that waits for a drain while it keeps the engines paused: its stall, named, at the
    time the run gives without heartbeats (one reported the last beat before, 121.821 s for
    122.015 s: a superseded wake-up fired after it), with the heartbeats as what kept it going."""
    alone = _stalls(BASE.with_(weight_update=HelperSync(drain=True)))
    said = _stalls(BASE.with_(weight_update=HelperSync(drain=True, beats=beats)))
    assert "HelperSync.sync began a sync" in said and "_beat kept the run going" in said, said
    assert _stall_time(said) == _stall_time(alone), said


def test_a_helper_waiting_on_the_syncs_own_timeout_is_no_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync's timeout is queued (a helper waits on it too), so the heartbeat beside it is not
    alone: the run ends, however many beats the sync lasts (here past the spin limit)."""
    from pipesim.core import decisions

    monkeypatch.setattr(decisions, "SPIN_LIMIT", 50)
    long_sync = BASE.with_(pipeline=dataclasses.replace(BASE.pipeline, sync_time_s=200.0))
    result = pipesim.run(long_sync.with_(weight_update=HelperSync(beats=1, shared=True)))
    assert sorted(set(result.trained["step"])) == [0, 1, 2, 3]


def test_a_helper_polling_at_one_instant_after_the_stall_is_the_stall() -> None:
    """Once nothing runs the poller spins without time advancing, but alone: the stall
    FirstBatchOnly causes is reported, at its time, not the poller's spin."""
    alone = _stalls(BASE.with_(admission=FirstBatchOnly(), weight_update=HelperSync()))
    said = _stalls(BASE.with_(admission=FirstBatchOnly(), weight_update=HelperSync(poll=True)))
    assert "FirstBatchOnly" in said and "_poll kept the run going" in said, said
    assert f"({SPIN_LIMIT:,} events in a row" in said, said
    assert _stall_time(said) == _stall_time(alone), said


@pytest.mark.parametrize("skip", [False, True], ids=["sync-end", "train-end"])
def test_a_slow_helper_stall_is_timed_by_the_runs_last_record(skip: bool) -> None:
    """The helper's last beat beside other events came long before the stall, so the run's last
    record times it: the last sync's end (its log and the update record), or with skip_sync the
    last step's end in the train log."""
    run = BASE.with_(admission=ExactBatches(2))
    alone = _stalls(run.with_(weight_update=HelperSync(skip=skip)))
    said = _stalls(run.with_(weight_update=HelperSync(skip=skip, slow=True)))
    assert "_slow_beat kept the run going" in said, said
    assert _stall_time(said) == _stall_time(alone), said


BEGUN: list[float] = []


@dataclass(frozen=True)
class NeverEndSync:
    """A weight update that begins a sync and forgets end_sync."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        BEGUN.append(p.now)
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)


@dataclass(frozen=True)
class NeverBeginSync:
    """A weight update that waits and returns: neither end_sync nor skip_sync."""

    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        yield p.timeout(1.0)


def test_a_sync_left_open_says_when_it_began() -> None:
    """Not "moved the version from 0 to 0": the sync named, and the open sync's start."""
    BEGUN.clear()
    with pytest.raises(PipelineError) as info:
        pipesim.run(BASE.with_(weight_update=NeverEndSync()))
    said = str(info.value)
    assert "NeverEndSync" in said and "end_sync" in said, said
    assert BEGUN and f"t={BEGUN[0]:g}" in said, (BEGUN, said)


def test_a_sync_that_never_begins_is_named() -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(BASE.with_(weight_update=NeverBeginSync()))
    said = str(info.value)
    assert "NeverBeginSync" in said and "skip_sync" in said, said


@dataclass(frozen=True)
class LyingLag:
    """Promises staleness <= k and admits three batches further ahead."""

    k: int = 1

    def admits(self, p: Any) -> bool:
        return bool(p.started - p.n_dropped < (p.version + 1 + self.k + 3) * p.batch_size)

    def staleness_bound(self, scenario: Any) -> int | None:
        return self.k


LYING = BASE.with_(durations=pipesim.LogNormalDurations(median_s=60, sigma=1.5), admission=LyingLag(1))


def test_a_broken_staleness_promise_names_the_first_episode_past_it() -> None:
    result = pipesim.run(LYING)
    tr = result.trained
    first = tr[tr["staleness"] > 1].iloc[0]
    with pytest.raises(InvariantError) as info:
        check_invariants(result, LYING)
    assert info.value.invariant == "promised staleness bound"
    said = str(info.value)
    assert "LyingLag" in said, said
    assert re.search(rf"episode {int(first['episode_id'])}\b", said), said
    assert f"step {int(first['step'])}" in said, said


POLICIES = """
from dataclasses import dataclass


@dataclass(frozen=True)
class LyingLag:
    k: int = 1

    def admits(self, p):
        return p.started - p.n_dropped < (p.version + 1 + self.k + 3) * p.batch_size

    def staleness_bound(self, scenario):
        return self.k


@dataclass(frozen=True)
class HonestLag(LyingLag):
    def staleness_bound(self, scenario):
        return 10
"""

SCENARIO = """
schema_version: 1
name: mine
pipeline: {n_slots: 16, batch_size: 8, max_staleness: 1, steps: 4, sync_time_s: 5}
durations: {type: LogNormalDurations, median_s: 60.0, sigma: 1.5}
admission: {type: %s, k: 1}
weight_update: {type: PartialRollout}
"""


@pytest.fixture
def clean_catalog() -> Iterator[None]:
    from pipesim.policies import catalog

    saved = list(catalog._registered)
    catalog._cache = None
    yield
    catalog._registered[:] = saved
    catalog._cache = None


@pytest.mark.parametrize(("policy", "noted"), [("LyingLag", True), ("HonestLag", False)])
def test_pipesim_run_notes_a_staleness_bound_the_run_broke(
    tmp_path: Path, clean_catalog: None, capsys: pytest.CaptureFixture[str], policy: str, noted: bool
) -> None:
    from pipesim.io.cli import main

    (tmp_path / "mypols.py").write_text(textwrap.dedent(POLICIES))
    (tmp_path / "mine.yaml").write_text(SCENARIO % policy)
    assert main(["run", str(tmp_path / "mine.yaml"), "--policies", str(tmp_path / "mypols.py")]) == 0
    err = capsys.readouterr().err
    assert ("staleness_bound" in err and policy in err) is noted, err


def test_the_note_skips_a_promise_that_raises() -> None:
    """The run went fine: a promise that raises gets no note (check_invariants names it)."""
    from pipesim.io.cli_run import staleness_note

    @dataclass(frozen=True)
    class Raises(LyingLag):
        def staleness_bound(self, scenario: Any) -> int | None:
            raise KeyError("oops")

    result = pipesim.run(LYING.with_(admission=Raises(1)))
    assert staleness_note(result) is None
    assert staleness_note(pipesim.run(LYING)) is not None


def test_a_compute_run_spec_prints_the_staleness_note_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim run SPEC.toml`` (the compute engine) asks the same note of its result as a slot
    run does, and prints it on standard error below the table."""
    from pipesim.io import cli_run
    from pipesim.io.cli import main

    asked: list[object] = []

    def note(result: object) -> str:
        asked.append(result)
        return "note: the promise was broken"

    monkeypatch.setattr(cli_run, "staleness_note", note)
    spec = Path(__file__).resolve().parents[1] / "examples" / "run_qwen3_8b.toml"
    assert main(["run", str(spec), "--set", "run.steps=2"]) == 0
    assert len(asked) == 1 and "note: the promise was broken" in capsys.readouterr().err
