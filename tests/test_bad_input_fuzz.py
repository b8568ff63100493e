"""Bad input found by mutating the example specs one value at a time (wrong types, 0, -1, NaN,
inf, 1e308, 10**18, 5,000-digit integers, unknown names), each refused with an error that names
the field: table-driven, one row per case. Each row asserts the exception type, ``err.field`` and
that the message names the field's last part and stays one short line; no row runs a simulation.

What the pass found: an integer key without an upper bound took 1e308 as a 309-digit int, which
then overflowed the trainer's float arithmetic mid-run as a clock overflow naming no key
(``model.micro_batch_tokens``), made a design's name too long to run (``design.sync_every``,
``baseline.sync_every``) or a 300-digit message (``workload.max_response_tokens``,
``agent.turns``); a ``[baseline]`` was checked only when run, after the whole search, its errors
naming the run's internals (``trainer_gpus``, ``tp``, ``pool_size``, an OverflowError); a sample
longer than ``model.max_model_len`` blamed ``design.tp``; a space of millions of designs was
enumerated for minutes and gigabytes before the first run; ``kind = "Compute"`` was an "unknown
table" to ``pipesim plan``; an integer of more than 4,300 digits surfaced Python's own ValueError;
the compute configs took 10**308 GPUs, epochs, bytes or seconds and overflowed later.

A second pass: a config's bound printed the whole int (490 characters for 10**308, Python's
ValueError past 4,300 digits), and so did the pool-size refusal; a scenario file's 5,000-digit
integer surfaced Python's ValueError naming no file; ``pipesim run`` called a run spec with
``kind = "Compute"`` a plan spec; a CSV row with fewer fields than the header was read with NaN
(one with more was refused); a JSON ``true`` in a number column was shown as ``np.True_``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim import PipelineConfig, Scenario
from pipesim.calibrate.log import LogError, read_log
from pipesim.compute import (
    GPUS,
    HF_CONFIGS,
    MODELS,
    AgentTurns,
    EngineConfig,
    LogNormalLengths,
    ModelSpec,
    TokenWorkload,
    TrainerConfig,
)
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.cli_common import build_scenario
from pipesim.io.scenario_files import ScenarioFileError, dumps, load_scenario
from pipesim.plan import runspec, specfile
from pipesim.plan.build import candidates
from pipesim.plan.checks import PlanError
from pipesim.plan.space import Design
from tests.test_refusals_core import check_refusal

ROOT = Path(__file__).resolve().parent.parent
RUN_SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
AGENT_SPEC = ROOT / "examples" / "agent_plan.toml"
PLAN_SPEC = ROOT / "examples" / "plan_qwen3_8b.toml"
MAX_MESSAGE = 1_000  # characters: the longest one-line error any case below may give
DIGITS = "9" * 5_000  # past Python's 4,300-digit limit on converting an int's text
H100, QWEN8 = GPUS["h100-sxm"], MODELS["qwen3-8b"]
WORK = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=128, max_response_tokens=1024)


def refused(call: Callable[[], Any], kind: type[BaseException], field: str) -> FieldError:
    err = check_refusal(call, kind, field)
    assert len(str(err)) < MAX_MESSAGE, str(err)[:300]
    return err


# -- a run spec, one --set at a time: (id, pairs, field) ---------------------------------------

RUN_ROWS: list[tuple[str, list[str], str]] = [
    ("sync-every-1e308", ["design.sync_every=1e308"], "design.sync_every"),
    ("micro-batch-tokens-1e308", ["model.micro_batch_tokens=1e308"], "model.micro_batch_tokens"),
    (
        "log-prob-micro-batch-tokens-1e308",
        ["model.log_prob_micro_batch_tokens=1e308"],
        "model.log_prob_micro_batch_tokens",
    ),
    ("mini-batch-samples-1e308", ["model.ppo_mini_batch_samples=1e308"], "model.ppo_mini_batch_samples"),
    ("max-response-tokens-1e308", ["workload.max_response_tokens=1e308"], "workload.max_response_tokens"),
    ("prompt-tokens-1e308", ["workload.prompt_tokens=1e308"], "workload.prompt_tokens"),
    ("max-prompt-tokens-1e308", ["workload.max_prompt_tokens=1e308"], "workload.max_prompt_tokens"),
    ("max-model-len-1e308", ["model.max_model_len=1e308"], "model.max_model_len"),
    ("max-model-len-past-the-model", ["model.max_model_len=50000"], "model.max_model_len"),
    ("max-model-len-below-a-sample", ["model.max_model_len=1000"], "workload.max_response_tokens"),
    ("median-tokens-1e18", ["workload.response.median_tokens=1e18"], "workload.response.median_tokens"),
    ("agent-turns-1e308", ["workload.agent={turns = 1e308}"], "workload.agent.turns"),
    (
        "agent-observation-tokens-1e308",
        ["workload.agent={observation_tokens = 1e308}"],
        "workload.agent.observation_tokens",
    ),
    ("agent-turns-0", ["workload.agent={turns = 0}"], "workload.agent.turns"),
    ("agent-tool-latency-1e18", ["workload.agent={tool_latency_s = 1e18}"], "workload.agent.tool_latency_s"),
    ("int-of-5000-digits", [f"cluster.n_gpus={DIGITS}"], "cluster.n_gpus"),
]


@pytest.mark.parametrize(("pairs", "field"), [r[1:] for r in RUN_ROWS], ids=[r[0] for r in RUN_ROWS])
def test_a_run_spec_refuses_a_bad_value_naming_the_key(pairs: list[str], field: str) -> None:
    err = refused(lambda: runspec.load(RUN_SPEC, pairs), PlanError, field)
    assert err.file == str(RUN_SPEC)
    assert "Exceeds the limit" not in str(err)  # Python's own words for a long int, not the spec's


def test_a_context_refusal_names_the_spec_keys() -> None:
    """``model.max_model_len`` past the model's context was refused as ``design.tp (1): ... does
    not fit``, the one key that cannot help; a sample longer than the engines' context names the
    workload's key and ``model.max_model_len`` (it named ``design.tp`` until ada9eab), the spec's
    keys, not the config's."""
    with pytest.raises(PlanError) as info:
        runspec.load(RUN_SPEC, ["model.max_model_len=50000"])
    assert str(info.value).endswith("model.max_model_len (50000) exceeds the model's context (40960 tokens)")
    with pytest.raises(PlanError) as info:
        runspec.load(RUN_SPEC, ["model.max_model_len=1000"])
    assert info.value.field == "workload.max_response_tokens"
    assert "max_response_tokens 4,096" in str(info.value) and "model.max_model_len = 1,000" in str(info.value)


# -- a plan spec, one --set at a time ------------------------------------------------------------

BASE = ["baseline.placement=16"]  # a valid [baseline] the rows below spoil one key of

PLAN_ROWS: list[tuple[str, list[str], str]] = [
    ("space-sync-every-1e308", ["space.sync_every=[1, 1e308]"], "space.sync_every[1]"),
    ("baseline-oversample-1e308", [*BASE, "baseline.oversample=1e308"], "baseline.oversample"),
    ("baseline-oversample-1e18", [*BASE, "baseline.oversample=1e18"], "baseline.oversample"),
    ("baseline-eta-1e18", [*BASE, "baseline.eta=1000000000000000000"], "baseline.eta"),
    ("baseline-tp-1e18", [*BASE, "baseline.tp=1000000000000000000"], "baseline.tp"),
    ("baseline-sync-every-1e308", [*BASE, "baseline.sync_every=1e308"], "baseline.sync_every"),
    ("baseline-placement-1e18", ["baseline.placement=1000000000000000000"], "baseline.placement"),
    ("baseline-placement-every-gpu", ["baseline.placement=64"], "baseline.placement"),
    ("baseline-update-unknown", [*BASE, "baseline.update=dran"], "baseline.update"),
]


@pytest.mark.parametrize(("pairs", "field"), [r[1:] for r in PLAN_ROWS], ids=[r[0] for r in PLAN_ROWS])
def test_a_plan_spec_refuses_a_bad_value_naming_the_key(pairs: list[str], field: str) -> None:
    err = refused(lambda: specfile.load(PLAN_SPEC, pairs), PlanError, field)
    assert err.file == str(PLAN_SPEC)


HUGE_SPACES: list[tuple[str, list[str]]] = [
    ("millions", ["cluster.n_gpus=4096", "space.tp=[1, 2, 4, 8]", f"space.eta={list(range(1025))}"]),
    ("1999-sync-intervals", [f"space.sync_every={list(range(1, 2000))}"]),
]


@pytest.mark.parametrize("pairs", [r[1] for r in HUGE_SPACES], ids=[r[0] for r in HUGE_SPACES])
def test_a_space_of_millions_is_refused_before_it_is_built(pairs: list[str]) -> None:
    """33 million designs took minutes and gigabytes to enumerate before the first run."""
    spec = specfile.load(PLAN_SPEC, pairs)
    err = refused(lambda: candidates(spec), PlanError, "space")
    assert "designs" in str(err)
    refused(lambda: plan.search(spec), PlanError, "space")


def test_a_run_spec_on_the_largest_cluster_is_no_plan() -> None:
    """A run spec is read through a plan spec with the default space: its size is a plan's
    concern, so a run on 65,536 GPUs still loads where its engines' sequences fit a run's task
    pool; where they do not, it is refused at load, naming the keys that size it."""
    assert runspec.load(RUN_SPEC, ["cluster.n_gpus=65536", "model.max_num_seqs=32"]).plan.n_gpus == 65536
    with pytest.raises(PlanError) as info:
        runspec.load(RUN_SPEC, ["cluster.n_gpus=65536"])
    assert info.value.field == "model.max_num_seqs" and "cluster.n_gpus" in str(info.value)


def test_the_baseline_update_lists_the_choices() -> None:
    with pytest.raises(PlanError) as info:
        specfile.load(PLAN_SPEC, [*BASE, "baseline.update=dran"])
    assert "did you mean 'drain'" in str(info.value) and "abort_reprefill" in str(info.value)


def test_a_baseline_that_does_not_fit_is_refused_before_the_search() -> None:
    """A ``[baseline]`` runs after the search, so its tp was refused (as ``tp``, naming no key)
    only once every design had run; now before the first."""
    spec = specfile.load(PLAN_SPEC, ["baseline.placement=16", "baseline.tp=3"])
    err = refused(lambda: plan.search(spec), PlanError, "baseline.tp")
    assert "must divide" in str(err)


def test_a_misspelt_kind_is_named_by_the_plan(tmp_path: Path) -> None:
    """``kind = "Compute"``: ``pipesim run`` takes the file for a plan spec, and ``pipesim plan``
    called ``kind`` an unknown table."""
    path = tmp_path / "run.toml"
    path.write_text(RUN_SPEC.read_text().replace('kind = "compute"', 'kind = "Compute"'))
    err = refused(lambda: specfile.load(path), PlanError, "kind")
    assert "'Compute'" in str(err) and '"compute"' in str(err)


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_an_integer_past_pythons_digit_limit_names_the_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"spec{suffix}"
    sep = " = " if suffix == ".toml" else ": "
    text = PLAN_SPEC.read_text().replace("n_gpus = 64", f"n_gpus{sep}{DIGITS}")
    if suffix == ".yaml":
        text = f"cluster:\n  gpu: h100-sxm\n  n_gpus: {DIGITS}\nmodel:\n  name: qwen3-8b\n"
    path.write_text(text)
    with pytest.raises(PlanError) as info:
        specfile.load(path)
    assert info.value.file == str(path)
    assert "digits" in str(info.value) and "sys.set_int_max_str_digits" not in str(info.value)
    assert len(str(info.value)) < MAX_MESSAGE


def test_the_cli_refuses_them_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(PLAN_SPEC.read_text().replace("n_gpus = 64", f"n_gpus = {DIGITS}"))
    for argv in (
        ["plan", str(path), "--no-cache", "--quiet"],
        ["plan", str(PLAN_SPEC), "--no-cache", "--quiet", "--set", "space.sync_every=[1e308]"],
        ["run", str(RUN_SPEC), "--set", "model.micro_batch_tokens=1e308"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err) < MAX_MESSAGE, err[:300]
        assert "clock overflowed" not in err and "Exceeds the limit" not in err, err


# -- the Python API: the compute configs and the plan's --------------------------------------------


def _trainer(**kw: Any) -> TrainerConfig:
    t = TrainerConfig(**{"model": QWEN8, "gpu": H100, "n_gpus": 8, **kw})
    t.phase_times_s(1e6, 128)  # what overflowed
    return t


def _plan(**kw: Any) -> plan.PlanSpec:
    return plan.PlanSpec(
        **{"gpu": H100, "n_gpus": 8, "model": MODELS["qwen3-0.6b"], "workload": WORK, "batch_size": 4, **kw}
    )


def _hf(key: str, value: object) -> ModelSpec:
    return ModelSpec.from_hf_config({**HF_CONFIGS["qwen3-8b"], key: value}, name="x")


API_ROWS: list[tuple[str, Callable[[], Any], str]] = [
    ("trainer-micro-batch-tokens", lambda: _trainer(micro_batch_tokens=10**308), "micro_batch_tokens"),
    (
        "trainer-log-prob-tokens",
        lambda: _trainer(log_prob_micro_batch_tokens=2**53 + 1),
        "log_prob_micro_batch_tokens",
    ),
    ("trainer-mini-batch", lambda: _trainer(ppo_mini_batch_samples=2**53 + 1), "ppo_mini_batch_samples"),
    ("trainer-n-gpus", lambda: _trainer(n_gpus=10**308), "n_gpus"),
    (
        "trainer-optimizer-bytes",
        lambda: _trainer(optimizer_bytes_per_param=10**308),
        "optimizer_bytes_per_param",
    ),
    ("trainer-step-overhead", lambda: _trainer(step_overhead_s=1e308), "step_overhead_s"),
    ("trainer-epochs", lambda: _trainer(ppo_epochs=10**6), "ppo_epochs"),
    ("workload-max-response", lambda: TokenWorkload(max_response_tokens=2**31), "max_response_tokens"),
    ("workload-max-prompt", lambda: TokenWorkload(max_prompt_tokens=2**31), "max_prompt_tokens"),
    ("workload-prompt", lambda: TokenWorkload(prompt=2**31), "prompt"),
    ("agent-turns", lambda: AgentTurns(turns=2**31), "turns"),
    ("agent-observation-tokens", lambda: AgentTurns(observation_tokens=2**31), "observation_tokens"),
    (
        "engine-max-model-len",
        lambda: EngineConfig(model=QWEN8, gpu=H100, max_model_len=2**31),
        "max_model_len",
    ),
    ("hf-hidden-size-300-digits", lambda: _hf("hidden_size", 10**308), "hidden_size"),
    ("hf-vocab-1e20", lambda: _hf("vocab_size", 1e20), "vocab_size"),
    ("plan-micro-batch-tokens", lambda: _plan(micro_batch_tokens=2**53 + 1), "model.micro_batch_tokens"),
    ("plan-max-model-len", lambda: _plan(max_model_len=2**31), "model.max_model_len"),
    ("plan-sync-every", lambda: _plan(space=plan.Space(sync_every=(2**28 + 1,))), "space.sync_every[0]"),
    (
        "plan-baseline-oversample",
        lambda: _plan(baseline=Design(trainer_gpus=0, oversample=1e308)),
        "baseline.oversample",
    ),
    ("plan-baseline-placement", lambda: _plan(baseline=Design(trainer_gpus=8)), "baseline.placement"),
    ("plan-baseline-eta", lambda: _plan(baseline=Design(trainer_gpus=0, eta=10**18)), "baseline.eta"),
    (
        "plan-baseline-update",
        lambda: _plan(baseline=Design(trainer_gpus=0, update="dran")),
        "baseline.update",
    ),
    ("plan-baseline-not-a-design", lambda: _plan(baseline=(0, 1)), "baseline"),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in API_ROWS], ids=[r[0] for r in API_ROWS])
def test_the_api_refuses_a_bad_value_naming_the_field(call: Callable[[], Any], field: str) -> None:
    err = check_refusal(call, FieldError, field)
    assert isinstance(err, ValueError)


def test_a_config_json_key_of_300_digits_is_cut_short() -> None:
    with pytest.raises(FieldError) as info:
        _hf("num_hidden_layers", 10**308)
    assert len(str(info.value)) < 300, str(info.value)


def test_the_bounds_keep_real_values() -> None:
    """The new bounds sit far above any real value: the examples and a long-context agent load."""
    assert runspec.load(RUN_SPEC).design.sync_every == 1
    spec = specfile.load(AGENT_SPEC, ["workload.agent.tool_latency_s=3600"])
    assert spec.workload.agent is not None and spec.workload.agent.tool_latency_s == 3600
    assert dataclasses.replace(WORK, max_response_tokens=10**6).max_response_tokens == 10**6
    _trainer(micro_batch_tokens=10**6, ppo_epochs=4, step_overhead_s=60.0)
    _trainer(micro_batch_tokens=int(1e12), log_prob_micro_batch_tokens=int(1e12))  # AReaL's "no cap"
    big = "1_000_000_000_000"  # 1e12 is a float, refused where an integer belongs (as 8.0 is)
    specfile.load(PLAN_SPEC, [f"model.micro_batch_tokens={big}"])  # a mini-batch past the batch is refused


# -- the second pass: long ints in messages, scenario files, the run's kind, logs -----------------

BIG_INT_ROWS: list[tuple[str, Callable[[], Any], str]] = [
    ("pipeline-batch-size-1e308", lambda: PipelineConfig(batch_size=10**308), "batch_size"),
    ("pipeline-batch-size-5000-digits", lambda: PipelineConfig(batch_size=10**5_000), "batch_size"),
    ("pipeline-n-slots-5000-digits", lambda: PipelineConfig(n_slots=10**5_000), "n_slots"),
    ("scenario-seed-5000-digits", lambda: Scenario(seed=10**5_000), "seed"),
    (
        "scenario-pool-steps-1e308",
        lambda: Scenario(pipeline=PipelineConfig(batch_size=8, steps=10**308)),
        "pipeline.steps",
    ),
    (
        "scenario-pool-steps-5000-digits",
        lambda: Scenario(pipeline=PipelineConfig(batch_size=8, steps=10**5_000)),
        "pipeline.steps",
    ),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in BIG_INT_ROWS], ids=[r[0] for r in BIG_INT_ROWS])
def test_a_huge_int_is_shown_short(call: Callable[[], Any], field: str) -> None:
    """``got {value:,}`` wrote 10**308 in 490 characters, and past 4,300 digits raised Python's
    own ValueError in place of the refusal."""
    err = refused(call, FieldError, field)
    assert "Exceeds the limit" not in str(err) and len(str(err)) < 300, str(err)[:300]
    assert "e+" in str(err)  # 1.00e+308: the value's size, in scientific notation


def test_an_ordinary_int_keeps_its_separators() -> None:
    err = refused(lambda: PipelineConfig(batch_size=10**8), FieldError, "batch_size")
    assert str(err).endswith("got 100,000,000"), str(err)
    err = refused(
        lambda: Scenario(pipeline=PipelineConfig(batch_size=8, steps=10**8)), FieldError, "pipeline.steps"
    )
    assert "steps 100,000,000" in str(err), str(err)


def _scenario_file(tmp_path: Path, suffix: str) -> Path:
    path = tmp_path / f"scenario{suffix}"
    text = dumps(Scenario(pipeline=PipelineConfig(batch_size=8, steps=3)), suffix[1:])
    sep = " = " if suffix == ".toml" else ": "
    assert f"steps{sep}3\n" in text
    path.write_text(text.replace(f"steps{sep}3\n", f"steps{sep}{DIGITS}\n"))
    return path


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_a_scenario_files_integer_past_pythons_digit_limit_names_the_file(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parser's ValueError came through whole, naming no file."""
    path = _scenario_file(tmp_path, suffix)
    with pytest.raises(ScenarioFileError) as info:
        load_scenario(path)
    assert info.value.file == str(path) and str(info.value).startswith(str(path))
    assert "digits" in str(info.value) and "sys.set_int_max_str_digits" not in str(info.value)
    assert len(str(info.value)) < MAX_MESSAGE
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Exceeds the limit" not in err and len(err) < MAX_MESSAGE, err[:300]


KIND_ROWS: list[tuple[str, str]] = [
    ("capitalised", '"Compute"'),
    ("unknown", '"abc"'),
    ("a-number", "3"),
]


@pytest.mark.parametrize("kind", [r[1] for r in KIND_ROWS], ids=[r[0] for r in KIND_ROWS])
def test_a_misspelt_kind_is_named_by_run(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim run`` (and ``list``, ``sweep``: every scenario command) called a run spec whose
    kind is not ``"compute"`` a plan spec."""
    path = tmp_path / "run.toml"
    path.write_text(RUN_SPEC.read_text().replace('kind = "compute"', f"kind = {kind}"))
    err = refused(lambda: build_scenario(str(path), [], None), PlanError, "kind")
    assert err.file == str(path) and 'kind must be "compute"' in str(err), str(err)
    for argv in (["run", str(path)], ["list", str(path)]):
        assert main(argv) == 2
        out = capsys.readouterr().err
        assert 'kind must be "compute"' in out and "plan spec" not in out, out


def test_a_plan_spec_is_still_named_by_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(PLAN_SPEC)]) == 2
    assert "a plan spec" in capsys.readouterr().err


LOG_ROWS: list[tuple[str, str, str, str, str]] = [
    # (id, file name, text, field, words the message holds)
    ("csv-row-short", "log.csv", "step,timing_s/step\n1,10.0\n2\n3,12.0\n", "log", "line 3, saw 1"),
    ("csv-row-long", "log.csv", "step,timing_s/step\n1,10.0\n2,11.0,5\n3,12.0\n", "log", "line 3, saw 3"),
    ("tsv-row-short", "log.tsv", "step\ttiming_s/step\n1\t10.0\n2\n3\t12.0\n", "log", "line 3, saw 1"),
    (
        "jsonl-true",
        "log.jsonl",
        '{"step": 1, "timing_s/step": 10.0}\n{"step": 2, "timing_s/step": true}\n',
        "timing_s/step",
        "step 2: true is not",
    ),
    (
        "jsonl-all-flags",
        "log.jsonl",
        '{"step": 1, "timing_s/step": false}\n{"step": 2, "timing_s/step": true}\n',
        "timing_s/step",
        "step 1: false is not",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "field", "words"), [r[1:] for r in LOG_ROWS], ids=[r[0] for r in LOG_ROWS]
)
def test_a_bad_log_row_is_refused_naming_it(
    tmp_path: Path, name: str, text: str, field: str, words: str
) -> None:
    """A CSV row short of the header was read with NaN (a long one was refused); a JSON ``true``
    was shown as numpy's ``np.True_``."""
    path = tmp_path / name
    path.write_text(text)
    err = refused(lambda: read_log(path), LogError, field)
    assert str(err).startswith(str(path)) and words in str(err), str(err)
    assert "np." not in str(err)


def test_a_blank_line_in_a_csv_is_no_short_row(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("step,timing_s/step\n1,10.0\n\n   \n2,11.0\n3,12.0\n")
    assert list(read_log(path).frame["step"]) == [1.0, 2.0, 3.0]
