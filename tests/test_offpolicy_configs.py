"""offpolicy's configs refuse a bad field at construction, with a ValueError naming it.

Before, ``RLConfig(lr=nan)`` trained on NaN, ``clip_low=1.5`` clipped the ratio below zero,
``max_grad_norm=0`` zeroed every gradient, a bool was taken as a number and a float as a count
(a TypeError deep in torch, or silently), and ``ModelConfig`` said "must be positive" of a field
that was not a number at all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from mismatch.probe import ProbeConfig
from offpolicy.base import BaseConfig
from offpolicy.model import ModelConfig
from offpolicy.rl import EvalSpec, RLConfig
from scenarios.cosim import CosimConfig

BAD: list[tuple[type, dict[str, Any], str]] = [
    (RLConfig, {"lr": math.nan}, r"^lr must be a finite number > 0, got nan"),
    (RLConfig, {"lr": 0.0}, r"^lr must be a finite number > 0"),
    (RLConfig, {"lr": np.float32(1e-3)}, r"^lr .*float\(x\) converts a float32"),
    (RLConfig, {"temperature": math.inf}, r"^temperature must be a finite number > 0"),
    (RLConfig, {"clip_low": 1.5}, r"^clip_low must be a finite number in \[0, 1\]"),
    (RLConfig, {"clip_high": -0.1}, r"^clip_high must be a finite number >= 0"),
    (RLConfig, {"max_grad_norm": 0}, r"^max_grad_norm must be a finite number > 0"),
    (RLConfig, {"max_turns": 0}, r"^max_turns must be an integer >= 1, got 0"),
    (RLConfig, {"group_size": True}, r"^group_size must be an integer >= 1, got True"),
    (RLConfig, {"episodes_per_step": 64.0}, r"^episodes_per_step must be an integer >= 1, got 64.0"),
    (RLConfig, {"seed": np.int64(3)}, r"^seed .*int\(x\) converts a int64"),
    (RLConfig, {"normalize_std": 1}, r"^normalize_std must be a bool"),
    (RLConfig, {"minibatches": 65}, r"^minibatches must be in \[1, episodes_per_step\]"),
    (RLConfig, {"group_size": 7}, r"must be a positive multiple of group_size=7"),
    (ModelConfig, {"vocab_size": 2.5}, r"^vocab_size must be an integer >= 1, got 2.5"),
    (ModelConfig, {"vocab_size": 30, "n_layers": 0}, r"^n_layers must be an integer >= 1"),
    (
        ModelConfig,
        {"vocab_size": 30, "alibi_slopes": (1, math.inf, 0, 0)},
        r"^alibi_slopes\[1\] must be a finite",
    ),
    (ModelConfig, {"vocab_size": 30, "tie_embeddings": "no"}, r"^tie_embeddings must be a bool"),
    (BaseConfig, {"p_correct": 2}, r"^p_correct must be a finite number in \[0, 1\]"),
    (BaseConfig, {"steps": 0}, r"^steps must be an integer >= 1"),
    (BaseConfig, {"lr": -1}, r"^lr must be a finite number > 0"),
    (BaseConfig, {"aux_weight": math.nan}, r"^aux_weight must be a finite number >= 0"),
    (BaseConfig, {"gym": "bogus"}, r"^gym must be one of \('defect', 'issue'\), got 'bogus'"),
    (RLConfig, {"seed": 2**64}, r"^seed must be an integer in \[0, 18446744073709551615\]"),
    (BaseConfig, {"seed": -1}, r"^seed must be an integer in \[0, "),
    (EvalSpec, {"tasks": (), "every": 1.5}, r"^eval_every must be an integer >= 0, got 1.5"),
    (EvalSpec, {"tasks": (), "every": True}, r"^eval_every must be an integer >= 0, got True"),
    (
        EvalSpec,
        {"tasks": (), "every": 0, "episodes_per_task": 2.0},
        r"^eval_episodes must be an integer >= 1",
    ),
    (EvalSpec, {"tasks": (), "every": 0, "seed": -1}, r"^eval_seed must be an integer in \[0, "),
    (
        ProbeConfig,
        {"n_prompts": 4, "batch_n": 5},
        r"^batch_n \(--batch\) must be at most the number of prompts \(4\)",
    ),
    (ProbeConfig, {"seed": 2**64}, r"^seed \(--seed\) must be at most"),
    (ProbeConfig, {"n_prompts": 2.0}, r"^n_prompts \(--prompts\) must be an integer >= 1, got 2.0"),
    (ProbeConfig, {"engine_batches": (1, 0)}, r"^engine_batches must be an integer >= 1, got 0"),
    (
        CosimConfig,
        {"target_pass_rate": True},
        r"^target_pass_rate must be a finite number in \[0, 1\], got True",
    ),
]


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"), BAD, ids=[f"{c.__name__}-{list(k)[-1]}" for c, k, _ in BAD]
)
def test_a_bad_field_is_named(cls: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_the_defaults_and_edges_are_accepted() -> None:
    RLConfig()
    RLConfig(clip_low=0, clip_high=0, lr=1, normalize_std=True, seed=0)
    ModelConfig(vocab_size=30, alibi_slopes=(-1.0, 0, 0, 0))  # a slope of any sign is the user's choice
    BaseConfig(p_correct=0, aux_weight=0)
    RLConfig(seed=2**64 - 1)  # torch's largest seed
    ProbeConfig(n_prompts=4, batch_n=4)


def test_a_gym_name_is_checked_where_a_recipe_is_chosen() -> None:
    from offpolicy.base import DEFECT_BASE, ISSUE_BASE, base_config

    assert base_config("issue") is ISSUE_BASE and base_config("defect") is DEFECT_BASE
    with pytest.raises(ValueError, match=r"^gym must be one of"):
        base_config("bogus")  # returned the defect recipe


def test_evaluating_or_training_on_no_tasks_is_refused() -> None:
    import torch

    from offpolicy.gym import build_tokenizer, make_tasks
    from offpolicy.model import TinyAgent
    from offpolicy.rl import evaluate, train_rl

    tok = build_tokenizer()
    model = TinyAgent(ModelConfig(vocab_size=len(tok)))
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"^tasks: need at least one task"):
        evaluate(model, [], tok, 4, gen)  # read a pass rate of 0.0
    with pytest.raises(ValueError, match=r"^episodes_per_task must be an integer >= 1, got 0"):
        evaluate(model, make_tasks("heldout", "defect"), tok, 0, gen)
    with pytest.raises(ValueError, match=r"^tasks: need at least one task"):
        train_rl(model, [], tok, RLConfig(), 1)  # a torch error from randint


def test_train_rl_and_cosim_refuse_what_trained_or_evaluated_nothing() -> None:
    from offpolicy.gym import build_tokenizer, make_tasks
    from offpolicy.model import TinyAgent
    from offpolicy.rl import train_rl
    from scenarios.cosim import CosimConfig

    tok = build_tokenizer()
    model = TinyAgent(ModelConfig(vocab_size=len(tok)))
    with pytest.raises(ValueError, match=r"^steps must be an integer >= 1"):
        train_rl(model, make_tasks("train", "defect"), tok, RLConfig(), 0)  # returned [] silently
    with pytest.raises(ValueError, match=r"^eval_episodes_per_task must be an integer >= 1"):
        CosimConfig(eval_episodes_per_task=0)  # every evaluation read pass rate 0.0
