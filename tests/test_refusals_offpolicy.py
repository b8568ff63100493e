"""offpolicy's and mismatch's configs and functions refuse bad input with their twins of pipesim's
``FieldError`` (``offpolicy.checks.FieldError``, ``mismatch.checks.FieldError``: they import no
pipesim) carrying the field. Rows: an id, the call, the field; never the sentence. The flag of a
mismatch field (``n_prompts (--prompts)``) is in its message, not in its field."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mismatch import checks as mismatch_checks
from mismatch.health import logprob_health
from mismatch.models import ModelSource, resolve_device
from mismatch.probe import ProbeConfig
from mismatch.prompts import ByteTokenizer, make_prompts
from mismatch.stats import mismatch_row
from offpolicy import checks, stats
from offpolicy.base import BaseConfig, base_config
from offpolicy.experiment import seeds_from_args
from offpolicy.functional import group_advantages, mis_weights, seq_tis_weights, tis_weights
from offpolicy.gym import build_tokenizer, make_tasks
from offpolicy.model import ModelConfig, TinyAgent
from offpolicy.rl import EvalSpec, RLConfig, evaluate, train_rl
from offpolicy.staleness import build_grid
from pipesim.core.validate import FieldError
from scenarios import cosim_report
from scenarios.cosim import CosimConfig
from scenarios.cosim_episodes import CosimDurations, batch_advantages
from tests.test_refusals_core import check_refusal

Z, M = torch.zeros(1, 2), torch.ones(1, 2)
TOK = build_tokenizer()


def _agent() -> TinyAgent:
    return TinyAgent(ModelConfig(vocab_size=len(TOK)), generator=torch.Generator().manual_seed(0))


OFFPOLICY: list[tuple[str, Callable[[], Any], str]] = [
    ("rl-lr-nan", lambda: RLConfig(lr=math.nan), "lr"),
    ("rl-lr-zero", lambda: RLConfig(lr=0.0), "lr"),
    ("rl-lr-float32", lambda: RLConfig(lr=np.float32(1e-3)), "lr"),
    # 1e38 failed inside torch's Adam (float32 overflow); above LR_MAX is refused, any lr below it
    # that breaks training is a diverged run (tests/test_offpolicy_diverged.py)
    ("rl-lr-1e38", lambda: RLConfig(lr=1e38), "lr"),
    ("rl-lr-inf", lambda: RLConfig(lr=math.inf), "lr"),
    ("rl-lr-above-max", lambda: RLConfig(lr=checks.LR_MAX * 1.5), "lr"),
    ("rl-lr-negative", lambda: RLConfig(lr=-1e-3), "lr"),
    ("base-lr-1e38", lambda: BaseConfig(lr=1e38), "lr"),
    ("cosim-rl-lr", lambda: CosimConfig(rl=RLConfig(lr=1e38)), "lr"),
    ("check-lr", lambda: checks.check_lr("lr", 1e7), "lr"),
    ("rl-temperature", lambda: RLConfig(temperature=math.inf), "temperature"),
    ("rl-clip-low", lambda: RLConfig(clip_low=1.5), "clip_low"),
    ("rl-clip-high", lambda: RLConfig(clip_high=-0.1), "clip_high"),
    ("rl-max-grad-norm", lambda: RLConfig(max_grad_norm=0), "max_grad_norm"),
    ("rl-max-turns", lambda: RLConfig(max_turns=0), "max_turns"),
    ("rl-group-size-bool", lambda: RLConfig(group_size=True), "group_size"),
    ("rl-group-of-one", lambda: RLConfig(group_size=1), "group_size"),  # no advantage: trains nothing
    ("rl-episodes-float", lambda: RLConfig(episodes_per_step=64.0), "episodes_per_step"),  # type: ignore[arg-type]
    ("rl-seed-numpy", lambda: RLConfig(seed=np.int64(3)), "seed"),  # type: ignore[arg-type]
    ("rl-seed-huge", lambda: RLConfig(seed=2**64), "seed"),
    ("rl-normalize-std", lambda: RLConfig(normalize_std=1), "normalize_std"),  # type: ignore[arg-type]
    ("rl-minibatches", lambda: RLConfig(minibatches=65), "minibatches"),
    ("rl-not-whole-groups", lambda: RLConfig(group_size=7), "episodes_per_step"),
    ("rl-groups-of-4", lambda: RLConfig(episodes_per_step=10, group_size=4), "episodes_per_step"),
    ("model-vocab", lambda: ModelConfig(vocab_size=2.5), "vocab_size"),  # type: ignore[arg-type]
    ("model-layers", lambda: ModelConfig(vocab_size=30, n_layers=0), "n_layers"),
    ("model-slopes", lambda: ModelConfig(vocab_size=30, alibi_slopes=(1, math.inf, 0, 0)), "alibi_slopes[1]"),
    ("model-slope-count", lambda: ModelConfig(vocab_size=30, alibi_slopes=(1.0,)), "alibi_slopes"),
    ("model-heads", lambda: ModelConfig(vocab_size=30, d_model=30, n_heads=4), "n_heads"),
    ("model-tie", lambda: ModelConfig(vocab_size=30, tie_embeddings="no"), "tie_embeddings"),  # type: ignore[arg-type]
    ("base-p-correct", lambda: BaseConfig(p_correct=2), "p_correct"),
    ("base-steps", lambda: BaseConfig(steps=0), "steps"),
    ("base-lr", lambda: BaseConfig(lr=-1), "lr"),
    ("base-aux-weight", lambda: BaseConfig(aux_weight=math.nan), "aux_weight"),
    ("base-gym", lambda: BaseConfig(gym="bogus"), "gym"),
    ("base-seed", lambda: BaseConfig(seed=-1), "seed"),
    ("base-wrong", lambda: BaseConfig(wrong="often"), "wrong"),  # type: ignore[arg-type]
    ("base-config-gym", lambda: base_config("bogus"), "gym"),
    ("eval-every-float", lambda: EvalSpec(tasks=(), every=1.5), "every"),  # type: ignore[arg-type]
    ("eval-every-bool", lambda: EvalSpec(tasks=(), every=True), "every"),
    ("eval-episodes", lambda: EvalSpec(tasks=(), every=0, episodes_per_task=2.0), "episodes_per_task"),  # type: ignore[arg-type]
    ("eval-seed", lambda: EvalSpec(tasks=(), every=0, seed=-1), "seed"),
    ("eval-no-tasks", lambda: EvalSpec(tasks=(), every=1), "tasks"),
    ("eval-every-negative", lambda: EvalSpec(tasks=make_tasks("heldout", "defect"), every=-1), "every"),
    ("evaluate-no-tasks", lambda: evaluate(_agent(), [], TOK, 4, torch.Generator()), "tasks"),
    (
        "evaluate-episodes",
        lambda: evaluate(_agent(), make_tasks("heldout", "defect"), TOK, 0, torch.Generator()),
        "episodes_per_task",
    ),
    ("train-rl-no-tasks", lambda: train_rl(_agent(), [], TOK, RLConfig(), 1), "tasks"),
    (
        "train-rl-steps",
        lambda: train_rl(_agent(), make_tasks("train", "defect"), TOK, RLConfig(), 0),
        "steps",
    ),
    ("tasks-gym", lambda: make_tasks("train", "bogus"), "gym"),
    ("cosim-target", lambda: CosimConfig(target_pass_rate=True), "target_pass_rate"),
    ("cosim-gym", lambda: CosimConfig(gym="bogus"), "gym"),
    ("cosim-eval-episodes", lambda: CosimConfig(eval_episodes_per_task=0), "eval_episodes_per_task"),
    ("group-advantages", lambda: group_advantages(torch.zeros(6), 4), "rewards"),
    ("group-size-zero", lambda: group_advantages(torch.zeros(6), 0), "group_size"),
    ("tis-cap", lambda: tis_weights(Z, Z, M, cap=0.0), "cap"),
    ("seq-tis-cap", lambda: seq_tis_weights(Z, Z, M, cap=-1.0), "cap"),
    ("mis-band", lambda: mis_weights(Z, Z, M, low=2.0, high=1.0), "band"),
    ("stats-pair", lambda: stats.paired_difference([1.0], [1.0, 2.0], np.random.default_rng(0)), "b"),
    ("stats-empty", lambda: stats.bootstrap_mean([], np.random.default_rng(0)), "values"),
    ("stats-nan", lambda: stats.bootstrap_mean([math.nan], np.random.default_rng(0)), "values"),
    ("stats-level", lambda: stats.bootstrap_mean([1.0], np.random.default_rng(0), level=1.5), "level"),
    ("stats-n-boot", lambda: stats.bootstrap_mean([1.0], np.random.default_rng(0), n_boot=0), "n_boot"),
    ("sign-test-wins", lambda: stats.sign_test(-1, 3), "wins"),
    ("sign-test-losses", lambda: stats.sign_test(1, -3), "losses"),
    ("seed-list-repeats", lambda: seeds_from_args(3, [5, 5]), "seed-list"),
    ("seeds-zero", lambda: seeds_from_args(0, None), "seeds"),
    ("grid-correction", lambda: build_grid([0], ["bogus"], "cross"), "corrections"),
    ("grid-lag", lambda: build_grid([-1], ["none"], "cross"), "lags"),
    ("check-int", lambda: checks.check_int("k", 0, 1), "k"),
    ("check-real", lambda: checks.check_real("x", math.nan, 0), "x"),
    ("check-seed", lambda: checks.check_seed("seed", 2**64), "seed"),
]

COSIM_FLAGS: list[tuple[str, Callable[[], Any], str]] = [  # the co-simulation script's flags
    ("designs", lambda: cosim_report._names("nope", ["drain"], "--designs"), "--designs"),
    ("designs-empty", lambda: cosim_report._names(" , ", ["drain"], "--designs"), "--designs"),
    ("seed-list-text", lambda: cosim_report._seed_list("1,x"), "--seed-list"),
    ("seed-list-repeat", lambda: cosim_report._seed_list("1,1"), "--seed-list"),
    ("seed-list-negative", lambda: cosim_report._seed_list("-5"), "--seed-list"),
    ("stored-runs-absent", lambda: cosim_report._stored_runs("/nonexistent/x.json", "--json"), "--json"),
]


def test_the_largest_learning_rate_is_taken() -> None:
    """``LR_MAX`` itself is a learning rate (a run at it diverges and is recorded as such)."""
    assert RLConfig(lr=checks.LR_MAX).lr == BaseConfig(lr=checks.LR_MAX).lr == checks.LR_MAX


LR_FLAGS: list[tuple[str, str, list[str], str]] = [  # every script flag that sets a learning rate
    ("staleness-1e38", "offpolicy.staleness", ["--lr", "1e38"], "--lr"),
    ("staleness-inf", "offpolicy.staleness", ["--lr", "inf"], "--lr"),
    ("staleness-zero", "offpolicy.staleness", ["--lr", "0"], "--lr"),  # was taken: `0 or 1.0`
    ("staleness-above-max", "offpolicy.staleness", ["--lr", "2e6"], "--lr"),
    ("fp8-1e38", "offpolicy.fp8", ["--lr", "1e38"], "--lr"),
    ("fp8-nan", "offpolicy.fp8", ["--lr", "nan"], "--lr"),
    ("lr-sweep-1e38", "offpolicy.lr_sweep", ["--lrs", "1e-3", "1e38"], "--lrs"),
    ("lr-sweep-negative", "offpolicy.lr_sweep", ["--lrs", "-1e-3"], "--lrs"),
    ("cosim-1e38", "scenarios.cosim", ["--lr", "1e38"], "--lr"),
    ("cosim-nan", "scenarios.cosim", ["--lr", "nan"], "--lr"),
    ("cosim-perf-1e38", "scenarios.cosim", ["--perf", "sync", "--lr", "1e38"], "--lr"),  # the perf mode too
]


@pytest.mark.parametrize(("module", "args", "flag"), [r[1:] for r in LR_FLAGS], ids=[r[0] for r in LR_FLAGS])
def test_a_learning_rate_flag_out_of_range_is_a_usage_error_naming_it(
    module: str, args: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any training (exit 2, the flag named on the error line), by the rule of
    ``RLConfig.lr`` (``checks.check_lr``), not a torch traceback from inside the first run."""
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as info:
        main([*args, "--json", str(tmp_path / "out.json")])
    assert info.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(error) == 1 and flag in error[0].split("error:", 1)[1], error
    assert not (tmp_path / "out.json").exists()


COSIM_EPISODES: list[tuple[str, Callable[[], Any], str]] = [  # scenarios.cosim_episodes: pipesim's FieldError
    ("tokens-scale", lambda: CosimDurations(tokens_scale=0), "tokens_scale"),
    ("tool-sigma", lambda: CosimDurations(tool_sigma=-1.0), "tool_sigma"),
    ("groups-unsorted", lambda: batch_advantages(torch.ones(3), [(1, 0), (0, 0), (0, 1)]), "groups"),
    ("groups-count", lambda: batch_advantages(torch.ones(3), [(0, 0)]), "groups"),
]


@pytest.mark.parametrize(
    ("call", "field"), [r[1:] for r in COSIM_EPISODES], ids=[r[0] for r in COSIM_EPISODES]
)
def test_the_cosimulation_episodes_name_the_field_they_refuse(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


MISMATCH: list[tuple[str, Callable[[], Any], str]] = [
    ("probe-batch", lambda: ProbeConfig(n_prompts=4, batch_n=5), "batch_n"),
    ("probe-seed", lambda: ProbeConfig(seed=2**64), "seed"),
    ("probe-prompts", lambda: ProbeConfig(n_prompts=2.0), "n_prompts"),  # type: ignore[arg-type]
    ("probe-prompts-zero", lambda: ProbeConfig(n_prompts=0), "n_prompts"),
    ("probe-prompts-huge", lambda: ProbeConfig(n_prompts=10**8), "n_prompts"),  # one batch: memory
    ("probe-engine-batches", lambda: ProbeConfig(engine_batches=(1, 0)), "engine_batches"),
    ("probe-knobs", lambda: ProbeConfig(knobs=1), "knobs"),  # type: ignore[arg-type]
    (
        "health-shapes",
        lambda: logprob_health(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3)),
        "logp_sampler",
    ),
    ("health-mask", lambda: logprob_health(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 4)), "mask"),
    ("row-shapes", lambda: mismatch_row("bf16", torch.zeros(2, 3), torch.zeros(3, 2)), "bf16"),
    ("prompts-zero", lambda: make_prompts(0), "n"),
    ("byte-pad", lambda: ByteTokenizer(pad_id=3), "pad_id"),
    ("device", lambda: resolve_device("tpu"), "device"),
    ("attn", lambda: ModelSource.tiny(attn_implementation="flash"), "attn_implementation"),
]


@pytest.mark.parametrize(
    ("call", "field"),
    [r[1:] for r in OFFPOLICY + COSIM_FLAGS],
    ids=[r[0] for r in OFFPOLICY] + [f"cosim/{r[0]}" for r in COSIM_FLAGS],
)
def test_offpolicy_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    with pytest.raises(checks.FieldError) as info:
        call()
    assert info.value.field == field, str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in MISMATCH], ids=[r[0] for r in MISMATCH])
def test_mismatch_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    with pytest.raises(mismatch_checks.FieldError) as info:
        call()
    assert info.value.field == field, str(info.value)
    assert isinstance(info.value, ValueError)


HUGE = "x" * 100_000
BOUNDED: list[tuple[str, Callable[[], Any], type[ValueError], str]] = [
    ("base-wrong", lambda: BaseConfig(wrong=HUGE), checks.FieldError, "wrong"),  # type: ignore[arg-type]
    ("rl-normalize-std", lambda: RLConfig(normalize_std=[1] * 10**6), checks.FieldError, "normalize_std"),  # type: ignore[arg-type]
    (
        "model-tie",
        lambda: ModelConfig(vocab_size=30, tie_embeddings=HUGE),
        checks.FieldError,
        "tie_embeddings",
    ),  # type: ignore[arg-type]
    ("gym", lambda: base_config(HUGE), checks.FieldError, "gym"),
    ("check-int", lambda: checks.check_int("k", HUGE, 1), checks.FieldError, "k"),
    ("cosim-design", lambda: CosimConfig(design=HUGE), checks.FieldError, "design"),
    ("probe-knobs", lambda: ProbeConfig(knobs=HUGE), mismatch_checks.FieldError, "knobs"),  # type: ignore[arg-type]
    ("probe-prompts", lambda: ProbeConfig(n_prompts=HUGE), mismatch_checks.FieldError, "n_prompts"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "kind", "field"), [b[1:] for b in BOUNDED], ids=[b[0] for b in BOUNDED])
def test_a_huge_value_is_shown_bounded(call: Callable[[], Any], kind: type[ValueError], field: str) -> None:
    """The user's value in the message is bounded (``shown``), as pipesim's: one short line."""
    with pytest.raises(kind) as info:
        call()
    assert getattr(info.value, "field", None) == field
    assert len(str(info.value)) < 300 and "\n" not in str(info.value)
