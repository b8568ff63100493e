"""The compiled build of the compute engine (``setup.py``, ``make fast``) against pure Python.

mypyc compiles the same source, so every run must be bit-identical: this file runs a set of
scenarios that reach every path of the compiled modules (closed loops and full runs; preemption
and reservation; shared prompts; colocated pauses; partial rollouts, KV drops at a sync; agent
turns with kept or recomputed KV, unlimited and scarce environment workers) and compares a digest
of each run (summary, every episode's start, end and duration, every replica's counters, written with
``repr``: floats to the last bit) with the same scenarios run by pure Python in a subprocess.
Each switch of the leaf and its subclass hooks are cases too (:data:`SWITCHES`): ``handle_in_place``
on and off with the number of SimPy events the run took, ``record``'s timelines and series, and a
Python subclass of each replica class counting its hooks' calls; so a build that ignored a switch
or skipped an override has a different digest.

``make test-compiled`` runs it on the build with ``PIPESIM_EXPECT_COMPILED=1``, so that a build
that silently fell back to Python fails; without a compiled build the comparison is skipped.
``python tests/test_compiled.py`` prints the digests of the interpreter it runs in.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.compute import (
    GPUS,
    MODELS,
    batch,
    closedloop,
    cluster,
    driver,
    engine,
    inplace,
    is_compiled,
    pool,
    prefix,
    refill,
    seq,
    source,
)
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.core.clock import Clock
from pipesim.policies.replicas import GroupAffinity
from tests.test_compute_engine import config_with_budget

ROOT = Path(__file__).resolve().parents[1]
MODULES = (batch, driver, engine, inplace, pool, prefix, refill, seq, source)
"""The modules ``setup.py`` compiles (``test_the_build_compiles_what_setup_lists`` checks the list)."""


def _engine(budget_tokens: int | None = None, **kw: Any) -> EngineConfig:
    if budget_tokens is not None:
        return config_with_budget(budget_tokens, **kw)
    return EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024, **kw)


def _work(agent: AgentTurns | None = None, n: int = 1) -> TokenWorkload:
    return TokenWorkload(
        response=LogNormalLengths(96.0, 0.7),
        prompt=64,
        samples_per_prompt=n,
        max_response_tokens=256,
        agent=agent,
        difficulty_sigma=0.3,
    )


TURNS = AgentTurns(turns=3, tool_latency_s=0.5, tool_latency_sigma=1.0, observation_tokens=32)


def _closed(engine_cfg: EngineConfig, work: TokenWorkload, concurrency: int, samples: int) -> Any:
    loop = ClosedLoop(engine_cfg, work, concurrency, seed=3, series=True)
    out = loop.run(samples)
    frame = loop.replica.timeline_frame()
    return _plain((out, loop.replica.stats(out["sim_time_s"]), frame.to_numpy().tolist()))


def _run(
    trainer_gpus: int,
    work: TokenWorkload,
    policy: Any,
    eta: int,
    engine_cfg: EngineConfig | None = None,
    workers: int | None = None,
    **kw: Any,
) -> Any:
    cfg = pipesim.PipelineConfig(batch_size=48, steps=3, max_staleness=eta)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=policy)
    cluster = Cluster(
        engine=engine_cfg or _engine(max_num_seqs=32),
        n_gpus=trainer_gpus + 2,
        trainer_gpus=trainer_gpus,
        env_workers=workers,
    )
    run = run_compute(sc, cluster, work, seed=11, **kw)
    summary = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in run.summary().items()}
    ends = [(e.id, e.start_s, e.end_s, e.duration_s, e.status) for e in run.result.episodes]
    return _plain((summary, ends, run.engines))


def _plain(x: Any) -> Any:
    """``x`` with numpy scalars as Python ones: a numpy time a user passes in stays a numpy float
    through pure Python, where the compiled build holds it as a C double (the same value)."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return x


CASES: dict[str, Any] = {
    "closed loop": lambda: _closed(_engine(max_num_seqs=64), _work(), 64, 2_000),
    "closed loop, preemptions": lambda: _closed(_engine(3000, max_num_seqs=64), _work(), 64, 1_000),
    "closed loop, reserve": lambda: _closed(
        _engine(3000, max_num_seqs=64, kv_policy="reserve"), _work(), 64, 800
    ),
    "closed loop, agent turns": lambda: _closed(_engine(max_num_seqs=32), _work(TURNS), 32, 400),
    "closed loop, shared prompts": lambda: _closed(
        _engine(3000, max_num_seqs=64, share_group_prefix=True), _work(n=8), 64, 800
    ),
    "colocated, drain": lambda: _run(0, _work(), pipesim.Drain(), 0),
    "two replicas, partial": lambda: _run(2, _work(), pipesim.PartialRollout(), 1),
    "preemptions, KV dropped at a sync": lambda: _run(
        1, _work(), pipesim.AbortReprefill(), 1, _engine(2500, max_num_seqs=48)
    ),
    "agent turns, kept KV": lambda: _run(1, _work(TURNS), pipesim.PartialRollout(), 1),
    "agent turns, dropped KV, 8 workers": lambda: _run(
        2, _work(TURNS), pipesim.PartialRollout(), 2, _engine(max_num_seqs=32, tool_kv="drop"), workers=8
    ),
    "numpy times (a numpy clock)": lambda: _run(
        1, _work(TURNS), pipesim.PartialRollout(), 1, sync_time_s=np.float64(2.0)
    ),
    "groups on one replica, shared prompts": lambda: _run(
        1,
        _work(n=8),
        pipesim.PartialRollout(),
        1,
        _engine(4000, max_num_seqs=48, share_group_prefix=True),
        groups=True,
        routing=GroupAffinity(8),
    ),
}


# -- switches and subclass hooks: each acts the same in both builds ------------------------------
HOOKS = (
    "_advance",
    "_admit",
    "_end_turn",
    "_finished",
    "_finish_due",
    "_launch",
    "_plan",
    "_schedule",
    "_step",
    "_tool_return",
)
"""Methods the compiled leaf calls on itself that a Python subclass may override (its hooks)."""


def _frame(frame: Any) -> Any:
    """A DataFrame's values as lists."""
    return frame.to_numpy().tolist()


def _counting(base: type) -> tuple[Any, dict[str, int]]:
    """A Python subclass of ``base`` that counts the calls of each of :data:`HOOKS`, and its counts."""
    calls = dict.fromkeys(HOOKS, 0)

    def hook(name: str) -> Any:
        def counted(self: Any, *args: Any, **kw: Any) -> Any:
            calls[name] += 1
            return getattr(base, name)(self, *args, **kw)

        return counted

    return type(f"Counting{base.__name__}", (base,), {name: hook(name) for name in HOOKS}), calls


def _events(case: Any) -> tuple[Any, int]:
    """``case()``'s result and the events SimPy processed for it (what ``handle_in_place`` saves)."""
    steps = [0]
    step = Clock.step

    def counted(env: Any) -> None:
        steps[0] += 1
        step(env)

    setattr(Clock, "step", counted)  # noqa: B010 (a method patched for this run)
    try:
        return case(), steps[0]
    finally:
        setattr(Clock, "step", step)  # noqa: B010


def _in_place(on: bool) -> Any:
    """A run with agent turns (tool returns handled in place or not), and its event count."""
    before = driver.HANDLE_IN_PLACE
    driver.HANDLE_IN_PLACE = on
    try:
        return _events(lambda: _run(1, _work(TURNS), pipesim.PartialRollout(), 1))
    finally:
        driver.HANDLE_IN_PLACE = before


def _recorded() -> Any:
    """``record=True``: every replica's batch timeline, and its binned series, besides the results."""
    cfg = pipesim.PipelineConfig(batch_size=48, steps=3, max_staleness=1)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout())
    run = run_compute(
        sc,
        Cluster(engine=_engine(max_num_seqs=32), n_gpus=3, trainer_gpus=1),
        _work(TURNS),
        seed=11,
        record=True,
    )
    return _plain((run.timelines, _frame(run.replica_timeline), run.summary()["tokens_generated"]))


def _hooked_run() -> Any:
    """A full run on a Python subclass of the replica: its results and each hook's call count."""
    sub, calls = _counting(engine.ComputeReplica)
    made = cluster.ComputeReplica
    setattr(cluster, "ComputeReplica", sub)  # noqa: B010 (the class run_compute builds)
    try:
        out = _run(1, _work(TURNS), pipesim.PartialRollout(), 1, _engine(2500, max_num_seqs=48), workers=8)
    finally:
        setattr(cluster, "ComputeReplica", made)  # noqa: B010
    return out, calls


def _hooked_loop() -> Any:
    """A closed loop on a Python subclass of its replica: its results and each hook's call count."""
    sub, calls = _counting(refill.LoopReplica)
    made = closedloop.LoopReplica
    setattr(closedloop, "LoopReplica", sub)  # noqa: B010 (the class ClosedLoop builds)
    try:
        out = _closed(_engine(3000, max_num_seqs=32), _work(TURNS), 32, 300)
    finally:
        setattr(closedloop, "LoopReplica", made)  # noqa: B010
    return out, calls


SWITCHES: dict[str, Any] = {
    "handle_in_place on, events counted": lambda: _in_place(True),
    "handle_in_place off, events counted": lambda: _in_place(False),
    "record: batch timelines and series": _recorded,
    "hooks of a Python subclass, full run": _hooked_run,
    "hooks of a Python subclass, closed loop": _hooked_loop,
}
"""Each switch of the compiled leaf, and its subclass hooks, as a case whose digest changes if a
build ignores the switch (the event count) or skips an override (the call counts)."""
CASES.update(SWITCHES)


def test_every_switch_and_hook_acts() -> None:
    """The switch cases can tell a build that ignores them: handling in place saves events, and
    every hook of a Python subclass is called (in whichever build runs this)."""
    (on, n_on), (off, n_off) = _in_place(True), _in_place(False)
    assert on == off and n_off > n_on
    (run, run_calls), (loop, loop_calls) = _hooked_run(), _hooked_loop()
    assert run and loop
    assert [name for name, n in run_calls.items() if n == 0] == []  # scarce workers: _tool_return too
    assert [name for name, n in loop_calls.items() if n == 0 and name != "_tool_return"] == []


def digests() -> dict[str, str]:
    """The digest of every case, run by this interpreter."""
    return {name: hashlib.sha256(repr(case()).encode()).hexdigest() for name, case in CASES.items()}


def test_the_cases_run_and_differ() -> None:
    """Each case is a different run (a digest that ignored its input would pass the comparison)."""
    d = digests()
    assert len(set(d.values())) == len(CASES)
    assert d == digests()  # and the same run twice is the same digest


def test_the_build_compiles_what_setup_lists() -> None:
    """``setup.py``'s list is the modules this file checks; with ``PIPESIM_EXPECT_COMPILED=1``
    (``make test-compiled``) each of them must be a C extension, not a fallback to Python."""
    text = (ROOT / "setup.py").read_text()
    listed = [line.strip().strip('",') for line in text.splitlines() if line.strip().startswith('"pipesim/')]
    assert sorted(listed) == sorted(str(Path(m.__name__.replace(".", "/") + ".py")) for m in MODULES)
    if os.environ.get("PIPESIM_EXPECT_COMPILED") == "1":
        assert [m.__name__ for m in MODULES if not is_compiled(m)] == []


@pytest.mark.skipif(not is_compiled(), reason="no compiled build on the path (make test-compiled)")
def test_compiled_runs_are_bit_identical_to_pure_python() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the source tree: pure Python
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "test_compiled.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    pure = json.loads(out.stdout)
    assert pure.pop("compiled") is False
    compiled = digests()
    assert [name for name in CASES if pure[name] != compiled[name]] == []


if __name__ == "__main__":
    np.seterr(all="raise")
    print(json.dumps({"compiled": is_compiled(), **digests()}))
