"""``pipesim plan``'s outputs that last (issue 43 items 5 and 7): Ctrl-C writes what is done with
``partial: true`` and exits 130, the on-disk run cache gives what a fresh run gives, counts are
integers, every output records version, spec hash and seeds, and the two errors name the cause."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.compute import GPUS, MODELS, AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.io.parquet import read_parquet
from pipesim.plan.cache import DiskCache, run_key, spec_hash

TINY = """
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
response = { median_tokens = 200, sigma = 0.6 }
max_response_tokens = 1024
[constraints]
mean_staleness = 1.5
max_staleness = 4
[space]
placement = [0, 2]
eta = [0, 1]
update = ["drain", "partial"]
oversample = [1.0]
[search]
method = "grid"
screen_steps = 2
steps = 4
seeds = 3
min_full = 4
"""


def tiny_spec(tmp_path: Path, text: str = TINY) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(text)
    return p


def _from(text: str, **changes: Any) -> plan.PlanSpec:
    import tomllib

    return plan.from_dict(tomllib.loads(text)).with_(**changes)


def test_ctrl_c_writes_what_is_done_with_partial_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupt after 5 runs (the evaluator raising KeyboardInterrupt, as Ctrl-C does in the
    parent): one line on stderr, exit 130, and the JSON and CSV hold the designs finished."""
    real = ev.run_design
    calls = {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)
    out_json, out_csv = tmp_path / "p.json", tmp_path / "p.csv"
    rc = plan.main(
        [str(tiny_spec(tmp_path)), "--json", str(out_json), "--csv", str(out_csv), "--quiet", "--no-cache"]
    )
    err = capsys.readouterr().err
    assert rc == 130
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err and "Traceback" not in err
    data = json.loads(out_json.read_text())
    assert data["partial"] is True
    assert len(data["screened"]) == 5 and data["full"] == []  # the 5 screening runs that finished
    df = pd.read_csv(out_csv, comment="#")
    assert len(df) == 5
    assert json.loads(out_csv.read_text().splitlines()[0][2:])["partial"] is True


def test_ctrl_c_before_any_run_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*a: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "load", boom)
    rc = plan.main([str(tiny_spec(tmp_path)), "--quiet", "--no-cache"])
    err = capsys.readouterr().err
    assert rc == 130 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("elapsed_s", "runs", "runs_reused")}


def test_disk_cache_gives_the_fresh_results_and_a_changed_constraint_reuses_it(tmp_path: Path) -> None:
    from pipesim.plan import report

    spec = _from(TINY)
    fresh = plan.plan(spec, with_sensitivity=False)
    cache = DiskCache(tmp_path / "cache")
    first = plan.plan(spec, with_sensitivity=False, cache=cache)
    again = plan.plan(spec, with_sensitivity=False, cache=DiskCache(tmp_path / "cache"))
    assert first.runs == fresh.runs > 0 and again.runs == 0  # every run came from the disk
    assert _strip(report.as_json(again)) == _strip(report.as_json(fresh)) == _strip(report.as_json(first))
    # a changed constraint reads the same runs: the constraints are not in the key
    looser = spec.with_(constraints=plan.Constraints(mean_staleness=3.0, max_staleness=8))
    assert run_key(looser, fresh.full[0].design, 4, 0) == run_key(spec, fresh.full[0].design, 4, 0)
    assert spec_hash(looser) != spec_hash(spec)
    reuse = plan.plan(looser, with_sensitivity=False, cache=DiskCache(tmp_path / "cache"))
    assert reuse.runs < first.runs / 2


def test_run_key_changes_with_what_a_run_reads() -> None:
    spec = _from(TINY)
    d = plan.candidates(spec)[0]
    key = run_key(spec, d, 4, 0)
    for other in (
        run_key(spec, d, 5, 0),
        run_key(spec, d, 4, 1),
        run_key(spec, plan.candidates(spec)[1], 4, 0),
        run_key(spec.with_(mfu=0.3), d, 4, 0),
        run_key(spec.with_(gpu=GPUS["a100-80gb"]), d, 4, 0),
        run_key(spec.with_(workload=TokenWorkload(response=LogNormalLengths(201.0, 0.6))), d, 4, 0),
    ):
        assert other != key


def test_run_key_changes_with_pipesims_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached run answers only the code that made it: the key holds the hash of every source
    file of the package, so editing one (between two commits of one version) misses the cache."""
    import shutil

    from pipesim.plan import cache

    spec = _from(TINY)
    d = plan.candidates(spec)[0]
    key = run_key(spec, d, 4, 0)
    assert run_key(spec, d, 4, 0) == key  # stable within a process
    copy = tmp_path / "pipesim"
    shutil.copytree(
        Path(cache.__file__).resolve().parents[1], copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    fake = copy / "plan" / "cache.py"
    monkeypatch.setattr(cache, "__file__", str(fake))
    cache.code_hash.cache_clear()
    try:
        assert run_key(spec, d, 4, 0) == key  # the same code elsewhere: the same key
        (copy / "compute" / "trainer.py").write_text(
            (copy / "compute" / "trainer.py").read_text() + "\n# edited\n"
        )
        cache.code_hash.cache_clear()
        assert run_key(spec, d, 4, 0) != key
    finally:
        cache.code_hash.cache_clear()


def test_outputs_record_version_spec_hash_seeds_and_integer_counts(tmp_path: Path) -> None:
    from pipesim.plan import frame, report

    spec = _from(TINY)
    result = plan.plan(spec, with_sensitivity=False)
    data = json.loads(json.dumps(report.as_json(result)))
    assert data["spec_hash"] == spec_hash(spec) and data["sim_seeds"] == [0, 1, 2]
    assert data["pipesim_version"] and data["partial"] is False
    assert f"spec {spec_hash(spec)}, simulation seeds [0, 1, 2]" in report.text(result)  # the HTML too
    for e in data["full"] + data["screened"]:
        assert isinstance(e["metrics"]["seeds"], int)
    for e in data["screened"]:  # one run: its counts are whole (the ledger's tokens may be fractional)
        assert isinstance(e["metrics"]["preemptions"], int)
    df = result.frame()
    assert df.equals(frame.frame(result))
    assert df.attrs["spec_hash"] == spec_hash(spec)
    assert str(df["seeds"].dtype) == "int64" and str(df["trainer_gpus"].dtype) == "int64"
    assert set(df["stage"]) == {"full", "screened"}
    assert df.loc[df["recommended"], "label"].tolist() == [result.best.design.label(spec.n_gpus)]  # type: ignore[union-attr]
    one = df["seeds"] == 1  # the screened designs: one seed has no interval (NaN), never lo = hi
    assert df.loc[one, ["throughput_ci", "throughput_lo", "throughput_hi"]].isna().all().all()
    many = df[~one]
    assert ((many["throughput_lo"] >= 0) & (many["throughput_lo"] <= many["throughput_per_hour"])).all()
    assert (many["throughput_per_hour"] <= many["throughput_hi"]).all()
    frame.write_parquet(result, str(tmp_path / "p.parquet"))
    back = read_parquet(tmp_path / "p.parquet")
    assert back["label"].tolist() == df["label"].tolist()
    frame.write_csv(result, str(tmp_path / "p.csv"))
    text = (tmp_path / "p.csv").read_text()
    assert ",21504.0," not in text and pd.read_csv(tmp_path / "p.csv", comment="#")["seeds"].dtype == "int64"
    assert pd.read_csv(tmp_path / "p.csv", comment="#")["failed"].dtype == bool  # a flag, not 0.0


WORK_AGENT = TokenWorkload(
    response=LogNormalLengths(400.0, 1.0),
    prompt=2048,
    samples_per_prompt=16,
    max_response_tokens=2048,
    agent=AgentTurns(turns=8, tool_latency_s=5.0, observation_tokens=800),
)


@pytest.mark.parametrize(
    ("changes", "names", "not_named"),
    [
        # a context overflow is the workload's, with a sum that adds up (2,048 + 8 x 2,048 + 7 x 800)
        (
            {"workload": WORK_AGENT, "max_model_len": 8192},
            ["model.max_model_len", "2,048 + 8 turns x max_response_tokens 2,048 + 7", "24,032"],
            "does not fit on",
        ),
        # TP 8 on the 4 GPUs min_trainer_gpus leaves: the replica width, not only the minimum
        (
            {"n_gpus": 12, "space": plan.Space(tp=(8,)), "constraints": plan.Constraints(min_trainer_gpus=8)},
            ["tp=8 needs 8 GPUs", "leaves at most 4 of the 12 GPUs", "do not tile 12 GPUs"],
            "placements leave no split",
        ),
    ],
)
def test_errors_name_the_real_cause(changes: dict[str, Any], names: list[str], not_named: str) -> None:
    spec = plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=64,
        model=MODELS["qwen3-8b"],
        workload=TokenWorkload(response=LogNormalLengths(400.0, 1.0), prompt=2048, samples_per_prompt=16),
        batch_size=512,
        space=plan.Space(tp=(1, 2)),
    ).with_(**changes)
    with pytest.raises(plan.PlanError) as info:
        plan.search(spec)
    msg = str(info.value)
    for name in names:
        assert name in msg
    assert not_named not in msg


def test_one_name_per_metric_counts_integers_and_old_names_readable(tmp_path: Path) -> None:
    """A run's summary lists verl's idle-ratio names only, counts are ints (JSON ``21504``, not
    ``21504.0``), and the old names still read, from the run and from a saved run loaded back."""
    import pipesim
    from pipesim.io import saved
    from pipesim.results.names import RENAMED, renamed

    r = pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=3), seed=1))
    s = r.summary()
    for old, new in RENAMED.items():
        assert old not in list(s) and new in list(s)
        assert s[old] == s[new] and s.get(old) == s[new] and old in s
    for k in ("episodes_launched", "episodes_trained", "episodes_buffered", "episodes_aborted"):
        assert type(s[k]) is int
    assert '"episodes_launched": ' + str(s["episodes_launched"]) + "," in json.dumps(s)
    back = saved.load(saved.save(r, tmp_path / "run")).summary()
    assert back["trainer_idle_ratio"] == s["trainer/idle_ratio"]
    # a summary written before the rename (the old names only) reads under the new ones
    before = {"trainer_idle_ratio": 0.25, "rollout_idle_ratio": 0.5}
    assert renamed(before) == {**before, "trainer/idle_ratio": 0.25, "rollouter/idle_ratio": 0.5}


def test_resume_continues_an_interrupted_plan_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = ev.run_design
    calls = {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return real(*a)

    spec, cache = str(tiny_spec(tmp_path)), str(tmp_path / "cache")
    monkeypatch.setattr(ev, "run_design", interrupted)
    assert plan.main([spec, "--quiet", "--no-sensitivity", "--cache-dir", cache]) == 130
    monkeypatch.setattr(ev, "run_design", real)
    capsys.readouterr()
    out = ["--json", str(tmp_path / "p.json")]
    assert plan.main([spec, "--quiet", "--no-sensitivity", "--cache-dir", cache, "--resume", *out]) == 0
    assert "5 runs reused" in capsys.readouterr().out
    fresh = plan.plan(_from(TINY), with_sensitivity=False)
    resumed = json.loads((tmp_path / "p.json").read_text())
    assert resumed["recommended"]["label"] == fresh.best.design.label(4)  # type: ignore[union-attr]
    assert resumed["runs"] == fresh.runs - 5 and resumed["partial"] is False


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    """``pipesim plan spec.toml | head -3``: the reader closes the pipe before the report is
    written; the command ends quietly with status 0 (it printed a BrokenPipeError traceback,
    since the planner's path skipped the CLI's handler)."""
    import subprocess
    import sys

    proc = subprocess.run(
        f'"{sys.executable}" -m pipesim plan "{tiny_spec(tmp_path)}" --quiet --no-cache | head -1',
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr[-800:]


def test_a_second_interrupt_while_saving_still_writes_what_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second SIGINT (Ctrl-C twice, or ``timeout``'s signal to the process and then its group)
    arrived while the first interrupt's partial result was being gathered, and the plan said
    "interrupted before any design was run; nothing written" after hundreds of runs. The saving
    now holds signals off: the JSON holds the finished designs, and the message counts them."""
    import importlib
    import os
    import signal

    search_mod = importlib.import_module("pipesim.plan.search")  # the module, not plan.search

    real_run, real_finished = ev.run_design, search_mod.finished
    calls = {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return real_run(*a)

    def finished_with_a_second_signal(*a: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, mid-save
        return real_finished(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)
    monkeypatch.setattr(search_mod, "finished", finished_with_a_second_signal)
    out = tmp_path / "p.json"
    args = [str(tiny_spec(tmp_path)), "--quiet", "--no-sensitivity", "--no-cache", "--json", str(out)]
    assert plan.main(args) == 130
    err = capsys.readouterr().err
    assert "5 runs done" in err and "written with partial: true" in err, err
    assert json.loads(out.read_text())["partial"] is True


def test_deferred_interrupts_ignore_a_second_signal_and_restore_the_handlers() -> None:
    import os
    import signal

    from pipesim.io.interrupts import deferred_interrupts

    done = []
    with deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_two_outputs_on_one_path_are_refused_before_the_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json same.out --csv same.out`` ran the search and left only the CSV."""
    same = str(tmp_path / "same.out")
    assert plan.main([str(tiny_spec(tmp_path)), "--no-cache", "--json", same, "--csv", same]) == 2
    assert "--json and --csv name the same path" in capsys.readouterr().err
    assert not (tmp_path / "same.out").exists()


def test_a_priced_cluster_shows_its_cost_per_million_tokens_in_the_text() -> None:
    """docs/plan.md: cost_per_gpu_hour adds a cost_per_mtok column; the JSON and CSV had it, the
    text table did not. The column is GPU-h/Mtok times the price, row by row."""
    from pipesim.plan import report

    result = plan.plan(_from(TINY, cost_per_gpu_hour=2.5), with_sensitivity=False)
    head = report.header(result)
    at = head.index("cost/Mtok")
    assert head[at - 1] == "GPU-h/Mtok"
    for cells in report.rows(result, result.feasible):
        assert len(cells) == len(head)
        assert float(cells[at]) == pytest.approx(2.5 * float(cells[at - 1]), abs=0.02)
    unpriced = plan.plan(_from(TINY), with_sensitivity=False)
    assert "cost/Mtok" not in report.header(unpriced)


def test_a_placement_of_every_gpu_and_a_seed_count_of_zero_say_what_is_wrong() -> None:
    """space.placement [4] on 4 GPUs was 'no split leaves a multiple of 1'; search.seeds = 0 gave
    the range [1, 268435456] where the limit is 100."""
    with pytest.raises(plan.PlanError) as info:
        plan.search(_from(TINY).with_(space=plan.Space(placement=(4,))))
    assert "trains on all 4 GPUs, leaving none for rollout" in str(info.value)
    with pytest.raises(plan.PlanError) as info:
        _from(TINY, seeds=0)
    assert info.value.field == "search.seeds" and "[1, 100]" in str(info.value)


def test_the_printed_code_wraps_a_long_argument_too_and_stays_the_same_program() -> None:
    """An argument that is itself a long call (``weight_update=SyncEveryK(k=2, inner=...),``)
    stayed one 120-character line; each long line now breaks at its own arguments, and the wrapped
    code parses to the same program."""
    import ast

    from pipesim.plan import load
    from pipesim.plan.code import scenario_code, wrap_code
    from pipesim.plan.space import Design

    spec = load(Path(__file__).resolve().parent.parent / "examples" / "plan_qwen3_8b.toml")
    for update in ("partial", "abort_reprefill", "inflight"):
        for sync_every in (1, 2):
            d = Design(trainer_gpus=0, tp=2, eta=0, update=update, sync_every=sync_every, oversample=1.25)
            raw = scenario_code(spec, d)
            wrapped = wrap_code(raw)
            assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(raw))
            assert max(len(line) for line in wrapped.splitlines()) <= 96
