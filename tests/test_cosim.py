"""Co-simulation: the real TinyAgent inside the pipeline (scenarios.cosim).

Small pipelines (8 slots, B = 8, a few steps) keep the default run fast; the invariants, the
on-policy identity and the mixed-version property do not depend on size.
"""

from __future__ import annotations

import copy
import json
import math
from functools import cache
from pathlib import Path

import pytest
import torch

from offpolicy import RLConfig, TinyAgent, build_tokenizer, make_rl_base, make_tasks, sample_step, train_rl
from offpolicy.checks import FieldError
from offpolicy.gym import Tokenizer
from pipesim.core.validate import FieldError as PipesimFieldError
from pipesim.testing import check_invariants
from scenarios.cosim import DESIGNS, CosimConfig, CosimResult, run_cosim
from scenarios.cosim_episodes import (
    CosimDurations,
    batch_advantages,
    episode_seconds,
    policy_versions,
    sampled,
    token_end_times,
    truncate,
)
from scenarios.cosim_report import aggregate, cli, curves, format_table, run_record, to_json, write_html

torch.set_num_threads(1)
RL = RLConfig(episodes_per_step=8, group_size=4, minibatches=2)


@cache
def _tok_base() -> tuple[Tokenizer, TinyAgent]:
    tok = build_tokenizer()
    return tok, make_rl_base(tok)


def small(
    design: str,
    correction: str = "none",
    steps: int = 3,
    eval_every_steps: int = 0,
    rl: RLConfig = RL,
    target_pass_rate: float = 0.5,
) -> CosimConfig:
    return CosimConfig(
        design=design,
        correction=correction,
        steps=steps,
        n_slots=8,
        batch_size=8,
        eval_every_steps=eval_every_steps,
        eval_episodes_per_task=1,  # x 40 held-out tasks: as 4 x the defect gym's 10
        target_pass_rate=target_pass_rate,
        rl=rl,
    )


def run_small(cfg: CosimConfig) -> CosimResult:
    return run_cosim(cfg, copy.deepcopy(_tok_base()[1]))


@cache
def shared_run(cfg: CosimConfig) -> CosimResult:
    """``run_small(cfg)`` once per process, for a run several tests read and none changes (the
    invariants' runs, and the partial ones whose versions and pre-sampling tests check)."""
    return run_small(cfg)


def invariant_run(design: str) -> CosimResult:
    """The run of ``design`` that test_every_design_keeps_every_pipeline_invariant checks (TIS,
    4 steps); the tests of what only partial rollouts do read its sync and one-step runs too."""
    return shared_run(small(design, "tis", steps=4))


# -- episodes: duration model and cutting --------------------------------------------------------
def _episodes(n: int = 16) -> list:  # type: ignore[type-arg]
    tok, base = _tok_base()
    return sample_step(
        base, make_tasks("train"), tok, RLConfig(episodes_per_step=n, group_size=4), torch.Generator()
    )


def test_truncate_all_tokens_reproduces_the_episode_and_prefixes_match() -> None:
    tok, _ = _tok_base()
    for ep in _episodes():
        assert truncate(ep, len(sampled(ep)), tok, 3) == ep
        cut = truncate(ep, 1, tok, 3)
        assert sampled(cut) == sampled(ep)[:1] and not cut.done


def test_duration_counts_decode_per_token_and_tool_per_tool_call() -> None:
    tok, _ = _tok_base()
    d = CosimDurations(tokens_scale=10, decode_rate_tok_s=5, tool_median_s=1, tool_sigma=0)
    for ep in _episodes():
        n_tok, n_tool = len(sampled(ep)), ep.n_reads + (not ep.invalid and ep.n_turns > ep.n_reads)
        assert episode_seconds(ep, [1.0] * 3, d, tok) == pytest.approx(2.0 * n_tok + 1.0 * n_tool)
        ends = token_end_times(ep, [1.0] * 3, d, tok)
        assert (
            len(ends) == n_tok and ends == sorted(ends) and ends[-1] <= episode_seconds(ep, [1.0] * 3, d, tok)
        )


def test_batch_advantages_equal_group_advantages_for_whole_groups_and_zero_for_lone() -> None:
    r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    adv = batch_advantages(r, [(0, 0), (0, 0), (0, 1), (0, 1), (1, 0)])
    assert adv.tolist() == [0.5, -0.5, 0.0, 0.0, 0.0]  # unsorted groups: row cosim-groups-unsorted


# -- the co-simulated pipeline ----------------------------------------------------------------------
@pytest.mark.parametrize("design", list(DESIGNS))
def test_every_design_keeps_every_pipeline_invariant(design: str) -> None:
    r = invariant_run(design)
    check_invariants(r.run)
    assert len(r.steps) == 4 and all(s["staleness_max"] <= 4 + 1 for s in r.steps)


def test_eta0_is_exactly_train_rl() -> None:
    """Same generator stream, same episodes: rewards and final weights equal train_rl's; mismatch 0."""
    tok, base = _tok_base()
    ref = copy.deepcopy(base)
    hist = train_rl(ref, make_tasks("train"), tok, RL, 4)
    model = copy.deepcopy(base)
    r = run_cosim(small("sync", steps=4), model)
    assert [s["reward"] for s in r.steps] == [h["reward"] for h in hist]
    assert all(s["mismatch"] == 0.0 and s["staleness_max"] == 0 for s in r.steps)
    for a, b in zip(model.state_dict().values(), ref.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_mixed_versions_only_under_partial_rollouts() -> None:
    partial = shared_run(small("async-eta2", steps=5))
    assert sum(s["mixed_share"] for s in partial.steps) > 0  # it does happen, so the check below can fail
    assert partial.counts["continued"] > 0
    continuation_calls = partial.counts["sample_calls"] - partial.counts["presample_calls"]
    assert continuation_calls <= 5  # one batched continuation per sync
    for design in ("sync", "one-step"):
        r = invariant_run(design)
        assert all(s["mixed_share"] == 0 for s in r.steps), design
        assert r.counts["continued"] == 0


def test_mixed_episodes_carry_consecutive_versions_and_durations_stay_positive() -> None:
    r = shared_run(small("async-eta4", steps=5))
    trained = [e for e in r.run.episodes if e.status == "trained"]
    assert all(e.duration_s > 0 and e.end_s is not None and e.end_s >= e.start_s for e in trained)
    assert any(e.newest_version(r.run.updates) > e.version for e in trained)


def test_same_seed_same_results_and_other_seed_differs() -> None:
    a, b = run_small(small("async-eta1", steps=3)), run_small(small("async-eta1", steps=3))
    assert a.steps == b.steps and a.run.sim_time_s == b.run.sim_time_s
    c = run_small(
        small("async-eta1", steps=3, rl=RLConfig(episodes_per_step=8, group_size=4, minibatches=2, seed=1))
    )
    assert c.steps != a.steps


def test_evaluations_are_logged_against_simulated_time_and_steps() -> None:
    r = run_small(small("async-eta1", steps=4, eval_every_steps=2))
    assert [e["step"] for e in r.evals] == [0, 2, 4]
    times = [e["sim_s"] for e in r.evals]
    assert times == sorted(times) and times[0] == 0.0 and times[-1] <= r.run.sim_time_s
    t = r.time_to_target_h(0.0)
    assert t == 0.0 and math.isnan(r.time_to_target_h(1.01))


def test_report_table_aggregates_seeds(tmp_path: Path) -> None:
    runs = [run_record(run_small(small("sync", steps=2, eval_every_steps=1, rl=RL)))]
    runs.append(dict(runs[0], evals=[dict(e, pass_rate=0.0) for e in runs[0]["evals"]]))  # a seed never there
    runs.append(dict(runs[0], evals=[dict(e, sim_h=e["sim_h"] + 1) for e in runs[0]["evals"]]))
    rows = aggregate(runs, 0.01, also_target=1.01)
    assert rows[0]["design"] == "sync" and rows[0]["reached"] == 2 and rows[0]["seeds"] == 3
    assert rows[0]["time_to_target_h"] == 1.0  # median of (0, 1, never): never counts as slowest
    assert rows[0]["reached_also"] == 0 and math.isinf(rows[0]["time_to_also_h"])
    table = format_table(rows, 0.01)
    assert "sync" in table and "h to 1.01" in table and "never" in table
    assert json.loads(json.dumps(to_json(runs, rows)))["table"][0]["time_to_also_h"] is None
    assert curves(runs)[("sync", "none")]["episodes"] == [0, 8, 16]
    write_html(runs, tmp_path / "f.html", 0.5)
    assert "held-out pass rate" in (tmp_path / "f.html").read_text()


def test_claims_table_gives_intervals_collapses_and_paired_differences() -> None:
    """Final held-out as mean [lo, hi], the collapsed count, and paired differences on shared
    seeds; a 3-seed difference is printed but marked as no claim."""
    from scenarios.cosim_report import claims_table

    def rec(design: str, corr: str, seed: int, final: float) -> dict[str, object]:
        return dict(design=design, correction=corr, seed=seed, summary=dict(final_pass_rate=final))

    finals = {"none": [0.6, 0.0, 0.5], "tis": [0.7, 0.4, 0.6]}
    records = [rec("async-eta2", c, s, f) for c, fs in finals.items() for s, f in zip((1, 2, 3), fs)]
    records += [rec("sync", c, s, 0.8) for c in finals for s in (1, 2, 3)]
    table = claims_table(records)
    assert "async-eta2  none  | 3  | 0.37 [" in table and "| 1/3" in table  # seed 2 collapsed
    assert "async-eta2 tis - async-eta2 none | +0.20 [" in table and "no claim" in table
    assert "sync none" in table.split("paired")[1]  # each design against sync


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(design="nope"), "design"),
        (dict(correction="xx"), "correction"),
        (dict(steps=0), "steps"),
        (dict(n_slots=0), "n_slots"),
        (dict(target_pass_rate=2.0), "target_pass_rate"),
        (dict(eval_every_steps=-1), "eval_every_steps"),
        (dict(train_time_s=-1.0), "train_time_s"),
    ],
)
def test_bad_config_names_the_field(kw: dict[str, object], field: str) -> None:
    """The co-simulation's own fields raise offpolicy's FieldError; the pipeline's (``steps``,
    ``n_slots``, ``train_time_s``, checked by the scenario it builds) pipesim's: each names it."""
    with pytest.raises((FieldError, PipesimFieldError)) as info:
        CosimConfig(**kw)  # type: ignore[arg-type]
    assert info.value.field == field, str(info.value)
    # CosimDurations(tokens_scale=0): row cosim-tokens-scale of tests/test_refusals_offpolicy.py


def test_cli_rejects_unknown_names_listing_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli(["--designs", "sync,warp"])
    err = capsys.readouterr().err
    assert "warp" in err and "async-eta4" in err
    with pytest.raises(SystemExit):
        cli(["--corrections", "bogus"])
    assert "seq-tis" in capsys.readouterr().err


def test_token_versions_never_decrease_and_never_exceed_the_trained_version() -> None:
    r = shared_run(small("async-eta4", steps=5))
    trained = [e for e in r.run.episodes if e.status == "trained"]
    n_mixed = 0
    for e in trained:
        vs = [v for _, _, v in sampled(r.real[e.id])]
        # >=: a sync that lands before the first token is complete resamples it under newer weights
        assert vs == sorted(vs) and vs[0] >= e.version and vs[-1] <= e.trained_version
        assert vs[-1] <= e.newest_version(r.run.updates)
        n_mixed += len(policy_versions(r.real[e.id])) > 1
    assert n_mixed > 0


@pytest.mark.slow
def test_full_size_run_keeps_invariants_and_costs_at_most_1_5x_train_rl() -> None:
    """64 slots, B = 64, 40 steps (the issue's budget); CPU time is noisy on a shared machine."""
    from scenarios.cosim_report import PERF_GOAL, PERF_RUN_LIMIT, perf_protocol

    perf = perf_protocol("async-eta4", 40, log=False)  # 5 seeds: the median and the worst run
    assert perf["median"] <= PERF_GOAL and perf["max"] <= PERF_RUN_LIMIT, perf["ratios"]
    r = run_cosim(
        CosimConfig(design="async-eta2", steps=10, eval_every_steps=0), copy.deepcopy(_tok_base()[1])
    )
    check_invariants(r.run)


def test_presampling_wastes_at_most_one_group_per_version_and_sync_uses_full_chunks() -> None:
    """A version's first chunk is a full training step's worth; later chunks are one group each,
    so the pre-sampled episodes no slot ever starts are fewer than a group per version."""
    r = shared_run(small("async-eta2", steps=5))
    versions = len(r.run.updates) + 1
    assert r.counts["launched"] <= r.counts["presampled"] < r.counts["launched"] + versions * RL.group_size
    s = invariant_run("sync")  # 4 steps
    assert s.counts["presampled"] == s.counts["launched"] == 4 * RL.episodes_per_step


def test_bucketed_continuation_samples_what_the_padded_one_does() -> None:
    """Episodes cut at very different lengths, continued with and without length buckets: the
    same tokens (one multinomial over the same rows) and log-probs equal up to rounding."""
    from offpolicy.rollout import continue_episodes, length_buckets

    tok, base = _tok_base()
    cuts = [truncate(ep, k % 4, tok, 3) for k, ep in enumerate(_episodes(16))]
    assert len({len(c.tokens) for c in cuts}) > 2
    a, b = copy.deepcopy(cuts), copy.deepcopy(cuts)
    continue_episodes(base, a, tok, torch.Generator().manual_seed(3), 1.0, 3, 1)
    continue_episodes(base, b, tok, torch.Generator().manual_seed(3), 1.0, 3, 1, bucket=True)
    assert [e.tokens for e in a] == [e.tokens for e in b]
    assert [e.reward for e in a] == [e.reward for e in b]
    for x, y in zip(a, b):
        assert torch.allclose(torch.tensor(x.sample_logp), torch.tensor(y.sample_logp), atol=1e-5)
    groups = length_buckets([6, 40, 7, 42, 80, 6])
    assert sorted(i for g in groups for i in g) == list(range(6)) and len(groups) == 3


def test_resume_skips_only_the_runs_stored_at_the_same_learning_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    import scenarios.cosim_report as report

    ran: list[tuple[str, int, float]] = []
    monkeypatch.setattr(report, "run_cosim", lambda cfg: ran.append((cfg.design, cfg.seed, cfg.rl.lr)))
    base = small("sync", rl=RLConfig(episodes_per_step=16, group_size=4, lr=3e-4))
    stored = [
        dict(design="sync", correction="none", seed=1, lr=3e-4),  # same lr: skipped
        dict(design="sync", correction="none", seed=2, lr=1e-3),  # another lr: run again
        dict(design="sync", correction="none", seed=3),  # no lr (older files): the default's
        dict(design="sync", correction="none", seed=4, lr=3e-4, gym="other"),  # another gym: run again
        dict(design="sync", correction="none", seed=5, lr=3e-4, steps=[{}] * (base.steps + 1)),  # other steps
    ]
    report.run_grid(["sync"], ["none"], [1, 2, 3, 4, 5], base, log=False, done=stored)
    assert ran == [("sync", 2, 3e-4), ("sync", 4, 3e-4), ("sync", 5, 3e-4)] and RLConfig().lr == 3e-4
    with pytest.raises(SystemExit):
        cli(["--lr", "0", "--seeds", "1"])


def test_run_records_carry_the_learning_rate() -> None:
    r = run_small(small("sync", steps=1, rl=RLConfig(episodes_per_step=16, group_size=4, lr=5e-4)))
    assert run_record(r)["lr"] == 5e-4
    assert len(run_record(r)["steps"]) == 1  # one record per step: what a resume compares


def test_race_table_counts_who_reached_the_target_first_per_seed() -> None:
    from scenarios.cosim_report import race_table

    def rec(design: str, seed: int, hours: list[float], rates: list[float]) -> dict[str, object]:
        evals = [dict(sim_h=h, pass_rate=p) for h, p in zip(hours, rates)]
        return dict(design=design, correction="none", seed=seed, evals=evals)

    records = []
    for seed in range(10):
        records.append(rec("sync", seed, [0.0, 1.0, 2.0], [0.2, 0.5, 0.9 if seed < 9 else 0.5]))
        fast = [0.2, 0.9, 0.9] if seed < 8 else ([0.2, 0.5, 0.5] if seed == 8 else [0.2, 0.3, 0.4])
        records.append(rec("async-eta2", seed, [0.0, 0.4, 0.8], fast))
    table = race_table(records, 0.8)
    # seeds 0-7: async first; seed 8: async never, sync at 2 h (later); seed 9: neither (tied)
    assert "async-eta2 none  |  8 /  1 /  1 of 10 | p = 0.039, significant" in table
    assert "sync none" not in table


def test_a_diverging_run_is_kept_as_collapsed_and_the_tables_read_it(tmp_path: Path) -> None:
    """lr 1e6 broke TinyAgent inside the SimPy run (a torch traceback from sampling, raised through
    pipesim); now the run ends there, ``diverged`` says where, its final pass rate is 0 (collapsed)
    and every table and the figure read it beside a healthy run."""
    from scenarios.cosim_report import claims_table

    huge = RLConfig(episodes_per_step=8, group_size=4, minibatches=2, lr=1e6)
    bad = run_small(small("async-eta2", steps=6, eval_every_steps=1, rl=huge))
    assert bad.diverged is not None and bad.diverged["steps_done"] < 6
    assert len(bad.steps) == bad.diverged["steps_done"] and bad.summary()["final_pass_rate"] == 0.0
    good = run_small(small("async-eta2", steps=2, eval_every_steps=1))
    records = [dict(run_record(bad), seed=1), dict(run_record(good), seed=2)]
    records = json.loads(json.dumps(records))  # as stored (NaN -> None)
    assert records[0]["diverged"] == bad.diverged and records[1]["diverged"] is None
    rows = aggregate(records, 0.5)
    assert rows[0]["seeds"] == 2 and format_table(rows, 0.5)
    assert "| 1/2" in claims_table(records)  # the diverged seed is counted as collapsed
    assert len(curves(records)[("async-eta2", "none")]["mean"]) == max(len(r["evals"]) for r in records)
    write_html(records, tmp_path / "f.html", 0.5)


def test_ctrl_c_keeps_the_finished_runs_and_exits_130(tmp_path: Path) -> None:
    """Ctrl-C used to print SimPy's KeyboardInterrupt traceback and die from SIGINT; now one line
    saying what --json keeps, exit 130, and the finished runs are in the file (written whole)."""
    from tests.test_offpolicy_interrupts import check_one_line, interrupt_after_first_run

    out = tmp_path / "runs.json"
    argv = ["--designs", "sync", "--corrections", "none", "--seeds", "50", "--steps", "1"]
    rc, err, runs, seen = interrupt_after_first_run("scenarios.cosim", [*argv, "--json", str(out)], out)
    check_one_line(rc, err, runs, seen, "python -m scenarios.cosim", out)


def test_race_table_holds_its_claims_to_holm_over_the_races() -> None:
    """Each race row's verdict is its own p; the doc called four designs significantly first to 0.8
    on those, where Holm over the 8 races keeps one. The table now says which survive, and a row
    of fewer than 10 seeds makes no claim (it printed "significant (n < 10: no claim)")."""
    from offpolicy.stats import holm, sign_test
    from scenarios.cosim_report import race_table

    def rec(design: str, seed: int, first: bool) -> dict[str, object]:
        hours = [0.0, 0.5 if first else 2.0]
        return dict(
            design=design,
            correction="none",
            seed=seed,
            evals=[dict(sim_h=h, pass_rate=p) for h, p in zip(hours, [0.1, 0.9])],
        )

    records = [
        dict(
            design="sync",
            correction="none",
            seed=s,
            evals=[dict(sim_h=0.0, pass_rate=0.1), dict(sim_h=1.0, pass_rate=0.9)],
        )
        for s in range(10)
    ]
    wins = {"a": 10, "b": 9, "c": 8}  # first on that many of 10 seeds, later on the rest
    for design, w in wins.items():
        records += [rec(design, s, s < w) for s in range(10)]
    table = race_table(records, 0.8)
    ps = [sign_test(w, 10 - w) for w in wins.values()]
    kept = [d for d, q in zip(wins, holm(ps)) if q < 0.05]
    survivors = ", ".join(d + " none" for d in kept) or "none survives"
    assert kept == ["a", "b"]  # 10/10 and 9/10 survive (0.006, 0.042 adjusted); 8/10 (p = 0.109) not
    assert f"Holm over the 3 races of >= 10 seeds (sign test, 5%): {survivors}" in table
    few = race_table([r for r in records if int(r["seed"]) < 5], 0.8)  # type: ignore[call-overload]
    assert "no claim" in few and "significant" not in few and "Holm" not in few
