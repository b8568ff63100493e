"""What ``pipesim run`` and ``pipesim plan`` say of a spec: the pool bound, a tight trainer, and a
verification with nothing to verify.

* A run spec too large for a run's task pool is refused naming the key, with the numbers of its
  own design or of the least pool any design draws, and arithmetic that gives the number stated,
  against the documented limit (``MAX_DURATION_POOL``). Before, ``run.steps = 2**28`` was told
  of its default space's ``oversample 1.25 x 3`` and a limit of 2**28, and ``max_num_seqs`` of
  ``max_num_seqs x n_gpus`` as twice that product.
* A run spec's tight trainer gets the line a plan warns with (``pipesim run`` said nothing), and
  the plan's warning is one plain line, once (it was two Python warnings, with file and line).
* A plan with no staleness limit verifies nothing: its pick is not "proved by its declared bound"
  (``partial`` declares none).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan import runspec, specfile
from pipesim.plan.checks import PlanError
from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.judge import bound

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "examples" / "run_qwen3_8b.toml"
PLAN = ROOT / "examples" / "plan_qwen3_8b.toml"
N = r"([\d,]+)"


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def _my32(**design: Any) -> dict[str, Any]:
    """Qwen3-32B on 32 H100s, 16:16 at TP 2 (a trainer of 7 GPUs holds its state, not also a
    micro-batch's activations)."""
    return {
        "kind": "compute",
        "cluster": {"gpu": "h100-sxm", "n_gpus": 32},
        "model": {"name": "qwen3-32b", "max_model_len": 20480, "max_num_seqs": 128, "mfu": 0.35},
        "workload": {
            "prompts_per_step": 16,
            "samples_per_prompt": 8,
            "prompt_tokens": 1024,
            "response": {"median_tokens": 3000, "sigma": 0.7},
            "max_response_tokens": 16384,
        },
        "design": {"placement": 16, "tp": 2, "eta": 1, "update": "partial", "oversample": 1.0, **design},
        "run": {"steps": 8},
    }


# -- 1. the pool bound -------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "key"), [(RUN, "run.steps"), (PLAN, "search.steps")])
def test_huge_steps_name_the_key_and_sum_to_the_number_stated(path: Path, key: str) -> None:
    load = runspec.load if key == "run.steps" else specfile.load
    with pytest.raises(PlanError) as info:
        load(path, [f"{key}=268435456"])
    msg = str(info.value)
    assert info.value.field == key
    assert "space" not in msg and "1.25" not in msg  # a run spec has no space; its design no 1.25
    m = re.search(rf"\({key} {N} \+ 1\) x batch {N} \+ model.max_num_seqs {N} = {N} tasks", msg)
    assert m, msg
    steps, batch, seqs, total = (_n(g) for g in m.groups())
    assert steps == 268435456 and (steps + 1) * batch + seqs == total
    assert f"more than the {MAX_DURATION_POOL:,}" in msg  # the documented limit (docs/runspec.md)


def _engine_sum(msg: str) -> tuple[int, ...]:
    m = re.search(
        rf"model.max_num_seqs \({N}\) x {N} replicas \(the engine GPUs of cluster.n_gpus over "
        rf"design.tp\): the run draws a task pool of {N} tasks "
        rf"\(\(steps {N} \+ design.eta {N} \+ 1\) x batch {N} \+ {N} engine sequences\)",
        msg,
    )
    assert m, msg
    return tuple(_n(g) for g in m.groups())


def test_a_run_specs_engine_sequences_are_its_designs_replicas() -> None:
    """``check_run_pool`` counts the design's 8 replicas (16 rollout GPUs at TP 2), not the 32
    GPUs, and names model.max_num_seqs where no number of steps fits."""
    from pipesim.plan.build import check_run_pool

    rs = runspec.from_dict(_my32())
    spec = rs.plan.with_(max_num_seqs=10_000_000)
    with pytest.raises(PlanError) as info:
        check_run_pool(spec, rs.design, rs.steps)
    assert info.value.field == "model.max_num_seqs"
    seqs, replicas, pool, steps, eta, batch, slots = _engine_sum(str(info.value))
    assert (seqs, replicas, steps, eta) == (10_000_000, 8, rs.steps, rs.design.eta)
    assert seqs * replicas == slots and (steps + eta + 1) * batch + slots == pool
    assert f"more than the {MAX_DURATION_POOL:,}" in str(info.value)


def test_a_run_whose_sequences_fill_the_pool_names_max_num_seqs_before_it_runs() -> None:
    data = _my32()
    data["model"]["max_num_seqs"] = 1_000_000
    with pytest.raises(PlanError) as info:  # at load (check_run_pool) or as the run is built
        runspec.run(runspec.from_dict(data))
    assert info.value.field == "model.max_num_seqs"
    seqs, replicas, pool, steps, eta, batch, slots = _engine_sum(str(info.value))
    assert seqs * replicas == slots and (steps + eta + 1) * batch + slots == pool > MAX_DURATION_POOL


# -- 2. a tight trainer ------------------------------------------------------------------------


def _figures(text: str) -> list[str]:
    return re.findall(r"[\d.]+ GiB", text)


def test_a_run_spec_gets_the_plans_tight_trainer_warning_as_one_line() -> None:
    from pipesim.plan.build import TrainerMemoryWarning, placements, trainer_memory_note

    rs = runspec.from_dict(_my32(placement=7, tp=1))
    with pytest.warns(TrainerMemoryWarning) as got:
        assert 7 in placements(rs.plan, 1)
    said = [str(w.message) for w in got if "trainer of 7" in str(w.message)]
    assert said
    note = trainer_memory_note(rs.plan, rs.design)
    assert note is not None and "\n" not in note and note.startswith("pipesim: warning: a trainer of 7 x")
    assert _figures(note) == _figures(said[0])  # the same state, activations and HBM
    assert "design.placement" in note
    assert trainer_memory_note(runspec.from_dict(_my32()).plan, runspec.from_dict(_my32()).design) is None


def test_plain_warnings_say_each_text_once_plainly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pipesim.plan.build import TrainerMemoryWarning
    from pipesim.plan.checks import plain_warnings

    with plain_warnings():
        warnings.warn("a tight  trainer\n of 7", TrainerMemoryWarning, stacklevel=1)
        warnings.warn("a tight trainer of 7", TrainerMemoryWarning, stacklevel=1)  # another line
    err = capsys.readouterr().err
    assert err.splitlines() == ["pipesim: warning: a tight trainer of 7"]
    with pytest.raises(TrainerMemoryWarning), plain_warnings():  # -W error still raises
        warnings.simplefilter("error")
        warnings.warn("x", TrainerMemoryWarning, stacklevel=1)


# -- 3. nothing to verify ----------------------------------------------------------------------


def _full(spec: plan.PlanSpec, update: str) -> list[Evaluated]:
    """Two feasible full runs of ``update`` designs at eta 0, the faster first (never run here)."""
    designs = [d for d in plan.candidates(spec) if d.update == update and d.eta == 0][:2]
    return [
        Evaluated(d, spec.steps, [], {"throughput_per_hour": 100.0 - i}, feasible=True)
        for i, d in enumerate(designs)
    ]


def test_a_plan_without_a_staleness_limit_has_nothing_to_verify() -> None:
    from pipesim.plan.verify import NO_LIMIT, PROVED, needs_verification, verify

    spec = specfile.load(PLAN).with_(constraints=plan.Constraints(discarded_share=0.05))
    best = verify(spec, Evaluator(spec), _full(spec, "partial"))[0]
    assert bound(spec, best.design) is None  # partial declares no bound: none proved it
    assert not needs_verification(spec, best.design) and best.verified == NO_LIMIT
    assert "declared bound" not in best.verified
    # with a limit, a design whose bound proves it (drain at eta 0) is still "proved"
    limited = spec.with_(constraints=plan.Constraints(discarded_share=0.05, max_staleness=2))
    drained = verify(limited, Evaluator(limited), _full(limited, "drain"))[0]
    assert bound(limited, drained.design) == 0 and drained.verified == PROVED
