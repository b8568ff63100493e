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

import re
import textwrap
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim import PipelineError
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


def _stall_time(err: BaseException) -> str:
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
