"""Sweeps: grid validation, same numbers on every executor, failures reported, intervals correct."""

from __future__ import annotations

import functools
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipesim import InFlightUpdate
from pipesim.config import Scenario
from pipesim.core.validate import FieldError
from pipesim.io.api import run
from pipesim.io.registry import get_scenario
from pipesim.io.sweeps import SweepError, SweepResult, grid, run_summary, sweep, t975
from pipesim.policies.base import Drain, PartialRollout, UnreadStaleness
from tests.test_refusals_core import check_refusal

ROOT = Path(__file__).resolve().parents[1]

METRICS = ["throughput_per_hour", "staleness_mean", "staleness_max", "gen_util"]


def small() -> Scenario:
    return get_scenario("synchronous").with_(pool_size=None, n_slots=8, batch_size=8, steps=3)


def die_on_eta2(scenario: Scenario) -> dict[str, float]:
    """Kills its worker process for eta=2 (a crash, not an exception)."""
    if scenario.pipeline.max_staleness == 2:
        os._exit(3)
    return run_summary(scenario)


def sleep_on_eta1(scenario: Scenario) -> dict[str, float]:
    """Hangs for eta=1 (a cell that never finishes on its own)."""
    if scenario.pipeline.max_staleness == 1:
        time.sleep(60)
    return run_summary(scenario)


def deaf_on_eta1(scenario: Scenario) -> dict[str, float]:
    """Hangs for eta=1 with SIGALRM blocked, so only killing its worker stops it."""
    if scenario.pipeline.max_staleness == 1:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    return run_summary(scenario)


def _roll() -> Scenario:
    from scenarios.systems import PRESETS

    return PRESETS["roll"](n_slots=8, batch_size=8, steps=2)


def _threads(**kw: Any) -> object:
    return sweep(small(), executor=ThreadPoolExecutor(1), progress=False, **kw)


BAD: list[tuple[str, Callable[[], object], type[BaseException], str]] = [  # id, call, type, field
    ("key-typo", lambda: grid(small(), over={"max_stalenes": [1]}), FieldError, "max_stalenes"),
    ("values-empty", lambda: grid(small(), over={"max_staleness": []}), FieldError, "over.max_staleness"),
    ("values-text", lambda: grid(small(), over={"max_staleness": "01"}), FieldError, "over.max_staleness"),
    ("seeds-zero", lambda: grid(small(), seeds=0), FieldError, "seeds"),
    ("seeds-empty", lambda: grid(small(), seeds=[]), FieldError, "seeds"),
    # each cell holds a Scenario: 10^8 seeds filled memory before a cell ran
    ("seeds-too-many", lambda: grid(small(), seeds=10**8), FieldError, "seeds"),
    (
        "values-too-many",
        lambda: grid(small(), over={"n_slots": range(1, 400), "steps": range(1, 400)}),
        FieldError,
        "over",
    ),
    # a seed axis said "with_() got multiple values for 'seed'"
    ("seed-in-over", lambda: grid(small(), over={"seed": [1, 2]}), FieldError, "over.seed"),
    ("no-scenarios", lambda: grid({}), FieldError, "scenarios"),
    ("executor-text", lambda: sweep(small(), seeds=1, executor="x"), FieldError, "executor"),  # type: ignore[arg-type]
    ("workers-negative", lambda: sweep(small(), seeds=1, workers=-1), FieldError, "workers"),
    ("workers-too-many", lambda: sweep(small(), seeds=1, workers=10**6), FieldError, "workers"),  # processes
    ("workers-fraction", lambda: sweep(small(), seeds=1, workers=2.5), FieldError, "workers"),  # type: ignore[arg-type]
    # a value twice in one axis: the field indexes the repeat
    ("twice", lambda: grid(small(), over={"max_staleness": [1, 1]}), FieldError, "over.max_staleness[1]"),
    (
        "twice-int-and-float",
        lambda: grid(small(), over={"max_staleness": [1, 2, 1.0]}),
        FieldError,
        "over.max_staleness[2]",
    ),
    (
        "twice-policy",
        lambda: grid(small(), over={"weight_update": [InFlightUpdate(0.5), Drain(), InFlightUpdate(0.5)]}),
        FieldError,
        "over.weight_update[2]",
    ),
    ("seeds-twice", lambda: grid(small(), seeds=[3, 4, 3]), FieldError, "seeds[2]"),
    # ROLL never reads max_staleness: every row was the same run labelled 0, 1, 3
    (
        "roll-max_staleness-sweep",
        lambda: sweep(
            _roll(), over={"max_staleness": [0, 1, 3]}, executor=ThreadPoolExecutor(1), timeout_s=None
        ),
        UnreadStaleness,
        "pipeline.max_staleness",
    ),
    (
        "roll-max_staleness-grid",
        lambda: grid({"a": small(), "roll": _roll()}, over={"max_staleness": [0, 1]}),
        UnreadStaleness,
        "pipeline.max_staleness",
    ),
    *[
        (f"timeout_s-{bad!r}", functools.partial(_threads, timeout_s=bad), FieldError, "timeout_s")
        for bad in (0, -1.0, math.inf, 1e10, True, "5")  # 1e10 s overflowed the deadline's time_t
    ],
]


@pytest.mark.parametrize(("call", "kind", "field"), [r[1:] for r in BAD], ids=[r[0] for r in BAD])
def test_a_sweep_names_the_argument_it_refuses(
    call: Callable[[], object], kind: type[BaseException], field: str
) -> None:
    """Refused before any cell is submitted; the row asserts the type and the field, not the sentence."""
    check_refusal(call, kind, field)


def test_grid_expands_seeds() -> None:
    cells = grid(
        small().with_(seed=5),
        over={"max_staleness": [0, 1], "weight_update": [PartialRollout(), Drain()]},
        seeds=2,
    )
    assert len(cells) == 8
    assert sorted({c.scenario.seed for c in cells}) == [5, 6]
    assert {c.labels["weight_update"] for c in cells} == {"PartialRollout()", "Drain()"}
    assert all(c.scenario.pipeline.max_staleness == c.labels["max_staleness"] for c in cells)


def test_same_numbers_on_threads_and_dask_and_failures_kept() -> None:
    distributed = pytest.importorskip("distributed")
    over = {"max_staleness": [0, 1], "pool_size": [None, 1]}  # pool_size=1 is too small: a failing cell
    a = sweep(small(), over, seeds=2, executor=ThreadPoolExecutor(2), timeout_s=None, progress=False)
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
    ) as client:
        b = sweep(small(), over, seeds=2, executor=client.get_executor(), timeout_s=None, progress=False)
    assert a.runs.equals(b.runs)
    ok, failed = a.runs[a.runs["status"] == "ok"], a.failures
    assert len(ok) == 4 and len(failed) == 4
    assert failed["pool_size"].isna().sum() == 0 and (failed["pool_size"] == 1).all()
    assert failed["error"].str.len().gt(0).all()
    assert (ok["throughput_per_hour"] > 0).all()
    # eta=1 is faster than synchronous on every seed
    piv = ok.pivot(index="seed", columns="max_staleness", values="throughput_per_hour")
    assert (piv[1] > piv[0]).all()


def test_process_pool_matches_threads_and_survives_a_dead_worker() -> None:
    over = {"max_staleness": [0, 1, 2, 3]}
    res = sweep(small(), over, seeds=1, workers=2, fn=die_on_eta2, progress=False)
    assert list(res.runs["status"]) == ["ok", "ok", "failed", "ok"]
    assert "died" in res.runs.loc[2, "error"]
    ref = sweep(small(), over, seeds=1, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
    ok = res.runs["status"] == "ok"
    assert res.runs.loc[ok, METRICS].equals(ref.runs.loc[ok, METRICS])


def test_aggregate_mean_and_95_interval_over_seeds() -> None:
    res = sweep(
        small(),
        {"max_staleness": [0, 1]},
        seeds=3,
        executor=ThreadPoolExecutor(1),
        timeout_s=None,
        progress=False,
    )
    assert isinstance(res, SweepResult) and res.keys == ("design", "max_staleness")
    agg = res.aggregate
    assert list(agg["n_seeds"]) == [3, 3]
    for eta, row in agg.set_index("max_staleness").iterrows():
        vals = res.runs.loc[res.runs["max_staleness"] == eta, "throughput_per_hour"]
        half = t975(3) * vals.std(ddof=1) / math.sqrt(3)
        assert row["throughput_per_hour_mean"] == pytest.approx(vals.mean())
        assert row["throughput_per_hour_hi"] - row["throughput_per_hour_mean"] == pytest.approx(half)
        assert row["throughput_per_hour_lo"] < row["throughput_per_hour_mean"] < row["throughput_per_hour_hi"]


def test_t_quantiles() -> None:
    assert math.isnan(t975(1))
    assert t975(2) == pytest.approx(12.7062047) and t975(1000) == pytest.approx(1.9623, abs=1e-3)  # t(999)


def test_sweep_designs_mapping_labels_rows() -> None:
    designs = {"sync": small(), "async": small().with_(max_staleness=2)}
    res = sweep(designs, seeds=1, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
    assert list(res.runs["design"]) == ["sync", "async"]
    assert res.runs.loc[1, "throughput_per_hour"] > res.runs.loc[0, "throughput_per_hour"]
    assert "length_bias" in res.runs


def test_policy_arguments_label_cells_apart() -> None:
    """Item 7 of issue 16: two InFlightUpdate loads are two rows, not one row of 4 seeds."""
    over = {"weight_update": [InFlightUpdate(0.5), InFlightUpdate(30.0)]}
    res = sweep(small(), over, seeds=2, executor=ThreadPoolExecutor(2), timeout_s=None, progress=False)
    agg = res.aggregate.set_index("weight_update")
    assert list(agg.index) == ["InFlightUpdate(load_time_s=0.5)", "InFlightUpdate(load_time_s=30.0)"]
    assert list(agg["n_seeds"]) == [2, 2]
    # the long load really is slower: the rows hold different designs
    assert agg["throughput_per_hour_mean"].iloc[0] > agg["throughput_per_hour_mean"].iloc[1]


def test_length_bias_is_the_summary_ratio() -> None:
    """One meaning: the sweep's length_bias is summary()["length_bias"] (trained / launched)."""
    base = small().with_(max_staleness=2)
    res = sweep(base, seeds=[0, 1], executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
    want = sum(run(base.with_(seed=s)).summary()["length_bias"] for s in (0, 1)) / 2
    row = res.aggregate.iloc[0]
    assert row["length_bias_mean"] == pytest.approx(want, rel=1e-12)
    assert row["length_bias_excess_mean"] == pytest.approx(want - 1, rel=1e-9)
    assert 0.5 < want < 1.5


# A limit of 1 s (it was 2): the alarm starts with the cell in its worker, and the other cells take
# about 0.02 s there
def test_timeout_fails_the_slow_cell_only() -> None:
    t0 = time.monotonic()
    res = sweep(
        small(), {"max_staleness": [0, 1, 2]}, workers=1, fn=sleep_on_eta1, timeout_s=1, progress=False
    )
    assert time.monotonic() - t0 < 40
    assert list(res.runs["status"]) == ["ok", "failed", "ok"]
    assert "timed out" in res.runs.loc[1, "error"] and "timeout_s=1" in res.runs.loc[1, "error"]


def test_timeout_kills_a_worker_that_does_not_stop() -> None:
    t0 = time.monotonic()
    res = sweep(
        small(), {"max_staleness": [0, 1, 2]}, workers=2, fn=deaf_on_eta1, timeout_s=1, progress=False
    )
    assert time.monotonic() - t0 < 40
    assert list(res.runs["status"]) == ["ok", "failed", "ok"]
    assert "timed out" in res.runs.loc[1, "error"] and "killed" in res.runs.loc[1, "error"]
    ref = sweep(
        small(), {"max_staleness": [0, 1, 2]}, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False
    )
    assert res.runs.loc[[0, 2], METRICS].equals(ref.runs.loc[[0, 2], METRICS])


def test_every_cell_failing_raises_and_lists_the_failures() -> None:
    over = {"max_staleness": [0, 1]}  # pool_size=1 is too small in every cell
    with pytest.raises(SweepError) as info:
        sweep(
            small().with_(pool_size=1), over, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False
        )
    msg = str(info.value)
    assert "max_staleness=0" in msg and "max_staleness=1" in msg and "pool" in msg
    res = info.value.result
    assert res is not None and len(res.failures) == len(res.runs) == 2  # every cell: 2 of 2
    assert len(res.aggregate) == 0 and "n_seeds" in res.aggregate.columns


def test_a_script_read_from_stdin_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    """``python - < script.py``: workers cannot re-import "<stdin>", so every cell used to fail as
    'worker process died'; now one error says so, and a thread pool still runs it (the same
    process goes on to the thread pool once the process pool is refused)."""
    code = textwrap.dedent(
        """
        from concurrent.futures import ThreadPoolExecutor
        from pipesim.io.registry import get_scenario
        from pipesim.io.sweeps import SweepError, sweep

        if __name__ == "__main__":
            sc = get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)
            try:
                res = sweep(sc, {"max_staleness": [0, 1]}, workers=1, progress=False)
                print("process pool:", res.runs["status"].tolist(), res.runs["error"].tolist())
            except SweepError as exc:
                print(f"process pool: SweepError: {exc}", flush=True)
            over = {"max_staleness": [0, 1]}
            res = sweep(sc, over, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
            print("threads:", res.runs["status"].tolist())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-"], input=code, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    out = proc.stdout + proc.stderr
    pool = [ln for ln in proc.stdout.splitlines() if ln.startswith("process pool:")]
    assert len(pool) == 1 and "died" not in out, out[-3000:]
    said = "process pool: SweepError: pipesim.sweep was started from a main script read from <stdin>"
    assert pool[0].startswith(said), out[-3000:]
    assert proc.returncode == 0 and "threads: ['ok', 'ok']" in proc.stdout, out[-3000:]


UNGUARDED = textwrap.dedent(
    """
    from pipesim.io.registry import get_scenario
    from pipesim.io.sweeps import sweep

    sc = get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)
    res = sweep(sc, {"max_staleness": [0, 1]}, workers=1, progress=False)
    print(res.runs[["max_staleness", "status", "error"]].to_string())
    """
)


def test_unguarded_script_says_so_in_one_line(tmp_path: Path) -> None:
    """A script without the __main__ guard: one clear error, not a 'worker process died' row per cell."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "died" not in out and "bootstrapping" not in out, out[-3000:]  # no worker ever started
    lines = [ln for ln in out.splitlines() if '`if __name__ == "__main__":`' in ln]
    assert len(lines) == 1 and lines[0].startswith("pipesim.io.sweeps.SweepError: "), out[-3000:]
    assert f"{script}:6" in lines[0]


# The guard check passes a guarded main script's sweep on a process pool by default in
# tests/test_sweep_interrupts.py::test_pipesim_sweep_stopped_keeps_the_finished_cells_and_exits_130
# and tests/test_double_interrupt.py (their scripts start a --workers 1 sweep from under the guard;
# a refusal there fails them). This run of the same script as above, guarded, is run by make test-full.
@pytest.mark.full
def test_the_unguarded_script_with_the_guard_runs(tmp_path: Path) -> None:
    guarded = tmp_path / "guarded.py"
    body = UNGUARDED.strip().splitlines()
    guarded.write_text(
        "\n".join(body[:2] + ['if __name__ == "__main__":'] + ["    " + ln for ln in body[2:]]) + "\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(guarded)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(" ok") == 2, proc.stdout + proc.stderr[-2000:]


def test_intervals_of_a_metric_that_cannot_be_negative_stop_at_zero() -> None:
    """Two seeds of staleness_max, 0 and 3: the t interval reaches -17.6, which no mean of
    staleness can be; a metric the cell function does not vouch for keeps its raw interval."""
    runs = pd.DataFrame(
        {
            "eta": [1, 1],
            "seed": [0, 1],
            "status": ["ok", "ok"],
            "error": ["", ""],
            "staleness_max": [0.0, 3.0],
            "length_bias_excess": [-0.1, 0.2],
            "mine": [0.0, 3.0],
        }
    )
    metrics = ("staleness_max", "length_bias_excess", "mine")
    res = SweepResult(runs=runs, keys=("eta",), metrics=metrics, nonnegative=("staleness_max",))
    row = res.aggregate.iloc[0]
    raw_lo = 1.5 - t975(2) * math.sqrt(4.5) / math.sqrt(2)
    assert row["staleness_max_lo"] == 0.0 and row["staleness_max_hi"] == pytest.approx(3.0 - raw_lo)
    assert raw_lo < 0 and row["mine_lo"] == pytest.approx(raw_lo)
    assert row["length_bias_excess_lo"] < -0.1


def test_the_default_cell_function_vouches_for_all_but_its_signed_metric() -> None:
    sc = get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)
    res = sweep(
        sc, {"max_staleness": [0, 1]}, seeds=2, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False
    )
    assert "staleness_max" in res.nonnegative and "throughput_per_hour" in res.nonnegative
    assert "length_bias_excess" in res.metrics and "length_bias_excess" not in res.nonnegative
    assert (res.aggregate[[f"{m}_lo" for m in res.nonnegative]] >= 0).all().all()
    mine = sweep(
        sc,
        {"max_staleness": [0]},
        fn=_signed_metric,
        executor=ThreadPoolExecutor(1),
        timeout_s=None,
        progress=False,
    )
    assert mine.nonnegative == ()


def _signed_metric(scenario: Scenario) -> dict[str, float]:
    return {"x": -1.0 if scenario.seed % 2 else 1.0}


def test_a_sweep_over_max_staleness_of_a_preset_that_reads_it_sets_its_bound() -> None:
    """AReaL's throttle reads the pipeline's eta (its max_head_offpolicyness), so rows differ;
    a batch policy that reads eta makes it a real axis beside a rule with its own bound."""
    from pipesim.policies.batching import DropStale
    from scenarios.systems import PRESETS

    areal = PRESETS["areal"](n_slots=8, batch_size=8, steps=3)
    res = sweep(
        areal, over={"max_staleness": [0, 2]}, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False
    )
    assert res.runs["staleness_max"].tolist() == [0.0, 2.0]
    lag = PRESETS["pipelinerl"](n_slots=8, batch_size=8, steps=2).with_(batching=DropStale())
    assert [c.scenario.pipeline.max_staleness for c in grid(lag, over={"max_staleness": [0, 1]})] == [0, 1]


def test_pipesim_sweep_over_max_staleness_of_such_a_preset_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pipesim.io.cli import main

    assert main(["sweep", "systems:pipelinerl", "--over", "max_staleness=0,1", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "max_staleness is not a knob of PipelineRLLag" in err and "max_lag" in err, err


def test_a_cell_whose_pool_is_too_small_fails_before_it_simulates() -> None:
    """A set pool below steps x batch_size: the default cell function refuses the cell naming
    ``pool_size`` (a FieldError row, before any simulation) where the cell ran until the pool was
    spent (PipelineError "durations pool exhausted"); the other cells run as before."""
    sc = small().with_(pool_size=30)  # 3 steps x 8 = 24 tasks: enough for steps 3, not for steps 4
    res = sweep(sc, {"steps": [3, 4]}, executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
    ok = res.runs[res.runs["status"] == "ok"]
    assert list(ok["steps"]) == [3] and list(res.failures["steps"]) == [4]
    error = res.failures["error"].iloc[0]
    assert error.startswith("FieldError") and "pool_size" in error and "exhausted" not in error
