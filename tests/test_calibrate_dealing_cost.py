"""The ranks' dealing drawn, not run, where the draws alone decide it (pipesim.calibrate.dealing).

The trainer's fit reads which samples the spec's run dealt to each rank per step, and the dealing
note (``trainer.dealing_spread``) refits on four more seeds' dealings: each was a whole run of the
spec through the log's last step (a 1,000-step calibration took 1.4-1.7x the CPU it took before the
note, docs/calibrate.md "Time"). A synchronous colocated design trains at step ``s`` the samples
drawn for it, in id order, so :func:`pipesim.calibrate.dealing.drawn` draws them with no engine.
These tests hold it to the run it replaces: the same dealing on the designs the rule takes, the
rule refusing the designs whose dealing follows the engines' timing, and the same calibration (the
note, every value and interval) as the old path, which ran every dealing (kept here as
:func:`_old_dealt`). The engine test fails before (a run was made for each dealing).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import TrainingLog, calibrate
from pipesim.calibrate import trainer as trainer_module
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.trainer import dealing_spread, fit_trainer_profile, tokens
from pipesim.plan.runspec import RunSpec, from_dict, read, run
from tests.test_calnoise_overhead_interval import _true_values

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
TRUE = _true_values()  # examples/make_verl_sample_log.py's constants, read from the script


def _spec(edits: dict[str, dict[str, Any]] | None = None, values: dict[str, float] | None = None) -> RunSpec:
    """The sample spec (8 GPUs colocated, synchronous) with ``edits`` per table."""
    data = copy.deepcopy(read(SPEC))
    for table, keys in (edits or {}).items():
        data.setdefault(table, {}).update(keys)
    if values is not None:
        data["calibration"] = {"values": dict(values)}
    return from_dict(data, EXAMPLES)


def _old_dealt(rs: RunSpec, steps: int, per_row: int = 1) -> list[tuple[int, ...]] | None:
    """The dealing as before, the slow reference: the spec's run through ``steps`` trainer steps,
    its ``dealt_log`` (None for an exactly balanced profile)."""
    from pipesim.calibrate.trainer_inputs import config

    if config(rs).framework.balance == "exact":
        return None
    return [per for _, per in run(dataclasses.replace(rs, steps=steps)).dealt_log] or None


def _the_old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every dealing a run, by the name each module calls it."""
    from pipesim.calibrate import trainer_inputs

    for module in (trainer_module, trainer_inputs):
        monkeypatch.setattr(module, "dealt", _old_dealt)


def _run_dealing(rs: RunSpec, steps: int) -> list[tuple[int, ...]]:
    return [per for _, per in run(dataclasses.replace(rs, steps=steps)).dealt_log]


LONG = {"model": {"max_model_len": 16384}}
DRAWN: dict[str, dict[str, dict[str, Any]]] = {
    "sample": {},
    "seed 5": {"run": {"seed": 5}},
    "drift": {"workload": {"drift_per_version": 0.02}},
    "no difficulty": {"workload": {"difficulty_sigma": 0.0}},
    "multi-turn": {
        **LONG,
        "workload": {
            "agent": {"turns": 3, "tool_latency_s": 2.0, "tool_latency_sigma": 1.0, "observation_tokens": 200}
        },
    },
    # 1,024 long samples on 8 replicas: the engines preempt (recompute) and the dealing does not move
    "preempting": {
        **LONG,
        "workload": {
            "prompts_per_step": 128,
            "max_response_tokens": 12000,
            "response": {"median_tokens": 6000, "sigma": 0.6},
        },
    },
}


@pytest.mark.parametrize("name", list(DRAWN))
def test_a_synchronous_colocated_dealing_drawn_is_the_runs(name: str) -> None:
    from pipesim.calibrate.dealing import drawn, draws_alone

    rs = _spec(DRAWN[name])
    assert draws_alone(rs)
    steps = 3 if name == "preempting" else 9
    if name == "preempting":
        assert sum(e["preemptions"] for e in run(dataclasses.replace(rs, steps=steps)).engines) > 0
    assert drawn(rs, steps) == _run_dealing(rs, steps)


RUN: dict[str, dict[str, dict[str, Any]]] = {
    "asynchronous": {"design": {"eta": 1}},
    "split": {"design": {"placement": 4}},
    "over-sampled": {"design": {"oversample": 1.25}},
    "aborting": {"design": {"update": "abort"}},
    "partial rollout": {"design": {"update": "partial"}},
    "syncing every 2 steps": {"design": {"sync_every": 2}},
}


@pytest.mark.parametrize("name", list(RUN))
def test_a_design_whose_dealing_follows_the_engines_is_run(name: str) -> None:
    """Which samples a step trains, or the version they are drawn at, can follow the engines'
    timing: those designs are run as before (the asynchronous, split and over-sampled ones do
    deal otherwise than their draws)."""
    from pipesim.calibrate.dealing import draws_alone
    from pipesim.calibrate.trainer_inputs import dealt

    rs = _spec(RUN[name])
    assert not draws_alone(rs)
    assert dealt(rs, 6) == _run_dealing(rs, 6)


def test_a_row_of_several_steps_is_dealt_as_the_run_deals_it() -> None:
    from pipesim.calibrate.trainer_inputs import dealt

    rs = _spec()
    assert dealt(rs, 12, 4) == _old_dealt(rs, 12, 4)


def test_an_exactly_balanced_profile_deals_nothing() -> None:
    from pipesim.calibrate.trainer_inputs import dealt

    rs = _spec({"model": {"framework": "ideal"}})
    assert dealt(rs, 5) is None


def test_the_dealing_of_a_synchronous_spec_runs_no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, each dealing was a run of the spec (four of them for the note alone)."""
    import pipesim.plan.runspec as runspec

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run to deal a synchronous colocated step")

    monkeypatch.setattr(runspec, "run", refused)
    lines: list[str] = []
    from pipesim.calibrate.simulated import reporting

    with reporting(lines.append):
        got = trainer_module.dealt(_spec(), 7)
    assert got is not None and len(got) == 7 and all(len(per) == 128 for per in got)
    assert lines and all("deal their samples" in ln and "no engine runs" in ln for ln in lines)


def _log(steps: int, seed: int = 0) -> TrainingLog:
    """A sample log of the spec at the true constants (3% noise, noise seed 11), ``steps`` long."""
    made = _spec({"run": {"steps": steps, "seed": seed}}, TRUE)
    frame = sample_log(made, np.random.default_rng(11)).round(6)
    return TrainingLog(f"sample_{steps}.csv", "0" * 64, pd.DataFrame(frame))


def test_the_dealing_note_is_the_old_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The note's ranges, to the digit, and each seed's fitted constants, to the bit, as when every
    dealing was a run (a 16-step log: each seed's dealing compared step by step)."""
    log = _log(16)
    rs = _spec(values={k: TRUE[k] for k in ("response_median_tokens", "response_sigma")})
    t = tokens(log, rs)
    assert t is not None
    fast = [fit_trainer_profile(log, dataclasses.replace(rs, seed=s), t) for s in range(5)]
    values = fast[0][0]
    note = dealing_spread(log, rs, t, values)
    _the_old_path(monkeypatch)
    slow = [fit_trainer_profile(log, dataclasses.replace(rs, seed=s), t) for s in range(5)]
    assert note is not None and "seeds 1-4" in note
    assert dealing_spread(log, rs, t, values) == note
    assert fast == slow


def test_a_calibration_is_the_old_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole calibration of a 12-step log (its values and intervals to the bit, its notes and
    held-out residuals) as when every dealing was a run."""
    log, rs = _log(12), _spec()
    new = calibrate(log, rs)
    _the_old_path(monkeypatch)
    old = calibrate(log, rs)
    assert (new.values, new.not_identified, new.residuals) == (old.values, old.not_identified, old.residuals)
    assert new.table() == old.table()
    assert any("seeds 1-4" in n for n in new.not_identified)
