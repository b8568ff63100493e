"""Bad input to the core configs is refused with a :class:`FieldError` naming the field.

Each row: an id, the call, the exception type expected, and the field's dotted path the error must
carry as ``err.field``. Rows never match the sentence (rewording a message breaks nothing); the
only check of the text is that it names the field's last part, so a person reading it sees the
same name a program reads. ``docs/testing.md`` maps the message-matching tests these rows replace.
"""

from __future__ import annotations

import decimal
import fractions
import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim
from pipesim import PipelineConfig, Scenario, TraceDurations, simulate_pipeline
from pipesim.core.engine import Pipeline
from pipesim.core.seams import EngineOptions
from pipesim.core.validate import (
    CrossFieldError,
    FieldError,
    FieldTypeError,
    check_int,
    check_number,
    refuse,
    within,
)
from pipesim.policies.systems import RollGroupAdmission
from pipesim.workload.durations import AgentDurations, ExponentialDurations, LogNormalDurations

Row = tuple[str, Callable[[], Any], type[BaseException], str]


def _small(**kw: Any) -> Scenario:
    return Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2), **kw)


def _facade(how: str, pool: object) -> object:
    """``simulate_pipeline`` (``how`` empty) or ``run`` (``"run-"``) of a small design on ``pool``."""
    if how:
        return pipesim.run(_small(), pool)  # type: ignore[arg-type]
    return simulate_pipeline(pool, 4, 4, 1.0, 1.0)  # type: ignore[arg-type]


def _pool(bad: object, at: int = 7) -> list[object]:
    pool: list[object] = [1.0] * 50
    pool[at] = bad
    return pool


PIPELINE: list[Row] = [
    ("n_slots-zero", lambda: PipelineConfig(n_slots=0), FieldError, "n_slots"),
    ("n_slots-fraction", lambda: PipelineConfig(n_slots=2.5), FieldError, "n_slots"),  # type: ignore[arg-type]
    ("n_slots-numpy", lambda: PipelineConfig(n_slots=np.int64(3)), FieldError, "n_slots"),  # type: ignore[arg-type]
    ("n_slots-huge", lambda: PipelineConfig(n_slots=10**9), FieldError, "n_slots"),
    ("batch_size-zero", lambda: PipelineConfig(batch_size=0), FieldError, "batch_size"),
    ("batch_size-huge", lambda: PipelineConfig(batch_size=10**9), FieldError, "batch_size"),
    ("train_time-negative", lambda: PipelineConfig(train_time_s=-1.0), FieldError, "train_time_s"),
    ("train_time-nan", lambda: PipelineConfig(train_time_s=math.nan), FieldError, "train_time_s"),
    ("sync_time-inf", lambda: PipelineConfig(sync_time_s=math.inf), FieldError, "sync_time_s"),
    ("sync_time-negative", lambda: PipelineConfig(sync_time_s=-0.5), FieldError, "sync_time_s"),
    ("max_staleness-negative", lambda: PipelineConfig(max_staleness=-1), FieldError, "max_staleness"),
    ("steps-zero", lambda: PipelineConfig(steps=0), FieldError, "steps"),
    ("colocated-int", lambda: PipelineConfig(colocated=1), FieldError, "colocated"),  # type: ignore[arg-type]
]

SCENARIO: list[Row] = [
    ("pipeline-not-config", lambda: Scenario(pipeline=3), FieldError, "pipeline"),  # type: ignore[arg-type]
    ("seed-negative", lambda: Scenario(seed=-1), FieldError, "seed"),
    ("seed-huge", lambda: Scenario(seed=2**64), FieldError, "seed"),
    ("name-int", lambda: Scenario(name=3), FieldError, "name"),  # type: ignore[arg-type]
    ("name-blank", lambda: Scenario(name="  "), FieldError, "name"),
    ("name-newline", lambda: Scenario(name="a\nb"), FieldError, "name"),
    ("pool_size-zero", lambda: Scenario(pool_size=0), FieldError, "pool_size"),
    ("admission-wrong-slot", lambda: Scenario(admission=pipesim.Drain()), FieldError, "admission"),
    (
        "weight_update-wrong-slot",
        lambda: Scenario(weight_update=pipesim.CountThrottle()),
        FieldError,
        "weight_update",
    ),
    ("batching-wrong-slot", lambda: Scenario(batching=pipesim.PartialRollout()), FieldError, "batching"),
    (
        "durations-wrong-slot",
        lambda: Scenario(durations=pipesim.OldestFinishedFirst()),
        FieldError,
        "durations",
    ),
    ("weight_update-class", lambda: Scenario(weight_update=pipesim.Drain), FieldError, "weight_update"),
    ("admission-class", lambda: Scenario(admission=pipesim.CountThrottle), FieldError, "admission"),
    ("timeout-class", lambda: Scenario(timeout=pipesim.Timeout), FieldError, "timeout"),
    ("replicas-class", lambda: Scenario(replicas=pipesim.Replicas), FieldError, "replicas"),
    ("batching-none", lambda: Scenario(batching=None), FieldError, "batching"),  # type: ignore[arg-type]
    ("timeout-number", lambda: Scenario(timeout=3), FieldError, "timeout"),  # type: ignore[arg-type]
    ("failures-string", lambda: Scenario(failures="often"), FieldError, "failures"),  # type: ignore[arg-type]
    ("replicas-number", lambda: Scenario(replicas=3), FieldError, "replicas"),  # type: ignore[arg-type]
    (
        "replicas-more-than-slots",
        lambda: Scenario(pipeline=PipelineConfig(n_slots=2), replicas=pipesim.Replicas(4)),
        FieldError,
        "pipeline.n_slots",
    ),
    (
        "max_staleness-unread",
        lambda: Scenario(pipeline=PipelineConfig(max_staleness=3), admission=RollGroupAdmission(1)),
        FieldError,
        "pipeline.max_staleness",
    ),
]

WITH: list[Row] = [  # Scenario.with_: a PipelineConfig refused inside a scenario gains the prefix
    ("unknown-field", lambda: _small().with_(n_slotz=3), FieldError, "n_slotz"),
    ("n_slots-huge", lambda: _small().with_(n_slots=10**9), FieldError, "pipeline.n_slots"),
    ("batch_size-huge", lambda: _small().with_(batch_size=10**9), FieldError, "pipeline.batch_size"),
    (
        "max_staleness-negative",
        lambda: _small().with_(max_staleness=-1),
        FieldError,
        "pipeline.max_staleness",
    ),
    ("pool_size-huge", lambda: _small().with_(pool_size=10**10), FieldError, "pool_size"),
    # 2**28 was accepted and died in a 40 GB allocation (about 1.1-1.7 KB a task): core.errors.MAX_POOL_TASKS
    ("pool_size-past-memory", lambda: _small().with_(pool_size=2**28), FieldError, "pool_size"),
    # a default pool past MAX_DURATION_POOL: refused beside the sizes, naming the largest term's field
    ("steps-need-a-huge-pool", lambda: _small().with_(steps=10**12), CrossFieldError, "pipeline.steps"),
    (
        "max_staleness-need-a-huge-pool",
        lambda: _small().with_(max_staleness=10**12),
        CrossFieldError,
        "pipeline.max_staleness",
    ),
    ("pipeline-not-config", lambda: _small().with_(pipeline=3, n_slots=2), FieldError, "pipeline"),
    (
        "max_staleness-unread",
        lambda: _small(admission=RollGroupAdmission(1)).with_(max_staleness=2),
        FieldError,
        "pipeline.max_staleness",
    ),
]

FACADE: list[Row] = (
    [  # simulate_pipeline and run: the chapter's arguments, and the pool
        ("n_slots", lambda: simulate_pipeline([1.0] * 100, 0, 4, 1.0, 1.0), FieldError, "n_slots"),
        ("batch_size", lambda: simulate_pipeline([1.0] * 100, 4, 0, 1.0, 1.0), FieldError, "batch_size"),
        ("train_time", lambda: simulate_pipeline([1.0] * 100, 4, 4, math.nan, 1.0), FieldError, "train_time"),
        ("sync_time", lambda: simulate_pipeline([1.0] * 100, 4, 4, 1.0, -2.0), FieldError, "sync_time"),
        (
            "max_staleness",
            lambda: simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, max_staleness=-1),
            FieldError,
            "max_staleness",
        ),
        ("steps", lambda: simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, steps=0), FieldError, "steps"),
        ("no-durations", lambda: simulate_pipeline(None, 4, 4, 1.0, 1.0), FieldError, "durations"),  # type: ignore[arg-type]
        (
            "interrupt",
            lambda: simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, interrupt=1),  # type: ignore[arg-type]
            FieldError,
            "interrupt",
        ),
        ("scenario", lambda: pipesim.run(3), FieldError, "scenario"),  # type: ignore[arg-type]
    ]
    + [
        (
            f"durations-{n}",
            (lambda b=b: simulate_pipeline(_pool(b), 4, 4, 1.0, 1.0)),
            FieldError,
            "durations[7]",
        )
        for n, b in (("nan", math.nan), ("inf", math.inf), ("negative", -1.0))
    ]
    + [
        (f"{how}durations-{n}", (lambda p=p, how=how: _facade(how, p)), FieldError, "durations")
        for n, p in (
            ("complex", np.array([1 + 2j] * 20)),
            ("datetime", np.array(["2024-01-01"] * 20, dtype="datetime64[D]")),
            ("timedelta", np.array([3] * 20, dtype="timedelta64[s]")),
            ("bool", [True] * 20),
            ("text", ["1.0"] * 20),
            ("masked", np.ma.array([1.0] * 20, mask=[0] * 19 + [1])),
            ("two-dimensional", np.ones((4, 5))),
        )
        for how in ("", "run-")
    ]
    + [
        (f"run-durations-{n}", (lambda p=p: pipesim.run(_small(), p)), FieldError, "durations[0]")
        for n, p in (
            ("timedelta-objects", np.array([np.timedelta64(5000, "ms")] * 20, dtype=object)),
            ("bool-objects", np.array([True] * 20, dtype=object)),
            ("bool-in-list", [True] + [5.0] * 19),
            ("text-objects", np.array(["5"] * 20, dtype=object)),
            ("datetime-objects", np.array([np.datetime64(5, "s")] * 20, dtype=object)),
        )
    ]
)

DURATIONS: list[Row] = (
    [
        ("exponential-mean", lambda: ExponentialDurations(mean_s=0), FieldError, "mean_s"),
        ("exponential-bool", lambda: ExponentialDurations(mean_s=True), FieldError, "mean_s"),
        (
            "sample-negative-n",
            lambda: ExponentialDurations().sample(-1, np.random.default_rng(0)),
            FieldError,
            "n",
        ),
        (
            "sample-torch-generator",
            lambda: ExponentialDurations().sample(3, __import__("torch").Generator()),
            FieldTypeError,
            "generator",
        ),
        ("agent-decode-rate", lambda: AgentDurations(decode_rate_tok_s=-1), FieldError, "decode_rate_tok_s"),
        (
            "agent-tokens-text",
            lambda: AgentDurations(tokens_per_turn=("a", "b")),
            FieldError,
            "tokens_per_turn[0]",
        ),
        (
            "agent-tokens-three",
            lambda: AgentDurations(tokens_per_turn=(1, 2, 3)),
            FieldError,
            "tokens_per_turn",
        ),  # type: ignore[arg-type]
        (
            "agent-tokens-reversed",
            lambda: AgentDurations(tokens_per_turn=(9, 2)),
            FieldError,
            "tokens_per_turn",
        ),
        ("agent-mean_turns-text", lambda: AgentDurations(mean_turns="8"), FieldError, "mean_turns"),  # type: ignore[arg-type]
        ("agent-max_turns-bool", lambda: AgentDurations(max_turns=True), FieldError, "max_turns"),
        ("agent-max_turns-huge", lambda: AgentDurations(max_turns=10**9), FieldError, "max_turns"),
        ("agent-tool-tail", lambda: AgentDurations(tool_sigma=500.0), FieldError, "tool_sigma"),
        (
            "agent-decode-overflow",
            lambda: AgentDurations(decode_rate_tok_s=1e-310),
            FieldError,
            "decode_rate_tok_s",
        ),
        ("agent-draws", lambda: AgentDurations(draws="torch"), FieldError, "draws"),  # type: ignore[arg-type]
        (  # the chapter's draws are float32: 40 turns of 1.5e299 s became inf, then NaN
            "agent-tokens-float32",
            lambda: AgentDurations(tokens_per_turn=(100, 6e300)),
            FieldError,
            "tokens_per_turn",
        ),
        ("agent-tool-float32", lambda: AgentDurations(tool_median_s=1e37), FieldError, "tool_median_s"),
        ("lognormal-tail", lambda: LogNormalDurations(median_s=1e308, sigma=5), FieldError, "sigma"),
    ]
    + [
        (f"trace-values-{n}", (lambda b=b: TraceDurations.from_values(_pool(b))), FieldError, "values[7]")
        for n, b in (("nan", math.nan), ("inf", math.inf), ("negative", -1.0))
    ]
    + [
        ("trace-bool", lambda: TraceDurations((True, 2.0), cycle=True), FieldError, "values[0]"),
        ("trace-empty", lambda: TraceDurations(()), FieldError, "values"),
        ("trace-too-short", lambda: TraceDurations.from_values([1.0, 2.0]).sample(3), FieldError, "cycle"),
    ]
    + [
        (f"{field}-{type(v).__name__}", (lambda make=make, v=v: make(v)), FieldError, field)
        for make, field in (
            (lambda x: PipelineConfig(train_time_s=x), "train_time_s"),
            (lambda x: AgentDurations(decode_rate_tok_s=x), "decode_rate_tok_s"),
            (lambda x: LogNormalDurations(median_s=x), "median_s"),
        )
        for v in (np.float32(2.0), fractions.Fraction(3, 2), decimal.Decimal("2.5"))
    ]
)

POLICIES: list[Row] = [
    ("sync-every-k-class", lambda: pipesim.SyncEveryK(2, pipesim.Drain), FieldError, "inner"),  # type: ignore[arg-type]
    ("sync-every-k-zero", lambda: pipesim.SyncEveryK(0), FieldError, "k"),
    ("replicas-routing-class", lambda: pipesim.Replicas(2, pipesim.LeastLoaded), FieldError, "routing"),  # type: ignore[arg-type]
    ("replicas-zero", lambda: pipesim.Replicas(0), FieldError, "n_replicas"),
    ("abort-restart", lambda: pipesim.AbortRestart(restart=1), FieldError, "restart"),  # type: ignore[arg-type]
]

ENGINE: list[Row] = [  # the kernel's options (tests/test_engine_paths.py's test_options_are_checked)
    ("options-hints-int", lambda: EngineOptions(hints=1), FieldError, "hints"),  # type: ignore[arg-type]
    (
        "pipeline-options-dict",
        lambda: Pipeline(Scenario(), [1.0], options={"hints": False}),  # type: ignore[arg-type]
        FieldError,
        "options",
    ),
]

ROWS = [(f"pipeline/{r[0]}", *r[1:]) for r in PIPELINE]
ROWS += [(f"scenario/{r[0]}", *r[1:]) for r in SCENARIO]
ROWS += [(f"with/{r[0]}", *r[1:]) for r in WITH]
ROWS += [(f"facade/{r[0]}", *r[1:]) for r in FACADE]
ROWS += [(f"durations/{r[0]}", *r[1:]) for r in DURATIONS]
ROWS += [(f"policies/{r[0]}", *r[1:]) for r in POLICIES]
ROWS += [(f"engine/{r[0]}", *r[1:]) for r in ENGINE]


def check_refusal(call: Callable[[], Any], kind: type[BaseException], field: str) -> FieldError:
    """``call`` raises ``kind`` (a FieldError) whose ``field`` is ``field`` and whose message names
    its last part; returns the error."""
    with pytest.raises(kind) as info:
        call()
    err = info.value
    assert isinstance(err, FieldError), type(err)
    assert err.field == field, (err.field, str(err))
    last = field.rsplit(".", 1)[-1].split("[")[0]
    assert last.lower() in str(err).lower(), (last, str(err))
    return err


@pytest.mark.parametrize(("call", "kind", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_core_input_is_refused_naming_the_field(
    call: Callable[[], Any], kind: type[BaseException], field: str
) -> None:
    err = check_refusal(call, kind, field)
    assert isinstance(err, ValueError)  # `except ValueError` keeps catching every refusal


# -- the validator itself ------------------------------------------------------------------------
_NOT_INT = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.none(),
    st.builds(np.int64, st.integers(0, 9)),
)


@given(name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True), value=_NOT_INT, low=st.integers(-5, 5))
def test_check_int_names_the_field_of_any_value_that_is_not_a_python_int(
    name: str, value: Any, low: int
) -> None:
    with pytest.raises(FieldError) as info:
        check_int(name, value, low)
    assert info.value.field == name


@given(value=st.integers(-(10**30), 10**30), low=st.integers(-100, 100), high=st.integers(-100, 100))
def test_check_int_refuses_exactly_the_ints_outside_the_bounds(value: int, low: int, high: int) -> None:
    inside = low <= value <= high
    try:
        check_int("k", value, low, high)
    except FieldError as err:
        assert not inside and err.field == "k"
    else:
        assert inside


@given(value=st.floats(allow_nan=True, allow_infinity=True), low=st.floats(-10, 10), strict=st.booleans())
def test_check_number_refuses_exactly_the_values_outside(value: float, low: float, strict: bool) -> None:
    inside = math.isfinite(value) and (value > low if strict else value >= low)
    try:
        check_number("x_s", value, low, strict=strict)
    except FieldError as err:
        assert not inside and err.field == "x_s"
    else:
        assert inside


@given(prefixes=st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), max_size=4))
def test_nested_fields_gain_each_prefix_outermost_first(prefixes: list[str]) -> None:
    err = refuse("n_slots", "must be an integer >= 1, got 0")
    for p in reversed(prefixes):
        err = err.nested(p)
    assert err.field == ".".join([*prefixes, "n_slots"])
    assert str(err).startswith(err.field)  # the message is rebuilt from the nested field


def test_within_keeps_the_type_and_passes_other_errors_through() -> None:
    with pytest.raises(FieldTypeError) as info, within("workload"):
        raise refuse("generator", "must be a numpy Generator", FieldTypeError)
    assert info.value.field == "workload.generator" and isinstance(info.value, TypeError)
    with pytest.raises(KeyError), within("workload"):
        raise KeyError("x")


@pytest.mark.parametrize("kind", [FieldError, FieldTypeError])
def test_a_field_error_survives_pickling(kind: type[FieldError]) -> None:
    """A sweep worker's refusal crosses a process boundary with its field and file."""
    err = kind("x.toml: pipeline.n_slots must be ...", "pipeline.n_slots", "x.toml")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.field, back.file, str(back)) == (kind, err.field, err.file, str(err))


_PIPELINE_FIELDS = (
    "n_slots",
    "batch_size",
    "train_time_s",
    "sync_time_s",
    "max_staleness",
    "steps",
    "colocated",
    "stream_batches",
)
_BAD_VALUES = st.one_of(
    st.integers(max_value=-1),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.5, "8", None, (1,), 2.5j]),
)


@given(name=st.sampled_from(_PIPELINE_FIELDS), value=_BAD_VALUES)
def test_a_bad_pipeline_field_in_a_scenario_is_named_under_pipeline(name: str, value: object) -> None:
    """Whatever the field and the bad value, ``with_`` (sweeps, ``--set``) names ``pipeline.<field>``."""
    with pytest.raises(FieldError) as info:
        _small().with_(**{name: value})
    assert info.value.field == f"pipeline.{name}"
    assert str(info.value).startswith(f"pipeline.{name}")
