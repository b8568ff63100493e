"""``pipesim plan`` (issue 19): the search against the exhaustive grid, a constructed case with a
known best split, the front's feasibility and non-dominance, and bad input. Small clusters only."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

import pipesim
import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, ClosedLoop, LogNormalLengths, TokenWorkload, TrainerConfig
from pipesim.plan.build import engine_config
from pipesim.plan.evaluate import FRONT_TOLERANCE, dominates, objectives, run_design
from tests.test_refusals_core import check_refusal

ROOT = Path(__file__).resolve().parent.parent
WORK = TokenWorkload(
    response=LogNormalLengths(300.0, 0.8),
    prompt=128,
    samples_per_prompt=4,
    max_response_tokens=2048,
    difficulty_sigma=0.3,
)


def small_spec(**changes: object) -> plan.PlanSpec:
    base = plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=8,
        model=MODELS["qwen3-0.6b"],
        workload=WORK,
        batch_size=64,
        constraints=plan.Constraints(mean_staleness=1.0, max_staleness=5),
        space=plan.Space(
            placement=(0, 2, 4, 6),
            eta=(0, 1, 2),
            update=("drain", "partial", "abort_reprefill"),
            oversample=(1.0,),
        ),
        steps=6,
        screen_steps=2,
        seeds=2,
        max_model_len=4096,
        max_num_seqs=64,
        min_full=6,
        batch=8,
    )
    return base.with_(**changes)


@functools.cache
def grid_plan() -> plan.PlanResult:
    """``small_spec``'s grid plan (seed 0, no sensitivity), computed once per process: read only,
    by the ``grid`` fixture here and by ``tests/test_plan_judge.py``, which import it as
    ``tests.test_plan``."""
    return plan.plan(small_spec(method="grid"), seed=0, with_sensitivity=False)


@pytest.fixture(scope="module")
def grid() -> plan.PlanResult:
    return grid_plan()


@pytest.mark.parametrize("seed", [0, 1])
def test_optimiser_finds_the_grid_best(grid: plan.PlanResult, seed: int) -> None:
    """NSGA-II screening two thirds of a 36-design space finds the grid's best (which needs the
    staleness constraints: the fastest designs violate them), or a design the grid's full runs put
    within 1% of it: the space has near ties (a colocated and a 4:4 split design 0.1% apart, since
    the colocated switch cost was modelled), and which of those wins depends on the screening.
    Since issue 43 a max staleness at the 6-step ceiling of an unbounded design is not feasible,
    so the best is a synchronous (eta 0) design; NSGA-II must land within 5% of it."""
    assert grid.method == "grid" and grid.n_screened == grid.n_candidates == 36
    assert grid.best is not None and grid.best.throughput < max(e.throughput for e in grid.full)
    opt = plan.plan(small_spec(method="optuna", trials=24), seed=seed, with_sensitivity=False)
    assert opt.method == "optuna" and opt.n_screened == 24 < grid.n_candidates
    assert opt.best is not None
    best = grid.best.throughput
    near = {e.design: e.throughput for e in grid.full if e.feasible and e.throughput >= 0.99 * best}
    assert len(near) <= 3  # the 1% band is a real target among the 36, not a large part of them
    # within 5% of the grid's best, issue 43's goal (a full run is a pure function of design and
    # seeds, so the number is the one the grid would get; the grid need not have promoted it)
    assert best * 0.95 <= opt.best.throughput <= max(e.throughput for e in grid.screened)
    if opt.best.design in near:
        assert opt.best.throughput == pytest.approx(near[opt.best.design])


def test_optuna_is_reproducible_with_a_seed() -> None:
    spec = small_spec(method="optuna", trials=12, steps=2, seeds=1)
    a = plan.search(spec, seed=3)
    b = plan.search(spec, seed=3)
    assert [e.design for e in a.screened] == [e.design for e in b.screened]
    assert [e.metrics for e in a.full] == [e.metrics for e in b.full]


def test_parallel_workers_change_nothing() -> None:
    spec = small_spec(method="optuna", trials=10, steps=2, seeds=1)
    serial = plan.search(spec, seed=1)
    parallel = plan.plan(spec, seed=1, workers=2, with_sensitivity=False)
    assert [e.design for e in serial.screened] == [e.design for e in parallel.screened]
    assert [e.metrics for e in serial.full] == [e.metrics for e in parallel.full]


def test_front_is_feasible_and_not_dominated(grid: plan.PlanResult) -> None:
    assert grid.front and grid.best is not None
    assert grid.best in grid.front
    assert grid.best.throughput == max(e.throughput for e in grid.feasible)
    for e in grid.front:
        assert e.feasible
        assert grid.spec.constraints.feasible(e.metrics)
        assert e.steps == grid.spec.steps and e.metrics["seeds"] == grid.spec.seeds
        for other in grid.front:  # within the front's tolerance (pipesim.plan.evaluate)
            assert not dominates(objectives(other.metrics), objectives(e.metrics), FRONT_TOLERANCE)
    # every feasible full design off the front is dominated by one on it
    for e in grid.feasible:
        if e not in grid.front:
            assert any(
                dominates(objectives(f.metrics), objectives(e.metrics), FRONT_TOLERANCE) for f in grid.front
            )
    # successive halving: fewer designs at each rung, the full runs a subset of the screened
    counts = [n for _, n in grid.rungs]
    assert counts == sorted(counts, reverse=True) and counts[-1] < counts[0]
    assert {e.design for e in grid.full} <= {e.design for e in grid.screened}


def test_best_split_equalises_rollout_and_training() -> None:
    """Disaggregated only, constant lengths (no tail), no sync cost, every replica saturated: the
    best split is where (n - x) replicas generate as fast as x GPUs train."""
    work = TokenWorkload(response=LogNormalLengths(256.0, 0.0), prompt=64, max_response_tokens=512)
    n = 16
    spec = plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=n,
        model=MODELS["qwen3-0.6b"],
        workload=work,
        batch_size=256,
        space=plan.Space(placement=tuple(range(1, n)), eta=(2,), update=("partial",)),
        steps=10,
        screen_steps=3,
        seeds=1,
        max_model_len=2048,
        max_num_seqs=32,
        mfu=0.1,
        sync_time_s=0.0,
        method="grid",
    )
    closed_loop: Any = ClosedLoop  # a lazy attribute of pipesim.compute
    per_replica = closed_loop(engine_config(spec, 1), work, 32).run(32 * 40)["tokens_per_s"] / 256
    per_trainer_gpu = 1 / TrainerConfig(model=spec.model, gpu=spec.gpu, n_gpus=1, mfu=0.1).step_time_s(320)
    balance = n * per_replica / (per_replica + per_trainer_gpu)
    assert 3 < balance < 13  # an interior optimum
    result = plan.plan(spec, with_sensitivity=False)
    assert result.best is not None and not result.best.design.colocated
    assert abs(result.best.design.trainer_gpus - balance) <= 1


def test_constraints_no_design_meets_name_the_tightest() -> None:
    spec = small_spec(
        constraints=plan.Constraints(mean_staleness=0.01, max_staleness=5),
        space=plan.Space(placement=(2, 4), eta=(2,), update=("partial",)),
        steps=4,
        seeds=1,
    )
    with pytest.raises(plan.PlanInfeasible) as info:
        plan.plan(spec, with_sensitivity=False)
    msg = str(info.value)
    assert "tightest is mean_staleness" in msg and "best value reached is" in msg
    assert "no design meets it even alone" in msg
    assert info.value.result.full and not info.value.result.feasible


def test_a_cost_limit_no_design_meets_is_named_as_the_tightest() -> None:
    """A price per million trained tokens no design reaches: the message names cost_per_mtok (it
    had no entry in the explanation's table, which then had no row to name)."""
    spec = small_spec(
        constraints=plan.Constraints(cost_per_mtok=1e-9),
        cost_per_gpu_hour=2.0,
        space=plan.Space(placement=(2, 4), eta=(1,), update=("partial",)),
        steps=4,
        seeds=1,
    )
    with pytest.raises(plan.PlanInfeasible) as info:
        plan.plan(spec, with_sensitivity=False)
    assert "tightest is cost_per_mtok" in str(info.value)


def test_an_offpolicy_token_limit_keeps_the_designs_whose_trained_tokens_meet_it() -> None:
    """``constraints.offpolicy_token_share``: every design kept (front and recommendation) trains at
    most that share of tokens an older policy generated, over its full runs; a zero limit leaves
    only designs that train on-policy, and an infeasible limit is named as the tightest."""
    space = plan.Space(placement=(0, 4), eta=(0, 1, 2), update=("drain", "partial"), oversample=(1.0,))
    spec = small_spec(constraints=plan.Constraints(offpolicy_token_share=0.0), space=space, steps=4, seeds=1)
    result = plan.plan(spec, with_sensitivity=False)
    assert result.best is not None and result.front
    for e in result.front:
        assert e.metrics["offpolicy_token_share"] == 0.0
    # the run metric the limit reads is the compute summary's, and asynchronous designs train some
    assert any(e.metrics["offpolicy_token_share"] > 0 for e in result.screened if e.design.eta > 0)
    tight = small_spec(
        constraints=plan.Constraints(offpolicy_token_share=0.0),
        space=plan.Space(placement=(4,), eta=(2,), update=("partial",)),
        steps=4,
        seeds=1,
    )
    with pytest.raises(plan.PlanInfeasible) as info:
        plan.plan(tight, with_sensitivity=False)
    assert "tightest is offpolicy_token_share" in str(info.value)


def test_model_that_does_not_fit_is_rejected_before_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    import pipesim.plan.evaluate as ev

    def boom(*a: object) -> None:
        raise AssertionError("no design may run")

    monkeypatch.setattr(ev, "run_design", boom)
    spec = small_spec(gpu=GPUS["l40s"], model=MODELS["qwen3-32b"], max_model_len=None)
    check_refusal(lambda: plan.plan(spec, with_sensitivity=False), plan.PlanError, "space.tp")


def test_min_trainer_gpus_leaving_no_split_is_an_error() -> None:
    spec = small_spec(constraints=plan.Constraints(min_trainer_gpus=8), space=plan.Space(placement=(2, 4)))
    check_refusal(lambda: plan.search(spec), plan.PlanError, "space")


def test_min_trainer_gpus_applies_to_colocated_designs_too() -> None:
    # colocated trains on all 8 GPUs: allowed at a minimum of 8, not at 9 (it was allowed at any)
    at_8 = small_spec(constraints=plan.Constraints(min_trainer_gpus=8))
    assert {d.trainer_gpus for d in plan.candidates(at_8)} == {0}
    check_refusal(
        lambda: plan.search(small_spec(constraints=plan.Constraints(min_trainer_gpus=9))),
        plan.PlanError,
        "space",
    )


def test_spec_file_and_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = plan.load(ROOT / "examples" / "plan_qwen3_8b.toml")
    assert example.n_gpus == 64 and example.workload.samples_per_prompt == 16
    assert len(plan.candidates(example)) > example.grid_limit  # Optuna territory
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        """
[cluster]
gpu = "h100-sxm"
n_gpus = 4
[model]
name = "qwen3-0.6b"
max_model_len = 4096
max_num_seqs = 32
[workload]
prompts_per_step = 8
samples_per_prompt = 4
prompt_tokens = 128
response = { median_tokens = 200, sigma = 0.5 }
max_response_tokens = 1024
[constraints]
max_staleness = 4
[space]
placement = ["colocated", 2]
eta = [0, 1]
update = ["drain", "partial"]
[search]
steps = 3
screen_steps = 1
seeds = 2
"""
    )
    out_json, out_html = tmp_path / "plan.json", tmp_path / "plan.html"
    rc = plan.main([str(spec), "--json", str(out_json), "--html", str(out_html), "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "recommended:" in text and "pipesim.Scenario(" in text and "sensitivity" in text
    data = json.loads(out_json.read_text())
    assert data["recommended"]["feasible"] and data["front"]
    assert {"sync cost x2", "trainer MFU -20%"} <= {s["variant"] for s in data["sensitivity"]}
    page = out_html.read_text()
    assert page.count("* plotly.js v") == 1 and "<script src" not in page  # embedded once, no CDN
    assert "Pareto front" in page
    # infeasible: exit code 3 and the message on stderr (a negative limit is a spec error, exit 2)
    text = spec.read_text().replace("max_staleness = 4", "max_staleness = 4\nmean_staleness = 0.01")
    text = text.replace("eta = [0, 1]", "eta = [2]").replace(
        'update = ["drain", "partial"]', 'update = ["partial"]'
    )
    spec.write_text(text)
    assert plan.main([str(spec), "--quiet"]) == 3
    assert "tightest is mean_staleness" in capsys.readouterr().err


def test_bad_spec_names_the_key(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('[cluster]\ngpu = "h100-sxm"\nn_gpus = 4\nbogus = 1\n[model]\nname = "qwen3-0.6b"\n')
    err = check_refusal(lambda: plan.load(spec), plan.PlanError, "cluster.bogus")
    assert err.file == str(spec)
    assert plan.main([str(spec)]) == 2


def test_import_is_light() -> None:
    """Optuna, Plotly and tqdm load only when a search, a figure or a bar needs them."""
    import subprocess
    import sys

    code = (
        "import sys, pipesim.plan\n"
        "heavy = [m for m in ('optuna', 'plotly', 'tqdm') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_shared_prefixes_reach_the_engine_the_routing_the_code_and_the_spec_file(tmp_path: Path) -> None:
    from pipesim.plan.build import routing
    from pipesim.plan.code import scenario_code
    from pipesim.plan.evaluate import run_design

    on, off = small_spec(share_group_prefix=True), small_spec()
    assert engine_config(on, 1).share_group_prefix and not engine_config(off, 1).share_group_prefix
    assert routing(on) == pipesim.GroupAffinity(4) and routing(off) is None
    d = next(d for d in plan.candidates(on) if not d.colocated and d.eta == 1 and d.update == "partial")
    m_on, m_off = run_design(on, d, 2, 0), run_design(off, d, 2, 0)
    assert m_on["failed"] == 0 and m_on["ledger_closes"] and m_off["failed"] == 0
    assert m_on["concurrency_mean"] != m_off["concurrency_mean"]  # the engines did share
    code = scenario_code(on, d)
    assert "share_group_prefix=True" in code and "routing=pipesim.GroupAffinity(group_size=4)" in code
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the report's code runs as printed
    assert namespace["run"].ledger.closes() and namespace["run"].engines[0]["shared_prefix_tokens"] > 0
    assert "share_group_prefix" not in scenario_code(off, d) and "routing=" not in scenario_code(off, d)
    check_refusal(lambda: small_spec(share_group_prefix="yes"), plan.PlanError, "model.share_group_prefix")
    spec = tmp_path / "share.toml"
    spec.write_text(
        '[cluster]\ngpu = "h100-sxm"\nn_gpus = 4\n[model]\nname = "qwen3-0.6b"\nshare_group_prefix = true\n'
        "[workload]\nprompts_per_step = 8\nsamples_per_prompt = 4\nprompt_tokens = 128\n"
        "response = { median_tokens = 200, sigma = 0.5 }\nmax_response_tokens = 1024\n"
    )
    assert plan.load(spec).share_group_prefix


def test_a_step_dealing_trainer_gets_a_sensitivity_line_for_verls_newer_dealing() -> None:
    """With a framework profile that deals as verl did before its PR #3605 ("step"), the note adds
    the same designs dealt "sorted"; with the exactly balanced one-MFU trainer it does not."""
    from pipesim.compute.profiles import profile
    from pipesim.plan.explain import sensitivity

    space = plan.Space(placement=(0, 4), eta=(1,), update=("partial",))
    kw: dict[str, object] = dict(method="grid", space=space, steps=3, screen_steps=1, seeds=1)
    kw |= dict(ppo_mini_batch_samples=16, constraints=plan.Constraints())
    line = "ranks dealt as verl does since PR #3605"
    one_mfu = plan.plan(small_spec(**kw), with_sensitivity=False)
    assert line not in {s["variant"] for s in sensitivity(one_mfu)}
    framework = plan.plan(small_spec(framework=profile("fsdp2-dense"), **kw), with_sensitivity=False)
    lines = {s["variant"]: s for s in sensitivity(framework)}
    assert line in lines and lines[line]["throughput_after"] >= lines[line]["throughput_before"] * 0.98


def test_the_recommended_code_is_formatted_as_ruff_formats_it() -> None:
    """The code a plan prints (every candidate design of two specs, wrapped as printed) is the
    same program as the one built (formatting only changes quotes and a blank line), and
    ``ruff format`` leaves it unchanged: a user pastes it into a project that formats its code
    (docs/plan.md holds one, and the repository's format check covers the docs)."""
    import ast
    import subprocess
    import sys

    from pipesim.plan.code import _program, scenario_code, wrap_code

    for spec in (small_spec(share_group_prefix=True), small_spec()):
        designs = plan.candidates(spec)
        programs = [wrap_code(scenario_code(spec, d)) for d in designs]
        for d, code in zip(designs, programs, strict=True):
            assert ast.dump(ast.parse(code)) == ast.dump(ast.parse(_program(spec, d))), d
        text = "\n\n".join(sorted(set(programs))) + "\n"
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", "format", "--diff", "-"],
            input=text.replace("\n\nimport pipesim", "\n\n\nimport pipesim"),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


@pytest.mark.parametrize("eta", [1, 2])
def test_an_abort_design_keeps_its_admission_budget_over_a_long_run(eta: int) -> None:
    """``abort`` drops what each sync interrupts. Under the count throttle (it counts starts) each
    dropped sample used up budget for good: the run drifted to synchronous (nothing stale in its
    later half) and its throughput fell with its length (67k, 58k, 54k samples/h at 6, 12, 24
    steps at eta 2). Its admission now subtracts drops, as slime's abort path does."""
    spec = small_spec(steps=12)
    d = plan.Design(4, 1, eta, "abort")
    short, long = run_design(spec, d, 6, 0), run_design(spec, d, 24, 0)
    assert long["throughput_per_hour"] >= 0.9 * short["throughput_per_hour"]
    assert long["staleness_late_mean"] > 0
