"""``pipesim plan`` on bad input: every mistake in a spec file or on the command line stops before
any search, in one line (``pipesim plan: error: FILE: table.key ...``) with exit status 2 and no
traceback; nothing is silently ignored, truncated or clamped. The search itself is replaced by a
function that fails, so none of these tests runs one (but the two that write a real result)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan

SPEC = """\
[cluster]
gpu = "h100-sxm"
n_gpus = 4

[model]
name = "qwen3-0.6b"

[workload]
prompts_per_step = 4
samples_per_prompt = 1
prompt_tokens = 128
response = { median_tokens = 200, sigma = 0.5 }
max_response_tokens = 1024

[constraints]
max_staleness = 4

[space]
placement = ["colocated"]
tp = [1]
eta = [0, 1]
update = ["partial"]
sync_every = [1]
oversample = [1.0]

[search]
method = "grid"
screen_steps = 2
steps = 3
seeds = 1
min_full = 2
"""


def variant(old: str, new: str) -> str:
    assert old in SPEC, old
    return SPEC.replace(old, new, 1)


@pytest.fixture
def no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pipesim plan`` fails the test if it starts a search."""

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the search ran: the input should have been rejected before it")

    monkeypatch.setattr(plan, "plan", boom)


def run_cli(path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``pipesim plan PATH --quiet EXTRA``: exit status 2 and one line on stderr; that line."""
    t0 = time.perf_counter()
    rc = plan.main([str(path), "--quiet", "--no-sensitivity", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert time.perf_counter() - t0 < 5  # checked before anything runs
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("pipesim plan: error: "), err
    return err


def spec_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, name: str = "s.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    err = run_cli(path, capsys=capsys)
    assert err.count(name) == 1, err  # names the file, once
    with pytest.raises(plan.PlanError) as info:  # the same error from Python, naming the file too
        plan.load(path)
    assert name in str(info.value)
    return err


# -- 1. unknown keys in inline tables ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "response = { median_tokens = 200,",
            "response = { median_token = 200,",
            ["workload.response.median_token", "unknown key", "did you mean 'median_tokens'"],
        ),
        (
            "response = { median_tokens = 200, sigma = 0.5 }",
            'response_trace = { path = "t.csv", colum = "n" }',
            ["workload.response_trace.colum", "did you mean 'column'"],
        ),
        (
            "max_response_tokens = 1024",
            "max_response_tokens = 1024\nagent = { turn = 2 }",
            ["workload.agent.turn", "did you mean 'turns'"],
        ),
        ("tp = [1]", "tpp = [1]", ["space.tpp", "did you mean 'tp'"]),
        ("[space]", "[spaces]", ["unknown table [spaces]", "did you mean 'space'"]),
    ],
)
def test_unknown_keys_in_every_table_are_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_search: None,
    old: str,
    new: str,
    expected: list[str],
) -> None:
    err = spec_error(tmp_path, capsys, variant(old, new))
    for fragment in expected:
        assert fragment in err, err


def test_unknown_key_in_a_yaml_inline_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None
) -> None:
    text = (
        "cluster: {gpu: h100-sxm, n_gpus: 4}\nmodel: {name: qwen3-0.6b}\n"
        "workload:\n  response: {median_token: 200}\n"
    )
    err = spec_error(tmp_path, capsys, text, "s.yaml")
    assert "workload.response.median_token" in err and "median_tokens" in err


# -- 2. numbers: never truncated, clamped or accepted out of range ------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("n_gpus = 4", "n_gpus = 4.7", "cluster.n_gpus"),
        ("n_gpus = 4", "n_gpus = true", "cluster.n_gpus"),
        ("prompts_per_step = 4", "prompts_per_step = 4.9", "workload.prompts_per_step"),
        ("samples_per_prompt = 1", "samples_per_prompt = 2.5", "workload.samples_per_prompt"),
        ("prompt_tokens = 128", "prompt_tokens = -1", "workload.prompt_tokens"),
        ("tp = [1]", "tp = [1.5]", "space.tp[0]"),
        ("eta = [0, 1]", "eta = [0.5]", "space.eta[0]"),
        ("eta = [0, 1]", "eta = [0, 100000]", "space.eta[1]"),
        ("sync_every = [1]", "sync_every = [0]", "space.sync_every[0]"),
        ("sync_every = [1]", "sync_every = [-2]", "space.sync_every[0]"),
        ("oversample = [1.0]", "oversample = [nan]", "space.oversample[0]"),
        ("oversample = [1.0]", "oversample = [inf]", "space.oversample[0]"),
        ('placement = ["colocated"]', "placement = [-2]", "space.placement[0]"),
        ("max_staleness = 4", "max_staleness = nan", "constraints.max_staleness"),
        ("max_staleness = 4", "max_staleness = -1", "constraints.max_staleness"),
        ("max_staleness = 4", "mean_staleness = -0.5", "constraints.mean_staleness"),
        ("max_staleness = 4", "discarded_share = 1.5", "constraints.discarded_share"),
        ("max_staleness = 4", "offpolicy_token_share = 1.5", "constraints.offpolicy_token_share"),
        ("max_staleness = 4", "offpolicy_token_share = -0.1", "constraints.offpolicy_token_share"),
        ("max_staleness = 4", "min_trainer_gpus = -1", "constraints.min_trainer_gpus"),
        ("max_staleness = 4", "min_trainer_gpus = 2.5", "constraints.min_trainer_gpus"),
        ("sigma = 0.5", "sigma = nan", "workload.response.sigma"),
        (
            "prompts_per_step = 4\nsamples_per_prompt = 1",
            "batch_size = 10\nsamples_per_prompt = 4",
            "workload.batch_size",
        ),
        ("steps = 3", "steps = 3.5", "search.steps"),
        ("min_full = 2", "min_full = 2\nreduction = 1", "search.reduction"),  # looped forever
        ("min_full = 2", "min_full = 2\nreduction = 0", "search.reduction"),
        ("min_full = 2", "min_full = 2\nsync_time_s = nan", "search.sync_time_s"),
        ("min_full = 2", "min_full = 2\nsync_time_s = -5", "search.sync_time_s"),
        ("min_full = 2", "min_full = 2\nsim_seed = -1", "search.sim_seed"),
        ("min_full = 2", "min_full = 2\nsim_seed = 5000000000", "search.sim_seed"),
        ("min_full = 2", "min_full = 2\nbatch = 0", "search.batch"),
        ('name = "qwen3-0.6b"', 'name = "qwen3-0.6b"\nmfu = nan', "model.mfu"),
        ('name = "qwen3-0.6b"', 'name = "qwen3-0.6b"\nmax_num_seqs = 0', "model.max_num_seqs"),
        (
            "max_response_tokens = 1024",
            "max_response_tokens = 1024\nagent = { turns = 1.5 }",
            "workload.agent.turns",
        ),
    ],
)
def test_bad_numbers_are_errors_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None, old: str, new: str, key: str
) -> None:
    err = spec_error(tmp_path, capsys, variant(old, new))
    assert f"{key} must be" in err, err


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [("n_gpus = 4", "n_gpus = 4.0", "cluster.n_gpus"), ("tp = [1]", "tp = [1.0, 2]", "space.tp[0]")],
)
def test_integral_floats_are_refused_as_scenario_files_refuse_them(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    """``4.0`` where an integer belongs is refused naming the key (it read as 4 before; a scenario
    file refused it: one rule now, tests/test_inputs_fix_int_floats.py)."""
    path = tmp_path / "s.toml"
    path.write_text(variant(old, new))
    with pytest.raises(plan.PlanError) as info:
        plan.load(path)
    assert info.value.field == key


# (the configs refusing a bad key at construction: tests/test_refusals_plan.py, configs/*)


# -- 3. output paths: checked before the search; '-' is standard output --------------------------------
@pytest.mark.parametrize(
    ("option", "target"),
    [
        ("--json", "nodir/x.json"),
        ("--html", "nodir/x.html"),
        ("--json", "adir"),
        ("--html", "adir"),
        ("--json", "s.toml/x.json"),
    ],
)
def test_output_paths_are_checked_before_the_search(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_search: None,
    option: str,
    target: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "s.toml").write_text(SPEC)
    err = run_cli(Path("s.toml"), option, target, capsys=capsys)
    assert f"{option}:" in err, err


@pytest.mark.parametrize("option", ["--json", "--html"])
def test_dash_writes_to_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """A 4-run search (0.1 s): the output on stdout, the text report on stderr, no file named '-'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(SPEC)
    assert plan.main(["s.toml", "--quiet", "--no-sensitivity", option, "-"]) == 0
    out = capsys.readouterr()
    if option == "--json":
        assert json.loads(out.out)["recommended"]["feasible"]
    else:
        assert out.out.startswith("<!DOCTYPE html>") and out.out.rstrip().endswith("</html>")
    assert "recommended:" in out.err
    assert not (tmp_path / "-").exists()


def test_json_and_html_cannot_both_be_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None
) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    assert "--json and --html" in run_cli(tmp_path / "s.toml", "--json", "-", "--html", "-", capsys=capsys)


# -- 4. no tracebacks: every malformed spec is one line naming the file and the key -----------------------
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('[cluster]\ngpu = "h100-sxm"\nn_gpus = 4\n', "cluster = 5\n", "cluster must be a table"),
        (
            "response = { median_tokens = 200, sigma = 0.5 }",
            "response = 200",
            "workload.response must be a table",
        ),
        (
            "response = { median_tokens = 200, sigma = 0.5 }",
            'response_trace = { column = "x" }',
            "workload.response_trace.path is missing",
        ),
        (
            "response = { median_tokens = 200, sigma = 0.5 }",
            'response_trace = "t.csv"',
            "workload.response_trace must be a table",
        ),
        (
            "response = { median_tokens = 200, sigma = 0.5 }",
            'response_trace = { path = "nofile.csv" }',
            "workload.response_trace.path: cannot read",
        ),
        (
            "max_response_tokens = 1024",
            'max_response_tokens = 1024\nresponse_trace = { path = "t.csv" }',
            "give one of them",
        ),
        ("prompts_per_step = 4", "prompts_per_step = 4\nbatch_size = 8", "give one of them"),
        ("n_gpus = 4", "n_gpus = 100000000", "cluster.n_gpus must be an integer in [1, 65536]"),
        ("n_gpus = 4", 'n_gpus = "four"', "cluster.n_gpus must be an integer"),
        ("tp = [1]", 'tp = ["x"]', "space.tp[0] must be an integer"),
        ('placement = ["colocated"]', 'placement = ["colocatd"]', "did you mean 'colocated'"),
        ('placement = ["colocated"]', 'placement = "bogus"', "space.placement must be"),
        ('update = ["partial"]', "update = [5]", "space.update[0] must be a string"),
        ('gpu = "h100-sxm"', "gpu = 5", "cluster.gpu must be a string"),
        ("max_staleness = 4", 'max_staleness = "one"', "constraints.max_staleness must be"),
        ('gpu = "h100-sxm"\n', "", "cluster.gpu is missing"),
    ],
)
def test_malformed_specs_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None, old: str, new: str, expected: str
) -> None:
    (tmp_path / "t.csv").write_text("num_decode_tokens\n100\n200\n")
    err = spec_error(tmp_path, capsys, variant(old, new))
    assert expected in err, err


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("s.yaml", "cluster: [unclosed\n", "not valid YAML"),
        ("s.yaml", "cluster:\n\tgpu: x\n", "not valid YAML"),
        (
            "s.yml",
            "cluster: {gpu: h100-sxm, n_gpus: 4}\nmodel: {name: qwen3-0.6b}\ncluster: {n_gpus: 8}\n",
            "given twice",
        ),
        ("s.yaml", "", "the file is empty"),
        ("s.yaml", "- 1\n- 2\n", "a table of tables"),
        ("s.toml", "[cluster\n", "not valid TOML"),
        ("s.json", '{"cluster": {}}', "TOML (.toml) or YAML"),
        ("s.toml", b"\x80\x81 = 1", "not UTF-8"),
    ],
)
def test_unreadable_specs_are_one_line_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_search: None,
    name: str,
    content: str | bytes,
    expected: str,
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    err = run_cli(path, capsys=capsys)
    assert expected in err and err.count(name) == 1, err  # the file named once: no doubled prefix


def test_missing_spec_and_a_directory_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None
) -> None:
    assert "cannot read" in run_cli(tmp_path / "nosuch.toml", capsys=capsys)
    (tmp_path / "d.toml").mkdir()
    assert "cannot read" in run_cli(tmp_path / "d.toml", capsys=capsys)


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SPEC.encode())
    assert plan.load(path).n_gpus == 4
    yaml_path = tmp_path / "bom.yaml"
    yaml_path.write_bytes(b"\xef\xbb\xbfcluster: {gpu: h100-sxm, n_gpus: 2}\nmodel: {name: qwen3-0.6b}\n")
    assert plan.load(yaml_path).n_gpus == 2


# -- 5. the seed ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["-1", str(10**23), str(2**32)])
def test_seed_out_of_range_is_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None, seed: str
) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    assert "--seed must be" in run_cli(tmp_path / "s.toml", "--seed", seed, capsys=capsys)


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True])
def test_seed_out_of_range_is_rejected_from_python(tmp_path: Path, seed: Any) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    spec = plan.load(tmp_path / "s.toml")
    with pytest.raises(plan.PlanError) as info:
        plan.search(spec, seed=seed)
    assert info.value.field == "seed"


@pytest.mark.parametrize(("option", "value"), [("--workers", "0"), ("--trials", "0")])
def test_other_options_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None, option: str, value: str
) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    assert f"{option} must be" in run_cli(tmp_path / "s.toml", option, value, capsys=capsys)


def test_more_workers_than_the_machine_can_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_search: None
) -> None:
    """Each worker is a process and the runs are CPU-bound: 1,000 on a few CPUs is refused before
    any process starts, naming --workers (the CLI) or workers (the API)."""
    from pipesim.io.cli_options import max_workers

    (tmp_path / "s.toml").write_text(SPEC)
    too_many = max_workers() + 1
    assert "--workers" in run_cli(tmp_path / "s.toml", "--workers", str(too_many), capsys=capsys)
    from pipesim.plan.search import plan as real_plan  # the fixture stands in for pipesim.plan.plan

    with pytest.raises(plan.PlanError) as info:
        real_plan(plan.load(tmp_path / "s.toml"), workers=too_many)
    assert info.value.field == "workers"


@pytest.mark.parametrize("seeds", [1, 3, 7])
def test_every_seed_a_plan_may_run_is_a_valid_simulation_seed(tmp_path: Path, seeds: int) -> None:
    """The largest ``search.sim_seed`` accepted leaves room for every seed a plan runs, the
    verification's extra seeds included (:data:`~pipesim.plan.checks.SEED_SPAN` x ``seeds``; it
    once allowed ``2**64 - seeds``, and a verification on twice the seeds then ran past the
    simulator's range); one more is refused, naming the key."""
    from pipesim.plan.build import scenario
    from pipesim.plan.checks import MAX_SIM_SEED, SEED_SPAN, PlanError
    from pipesim.plan.evaluate import Evaluator

    path = tmp_path / "s.toml"
    path.write_text(variant("seeds = 1", f"seeds = {seeds}"))
    spec = plan.load(path)
    top = MAX_SIM_SEED - SEED_SPAN * seeds
    design = plan.candidates(spec)[0]
    for s in Evaluator(spec.with_(sim_seed=top)).seeds(SEED_SPAN * seeds):
        scenario(spec, design, spec.steps, s)  # the run the plan would build: accepted
    with pytest.raises(PlanError, match="search.sim_seed"):
        spec.with_(sim_seed=top + 1)
