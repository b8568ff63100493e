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
from pipesim.plan.checks import PlanError, Table
from tests.test_plan_input import variant
from tests.test_refusals_core import check_refusal

WORK = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=128, max_response_tokens=1024)
H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]

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
]


@pytest.mark.parametrize(("old", "new", "field"), [r[1:] for r in SPEC_ROWS], ids=[r[0] for r in SPEC_ROWS])
def test_a_bad_spec_file_names_the_file_and_the_key(tmp_path: Path, old: str, new: str, field: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(variant(old, new))
    err = check_refusal(lambda: plan.load(path), PlanError, field)
    assert err.file == str(path)
    assert isinstance(err, FieldError) and isinstance(err, ValueError)
