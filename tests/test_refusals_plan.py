"""The plan's checks (:mod:`pipesim.plan.checks`), the configs that run them and a spec file
refuse bad input with a :class:`~pipesim.plan.checks.PlanError` (a ``FieldError``) whose ``field``
is the key as ``table.key`` and, from a file, whose ``file`` is the spec. Rows: call, ``err.field``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.plan import checks
from pipesim.plan.build import check_fits
from pipesim.plan.checks import PlanError, Table
from tests.test_plan_input import variant
from tests.test_refusals_core import check_refusal

WORK = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=128, max_response_tokens=1024)
H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]


def _spec(**kw: Any) -> plan.PlanSpec:
    return plan.PlanSpec(**{"gpu": H100, "n_gpus": 4, "model": QWEN, "workload": WORK, "batch_size": 4, **kw})


CHECKS: list[tuple[str, Callable[[], Any], str]] = [
    ("integer-float", lambda: checks.integer("space.tp", 1.5, 1), "space.tp"),
    ("integer-bool", lambda: checks.integer("space.tp", True, 1), "space.tp"),
    ("integer-above", lambda: checks.integer("cluster.n_gpus", 10**8, 1, checks.MAX_GPUS), "cluster.n_gpus"),
    ("number-nan", lambda: checks.number("x.y", math.nan), "x.y"),
    ("number-huge-int", lambda: checks.number("x.y", 10**400), "x.y"),
    ("number-not-above", lambda: checks.number("sync_scale", 0.0, above=0), "sync_scale"),
    ("optional-number", lambda: checks.optional_number("c.m", -1, 0), "c.m"),
    ("seed-range", lambda: checks.check_seed(2**32), "seed"),
    ("seed-where", lambda: checks.check_seed(-1, "search.seed"), "search.seed"),
    ("ints-second", lambda: checks.ints("space.eta", (0, -1), 0), "space.eta[1]"),
    ("as-int", lambda: checks.as_int("w.k", 4.7), "w.k"),
    ("as-float", lambda: checks.as_float("w.k", "x"), "w.k"),
    ("as-str", lambda: checks.as_str("w.k", 3), "w.k"),
    ("table-not-mapping", lambda: Table("workload.response", 3, ("a",)), "workload.response"),
    (
        "table-unknown-key",
        lambda: Table("workload.response", {"median_token": 1}, ("median_tokens",)),
        "workload.response.median_token",
    ),
    ("table-missing", lambda: Table("cluster", {}, ("gpu",)).require("gpu"), "cluster.gpu"),
    ("table-flag", lambda: Table("search", {"quiet": 1}, ("quiet",)).flag("quiet"), "search.quiet"),
    (
        "table-integer",
        lambda: Table("cluster", {"n_gpus": 4.5}, ("n_gpus",)).integer("n_gpus", lo=1),
        "cluster.n_gpus",
    ),
    ("table-number", lambda: Table("w", {"s": -1}, ("s",)).number("s", lo=0), "w.s"),
    ("table-string", lambda: Table("model", {"name": 3}, ("name",)).string("name"), "model.name"),
    ("table-integers", lambda: Table("space", {"tp": [1, 2.5]}, ("tp",)).integers("tp"), "space.tp[1]"),
    (
        "table-nested",
        lambda: Table("workload", {"agent": {"turn": 2}}, ("agent",)).table("agent", ("turns",)),
        "workload.agent.turn",
    ),
]

CONFIGS: list[tuple[str, Callable[[], Any], str]] = [
    ("space-sync-every", lambda: plan.Space(sync_every=(0,)), "space.sync_every[0]"),
    ("space-tp", lambda: plan.Space(tp=(1.5,)), "space.tp[0]"),  # type: ignore[arg-type]
    ("space-eta", lambda: plan.Space(eta=(True,)), "space.eta[0]"),
    ("space-oversample", lambda: plan.Space(oversample=(math.nan,)), "space.oversample[0]"),
    ("space-placement", lambda: plan.Space(placement=(-1,)), "space.placement[0]"),
    ("constraints-max", lambda: plan.Constraints(max_staleness=math.nan), "constraints.max_staleness"),
    ("constraints-mean", lambda: plan.Constraints(mean_staleness=-1), "constraints.mean_staleness"),
    ("constraints-gpus", lambda: plan.Constraints(min_trainer_gpus=1.5), "constraints.min_trainer_gpus"),  # type: ignore[arg-type]
    ("spec-gpus-fraction", lambda: plan.PlanSpec(H100, 4.7, QWEN, WORK, 4), "cluster.n_gpus"),  # type: ignore[arg-type]
    ("spec-gpus-huge", lambda: plan.PlanSpec(H100, 10**8, QWEN, WORK, 4), "cluster.n_gpus"),
    (
        "spec-sync-time",
        lambda: plan.PlanSpec(H100, 4, QWEN, WORK, 4, sync_time_s=math.inf),
        "search.sync_time_s",
    ),
    ("spec-batch", lambda: plan.PlanSpec(H100, 4, QWEN, WORK, 0), "workload.batch_size"),
    ("space-tp-number", lambda: plan.Space(tp=3), "space.tp"),  # type: ignore[arg-type]
    ("space-tp-empty", lambda: plan.Space(tp=()), "space.tp"),
    ("space-update-unknown", lambda: plan.Space(update=("parital",)), "space.update"),
    ("spec-gpu-name", lambda: _spec(gpu="h100-sxm"), "gpu"),
    ("spec-model-name", lambda: _spec(model="qwen3-0.6b"), "model"),
    ("spec-workload", lambda: _spec(workload=3), "workload"),
    ("spec-constraints", lambda: _spec(constraints=3), "constraints"),
    ("spec-space", lambda: _spec(space=3), "space"),
    (
        "spec-batch-not-whole-prompts",
        lambda: _spec(workload=TokenWorkload(samples_per_prompt=4), batch_size=6),
        "workload.batch_size",
    ),
    ("spec-share_group_prefix-text", lambda: _spec(share_group_prefix="yes"), "model.share_group_prefix"),
    ("spec-method-typo", lambda: _spec(method="gird"), "search.method"),
    ("spec-baseline-number", lambda: _spec(baseline=3), "baseline"),
    ("spec-tool_kv-unknown", lambda: _spec(tool_kv="evict"), "model.tool_kv"),
    (  # a cost bound needs the price it is computed from: the price is the key to give
        "spec-cost-without-price",
        lambda: _spec(constraints=plan.Constraints(cost_per_mtok=1.0)),
        "cluster.cost_per_gpu_hour",
    ),
    ("spec-first_cut-int", lambda: _spec(first_cut=1), "search.first_cut"),
    ("spec-seeds-huge", lambda: _spec(seeds=10**6), "search.seeds"),  # each full run, on every seed
    ("spec-mini-batch-zero", lambda: _spec(ppo_mini_batch_samples=0), "model.ppo_mini_batch_samples"),
    ("spec-balance-unknown", lambda: _spec(balance="greedy"), "model.balance"),
    ("spec-micro-tokens-float", lambda: _spec(micro_batch_tokens=1.5), "model.micro_batch_tokens"),
    ("spec-sequence-parallel-huge", lambda: _spec(sequence_parallel=10**9), "model.sequence_parallel"),
    (  # verl asserts a micro-batch's token budget holds the longest sample (seqlen_balancing.py)
        "spec-micro-tokens-below-a-sample",
        lambda: _spec(micro_batch_tokens=WORK.max_sequence_tokens - 1),
        "model.micro_batch_tokens",
    ),
    (
        "spec-log-prob-tokens-below-a-sample",
        lambda: _spec(log_prob_micro_batch_tokens=WORK.max_sequence_tokens // 2, sequence_parallel=1),
        "model.log_prob_micro_batch_tokens",
    ),
    ("spec-screen_steps-above-steps", lambda: _spec(screen_steps=50, steps=10), "search.screen_steps"),
    # a run draws a task per engine place besides its pool: the key to lower is the one that is large
    ("spec-pool-steps", lambda: _spec(steps=10**6, batch_size=4096), "search.steps"),
    ("spec-pool-max_num_seqs", lambda: _spec(max_num_seqs=10**8), "model.max_num_seqs"),
    (  # no TP degree of the space holds the model
        "fits-model-too-big",
        lambda: check_fits(_spec(gpu=GPUS["l40s"], model=MODELS["qwen3-32b"], max_model_len=None)),
        "space.tp",
    ),
    (  # the constraints leave no design of the space (colocated trains on 8 < 9 GPUs)
        "search-no-candidates",
        lambda: plan.search(_spec(n_gpus=8, constraints=plan.Constraints(min_trainer_gpus=9))),
        "space",
    ),
]


@pytest.mark.parametrize(
    ("call", "field"),
    [r[1:] for r in CHECKS + CONFIGS],
    ids=[f"checks/{r[0]}" for r in CHECKS] + [f"configs/{r[0]}" for r in CONFIGS],
)
def test_the_plans_checks_name_the_key(call: Callable[[], Any], field: str) -> None:
    err = check_refusal(call, PlanError, field)
    assert err.file is None


SPEC_ROWS: list[tuple[str, str, str, str]] = [  # id, text replaced, replacement, field
    (
        "unknown-inline-key",
        "response = { median_tokens = 200,",
        "response = { median_token = 200,",
        "workload.response.median_token",
    ),
    (
        "agent-unknown-key",
        "max_response_tokens = 1024",
        "max_response_tokens = 1024\nagent = { turn = 2 }",
        "workload.agent.turn",
    ),
    ("n_gpus-fraction", "n_gpus = 4", "n_gpus = 4.5", "cluster.n_gpus"),
    ("n_gpus-zero", "n_gpus = 4", "n_gpus = 0", "cluster.n_gpus"),
    ("n_gpus-text", "n_gpus = 4", 'n_gpus = "4"', "cluster.n_gpus"),
    ("tp-fraction", "tp = [1]", "tp = [1.5]", "space.tp[0]"),
    ("eta-negative", "eta = [0, 1]", "eta = [0, -1]", "space.eta[1]"),
    ("oversample-huge", "oversample = [1.0]", "oversample = [100.0]", "space.oversample[0]"),
    ("sigma-negative", "sigma = 0.5", "sigma = -1", "workload.response.sigma"),
    ("prompt-zero", "prompt_tokens = 128", "prompt_tokens = 0", "workload.prompt_tokens"),
    ("seeds-zero", "seeds = 1", "seeds = 0", "search.seeds"),
    ("gpu-unknown", 'gpu = "h100-sxm"', 'gpu = "h10"', "cluster.gpu"),
    ("model-unknown", 'name = "qwen3-0.6b"', 'name = "Qwen/Qwen9-8B"', "model.name"),
    ("model-config-missing", 'name = "qwen3-0.6b"', 'name = "missing/config.json"', "model.name"),
    ("unknown-table", "[search]", "[serach]\n[search]", "serach"),
    ("placement-typo", 'placement = ["colocated"]', 'placement = ["colocatd"]', "space.placement[0]"),
    (
        "response-and-trace",
        "max_response_tokens = 1024",
        'max_response_tokens = 1024\nresponse_trace = { path = "t.csv" }',
        "workload.response",
    ),
    (
        "response-trace-unreadable",
        "response = { median_tokens = 200, sigma = 0.5 }",
        'response_trace = { path = "none.csv" }',
        "workload.response_trace.path",
    ),
    (  # a spread that overflows: AgentTurns' own field, under the spec's table
        "agent-overflows",
        "max_response_tokens = 1024",
        "max_response_tokens = 1024\nagent = { turns = 2, tool_latency_s = 1e308 }",
        "workload.agent.tool_latency_sigma",
    ),
    (
        "batch-and-prompts",
        "prompts_per_step = 4",
        "prompts_per_step = 4\nbatch_size = 4",
        "workload.prompts_per_step",
    ),
    (
        "oversample-and-prompts",
        "oversample = [1.0]",
        "oversample = [1.0]\noversample_prompts = [4]",
        "space.oversample",
    ),
    (
        "oversample-prompts-few",
        "oversample = [1.0]",
        "oversample_prompts = [2]",
        "space.oversample_prompts[0]",
    ),
    (
        "model-ppo_mini_batch_samples-zero",
        'name = "qwen3-0.6b"',
        'name = "qwen3-0.6b"\nppo_mini_batch_samples = 0',
        "model.ppo_mini_batch_samples",
    ),
    (
        "model-micro_batch_tokens-float",
        'name = "qwen3-0.6b"',
        'name = "qwen3-0.6b"\nmicro_batch_tokens = 4096.5',
        "model.micro_batch_tokens",
    ),
    ("model-balance-number", 'name = "qwen3-0.6b"', 'name = "qwen3-0.6b"\nbalance = 3', "model.balance"),
    (
        "model-log_prob_micro_batch_tokens-text",
        'name = "qwen3-0.6b"',
        'name = "qwen3-0.6b"\nlog_prob_micro_batch_tokens = "big"',
        "model.log_prob_micro_batch_tokens",
    ),
    (
        "model-sequence_parallel-zero",
        'name = "qwen3-0.6b"',
        'name = "qwen3-0.6b"\nsequence_parallel = 0',
        "model.sequence_parallel",
    ),
    (
        "baseline-update",
        "[search]",
        '[baseline]\nplacement = "colocated"\nupdate = "parital"\n[search]',
        "baseline.update",
    ),
]


@pytest.mark.parametrize(("old", "new", "field"), [r[1:] for r in SPEC_ROWS], ids=[r[0] for r in SPEC_ROWS])
def test_a_bad_spec_file_names_the_file_and_the_key(tmp_path: Path, old: str, new: str, field: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(variant(old, new))
    err = check_refusal(lambda: plan.load(path), PlanError, field)
    assert err.file == str(path)
    assert isinstance(err, FieldError) and isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("s.yaml", "cluster: [unclosed\n"),
        ("s.yaml", ""),
        ("s.yaml", "- 1\n- 2\n"),
        ("s.toml", "[cluster\n"),
        ("s.json", '{"cluster": {}}'),
        ("s.toml", b"\x80\x81 = 1"),
        ("none.toml", None),
    ],
    ids=["yaml-unclosed", "yaml-empty", "yaml-a-list", "toml-unclosed", "json", "not-utf8", "missing"],
)
def test_a_spec_file_refused_whole_names_the_file(
    tmp_path: Path, name: str, content: str | bytes | None
) -> None:
    """Unreadable, not TOML or YAML, empty, not a table: the whole file is refused (field ``""``)."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    err = check_refusal(lambda: plan.load(path), PlanError, "")
    assert err.file == str(path)
