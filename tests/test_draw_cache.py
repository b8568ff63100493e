"""The chapter's pools kept on disk (:mod:`pipesim.io.draw_cache`): what a run reads back is the
pool it would draw, bit for bit; a hit needs no torch; the cache is keyed, bounded, switchable off,
and a broken or unwritable one changes nothing but the time."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.io.draw_cache as dc
from pipesim import AgentDurations, LogNormalDurations, PipelineConfig, Scenario
from pipesim.io.api import draw_pool, run
from pipesim.workload.durations import draw
from pipesim.workload.pools import draw_stable

ROOT = Path(__file__).resolve().parents[1]
CFG = PipelineConfig(n_slots=4, batch_size=4, train_time_s=5.0, sync_time_s=1.0, max_staleness=1, steps=3)


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(dc.ENV, str(tmp_path / "draws"))
    return tmp_path / "draws"


def fresh(scen: Scenario) -> np.ndarray:
    """The pool drawn now, never read from a cache."""
    if scen.pool_size is not None and scen.pool_draw == "whole":
        return draw(scen.durations, scen.pool_size, scen.seed)
    from pipesim.io.api import pool_len

    return draw_stable(scen.durations, pool_len(scen), scen.seed)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    pool=st.none() | st.integers(1, 300),
    how=st.sampled_from(["whole", "stable"]),
    median=st.sampled_from([None, 12.5]),
)
def test_a_kept_pool_reads_back_as_the_pool_drawn(seed: int, pool: int | None, how: str, median) -> None:
    """Drawn and kept, then read back: equal bit for bit to a fresh draw, twice over."""
    import tempfile

    durations = AgentDurations() if median is None else AgentDurations(tool_median_s=median)
    scen = Scenario(pipeline=CFG, durations=durations, pool_size=pool, pool_draw=how, seed=seed)
    with tempfile.TemporaryDirectory() as d:
        os.environ[dc.ENV] = d
        try:
            first, second = draw_pool(scen), draw_pool(scen)
            assert len(list(Path(d).glob("*.npy"))) == 1
        finally:
            del os.environ[dc.ENV]
    expected = fresh(scen)
    assert first.dtype == second.dtype == np.float64
    assert first.tobytes() == expected.tobytes() == second.tobytes()


def test_each_key_part_keeps_its_own_pool(where: Path) -> None:
    base = Scenario(pipeline=CFG, pool_size=100, seed=3)
    for scen in (
        base,
        base.with_(seed=4),
        base.with_(pool_size=101),
        base.with_(pool_draw="stable"),
        base.with_(durations=AgentDurations(tool_median_s=3.0)),
    ):
        assert draw_pool(scen).tobytes() == fresh(scen).tobytes()
    assert len(list(where.glob("*.npy"))) == 5
    draw_pool(Scenario(pipeline=CFG, durations=LogNormalDurations(40.0, 1.0), pool_size=100))
    draw_pool(Scenario(pipeline=CFG, durations=AgentDurations(draws="numpy"), pool_size=100))
    assert len(list(where.glob("*.npy"))) == 5  # numpy's draws are not kept

    @dataclasses.dataclass(frozen=True)
    class Longer(AgentDurations):  # a subclass's own drawing code is not in the key
        def sample(self, n, generator):  # type: ignore[no-untyped-def, override]
            return AgentDurations.sample(self, n, generator) * 2.0

    assert draw_pool(base.with_(durations=Longer())).tobytes() == (2.0 * fresh(base)).tobytes()
    assert len(list(where.glob("*.npy"))) == 5


@pytest.mark.parametrize("damage", [b"", b"not an array", None])
def test_a_damaged_file_is_drawn_again(where: Path, damage: bytes | None) -> None:
    scen = Scenario(pipeline=CFG, pool_size=50, seed=1)
    good = draw_pool(scen)
    (path,) = where.glob("*.npy")
    if damage is None:  # a whole array of the wrong length
        np.save(path, np.ones(7), allow_pickle=False)
    else:
        path.write_bytes(damage)
    assert draw_pool(scen).tobytes() == good.tobytes()
    assert np.load(path).tobytes() == good.tobytes()  # kept again, whole


@pytest.mark.parametrize("value", ["off", "", " "])
def test_off_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(dc.ENV, value)
    monkeypatch.chdir(tmp_path)
    assert dc.cache_dir() is None
    scen = Scenario(pipeline=CFG, pool_size=50, seed=1)
    assert draw_pool(scen).tobytes() == fresh(scen).tobytes()
    assert list(tmp_path.rglob("*.npy")) == []


def test_an_unwritable_cache_changes_nothing_but_the_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory would go")
    monkeypatch.setenv(dc.ENV, str(blocker / "draws"))
    scen = Scenario(pipeline=CFG, pool_size=50, seed=2)
    assert draw_pool(scen).tobytes() == fresh(scen).tobytes()
    assert run(scen).summary() == run(scen.with_()).summary()


def test_the_oldest_files_go_past_the_bound(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dc, "MAX_FILES", 3)
    for seed in range(6):
        draw_pool(Scenario(pipeline=CFG, pool_size=20, seed=seed))
        assert len(list(where.glob("*.npy"))) == min(seed + 1, 3)
    assert list(where.glob(".draw-*")) == []  # no temporary file left behind


def test_a_pool_past_the_size_bound_is_drawn_not_kept(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dc, "MAX_CACHED", 49)
    scen = Scenario(pipeline=CFG, pool_size=50, seed=1)
    assert draw_pool(scen).tobytes() == fresh(scen).tobytes()
    assert not where.exists() or list(where.glob("*.npy")) == []


HIT = """
import sys
from pipesim import PipelineConfig, Scenario, run
cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=5.0, sync_time_s=1.0, max_staleness=1, steps=3)
s = run(Scenario(pipeline=cfg, seed=5)).summary()
print("torch" in sys.modules, repr(s["throughput_per_hour"]), s["sim_time_s"])
"""


def test_a_second_run_reads_the_pool_without_importing_torch(tmp_path: Path) -> None:
    """Two fresh interpreters: the first imports torch to draw, the second reads the pool back
    without it and gives the same run."""
    env = {**os.environ, dc.ENV: str(tmp_path / "draws"), "PYTHONPATH": str(ROOT)}
    outs = [
        subprocess.run(
            [sys.executable, "-c", HIT], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
        )
        for _ in range(2)
    ]
    for proc in outs:
        assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = (proc.stdout.split() for proc in outs)
    assert first[0] == "True" and second[0] == "False"
    assert first[1:] == second[1:]
