"""A calibrate walkthrough (docs/calibrate.md): a log cut at the front is compared with its own
steps, the "starts at step 1" note judges the log before the cut, the held-out warning blames an
outlier only where leaving it out closes the miss, verl's file logger's nested JSON lines are read,
and a broken JSON line is named by its line (a last line cut mid-write is left out, with a note)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import Calibration, LogError, calibrate, read_log
from pipesim.calibrate.sample import sample_log
from pipesim.plan.runspec import RunSpec, from_dict, load, read
from tests.test_calnoise_overhead_interval import _true_values

SPEC = Path(__file__).resolve().parents[1] / "examples" / "run_verl_8gpu.toml"
TRUE = _true_values()  # examples/make_verl_sample_log.py's constants, read from the script
SPLIT = {"placement": 4, "eta": 1, "update": "partial", "sync_every": 2}
"""A fully-async 4:4 design: its first steps fill the pipeline (step 0's ``gen`` is 2.4x the rest)."""


def _split(seed: int, calibrated: bool) -> RunSpec:
    data = copy.deepcopy(read(SPEC))
    data["design"].update(SPLIT)
    data["run"] = {"steps": 30, "seed": seed, "sync_time_s": 3.0}
    if calibrated:
        data["calibration"] = {"values": dict(TRUE)}
    return from_dict(data)


@functools.cache
def _noiseless_log(seed: int, where: str) -> Path:
    p = Path(where) / f"split_{seed}.csv"
    sample_log(_split(seed, True), np.random.default_rng(11), noise=0.0).round(6).to_csv(p, index=False)
    return p


@functools.cache
def _overhead(seed: int, cut: str | None, where: str) -> float:
    """The fitted decode overhead, at the log's own run seed: the simulations replay its draws, so
    what is left is the fit's own error."""
    cal = calibrate(read_log(_noiseless_log(seed, where), steps=cut), _split(seed, False), seed=seed)
    return cal.values["iteration_overhead_s"].value


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("window"))


# 1. a front cut is compared with its own steps


@pytest.mark.parametrize(
    ("seed", "cut"),
    # one cut in the default run; another cut and another seed under make test-full
    [(1, "6:"), pytest.param(2, "1:", marks=pytest.mark.full), pytest.param(3, "6:", marks=pytest.mark.full)],
)
def test_a_front_cut_recovers_the_overhead_as_well_as_no_cut(seed: int, cut: str, where: str) -> None:
    """On a noiseless async log of a 4 ms overhead, ``--steps A:`` recovers it as closely as the
    whole log, within 5% of the truth (0.2 ms): the cut log refits the lengths on fewer steps,
    which moved the overhead by at most 4% on seeds 1-3 with cuts 1: and 6:. Before, the cut log
    was compared with the simulated steps from 0 (the pipeline fill it cut off averaged in) and
    read 3.35-3.50 ms, 12-16% short."""
    true = TRUE["iteration_overhead_s"]
    whole, cut_ = _overhead(seed, None, where), _overhead(seed, cut, where)
    assert abs(cut_ - true) <= abs(whole - true) + 0.05 * true, (whole, cut_)


# 2. "the log starts at step 1" judges the log before the cut


def _steps_log(tmp_path: Path, first: int, n: int = 12) -> Path:
    steps = np.arange(first, first + n)
    gen = np.full(n, 40.0) + 0.1 * np.arange(n)
    p = tmp_path / f"from{first}.csv"
    pd.DataFrame({"step": steps, "timing_s/gen": gen}).to_csv(p, index=False)
    return p


@pytest.mark.parametrize(
    ("first", "cut", "first_step", "noted"),
    [
        (0, "1:", 0, False),  # numbered from 0, step 0 cut: not "as verl numbers them"
        (0, "5:", 0, False),
        (1, "2:", 0, True),  # numbered from 1, step 1 cut: still verl's numbering
        (1, None, 0, True),
        (0, None, 0, False),
    ],
)
def test_the_step_1_note_reads_the_log_before_the_cut(
    tmp_path: Path, first: int, cut: str | None, first_step: int, noted: bool
) -> None:
    log = read_log(_steps_log(tmp_path, first), steps=cut, first_step=first_step)
    assert any("starts at step 1" in n for n in log.notes) is noted


def test_first_step_after_the_logs_first_step_is_refused_whatever_the_cut(tmp_path: Path) -> None:
    """A log numbered from 0 has no run step before its step 0: --first-step 1 is refused even
    when --steps cut step 0 off (before, the cut log's first step 2 let it through)."""
    with pytest.raises(LogError) as e:
        read_log(_steps_log(tmp_path, 0), steps="2:", first_step=1)
    assert e.value.field == "first_step"


# 3. an outlier is blamed for a miss only where leaving it out closes it


def _guarded(tmp_path: Path, outliers: dict[int, float]) -> Path:
    n = 24
    step = 20.0 + 0.2 * np.sin(np.arange(n))
    gen = 4.0 + 0.1 * np.cos(np.arange(n))
    for s, x in outliers.items():
        step[s] *= x
    p = tmp_path / "guarded.csv"
    pd.DataFrame({"step": np.arange(n), "timing_s/gen": gen, "timing_s/step": step}).to_csv(p, index=False)
    return p


def _predicted_as_fitted(log_path: Path, held: list[int]) -> float:
    """The held-out relative error of a prediction equal to the fitted steps' mean step."""
    df = pd.read_csv(log_path)
    fitted = df.loc[~df["step"].isin(held), "timing_s/step"].mean()
    seen = df.loc[df["step"].isin(held), "timing_s/step"].mean()
    return float((seen - fitted) / seen)


@pytest.mark.parametrize(
    ("outliers", "miss", "blamed"),
    [
        ({0: 1.0}, -1.3, False),  # no step outlier; gen's step 0 below: a spec mismatch
        ({20: 10.0}, None, True),  # a 10x step held out: it is the miss
        ({3: 4.0, 7: 4.0, 11: 4.0, 15: 4.0}, None, True),  # 4x steps fitted: they raise the prediction
        ({3: 4.0}, -1.3, False),  # one 4x fitted step cannot make a 130% miss
    ],
)
def test_the_held_out_warning_blames_only_outliers_that_explain_the_miss(
    tmp_path: Path, outliers: dict[int, float], miss: float | None, blamed: bool
) -> None:
    p = _guarded(tmp_path, outliers)
    if outliers == {0: 1.0}:  # the walkthrough's async fill: a gen outlier at step 0
        df = pd.read_csv(p)
        df.loc[0, "timing_s/gen"] *= 2.5
        df.to_csv(p, index=False)
    held = list(range(18, 24))
    r = _predicted_as_fitted(p, held) if miss is None else miss
    log = read_log(p)
    cal = Calibration({}, [], {"timing_s/step": {"mean": r}}, log, held)
    [warning] = cal.misses
    assert ("likely cause" in warning) is blamed, warning
    assert ("is the log from a run of this spec" in warning) is not blamed, warning


def test_a_fully_async_log_against_a_colocated_spec_is_a_spec_mismatch(tmp_path: Path) -> None:
    """The walkthrough's case: step 0's pipeline fill is flagged, but the 133% step miss is the
    spec's (colocated, synchronous), and the warning says so."""
    p = tmp_path / "fa.csv"
    sample_log(_split(0, True), np.random.default_rng(11)).round(6).head(26).to_csv(p, index=False)
    cal = calibrate(read_log(p), load(SPEC))
    step = [w for w in cal.misses if w.startswith("held-out timing_s/step:")]
    assert step and all("is the log from a run of this spec" in w and "likely" not in w for w in step)


# 4. and 5. JSON lines: verl's file logger, and a broken line named by its line


def _records(n: int = 8) -> list[dict[str, float]]:
    return [
        {"timing_s/gen": 40.0 + i, "timing_s/step": 50.0 + i, "response_length/mean": 900.0 + i}
        for i in range(n)
    ]


def _write(tmp_path: Path, lines: list[str], end: str = "\n") -> Path:
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(lines) + end)
    return p


def _flat(i: int, r: dict[str, float]) -> str:
    return json.dumps({"step": i, **r})


def _nested(i: int, r: dict[str, float]) -> str:
    return json.dumps({"step": i, "data": r})  # verl's FileLogger.log (verl/utils/tracking.py)


@pytest.mark.parametrize("line", [_flat, _nested])
def test_verl_file_logger_records_are_read_as_their_data(tmp_path: Path, line: object) -> None:
    lines = [line(i, r) for i, r in enumerate(_records())]  # type: ignore[operator]
    log = read_log(_write(tmp_path, lines))
    assert len(log) == 8 and log.has("timing_s/gen") and log.has("response_length/mean")
    assert list(log.col("timing_s/step")) == [50.0 + i for i in range(8)]


BROKEN = [
    # (what, the lines' text, the line named or None where read, field)
    ("a bad line inside", lambda ls: [*ls[:3], "{not json", *ls[3:]], "line 4"),
    ("a list line", lambda ls: [*ls[:2], "[1, 2]", *ls[2:]], "line 3"),
    ("a cut line inside", lambda ls: [*ls[:5], ls[5][:30], *ls[6:]], "line 6"),
    ("a bad last line ended", lambda ls: [*ls, "{not json"], "line 9"),
    (
        "a key twice in data and record",
        lambda ls: [*ls, '{"step": 8, "timing_s/gen": 1, "data": {"timing_s/gen": 2}}'],
        "line 9",
    ),
]


@pytest.mark.parametrize(("what", "edit", "named"), BROKEN, ids=[b[0] for b in BROKEN])
@pytest.mark.parametrize("line", [_flat, _nested])
def test_a_broken_json_line_is_named_by_its_line(
    tmp_path: Path, what: str, edit: object, named: str, line: object
) -> None:
    lines = edit([line(i, r) for i, r in enumerate(_records())])  # type: ignore[operator]
    if what.startswith("a key twice") and line is _flat:
        pytest.skip("a flat log has no data object")
    with pytest.raises(LogError) as e:
        read_log(_write(tmp_path, lines))
    assert named in str(e.value) and "position" not in str(e.value)


@pytest.mark.parametrize("line", [_flat, _nested])
def test_a_last_line_cut_mid_write_is_left_out_with_a_note(tmp_path: Path, line: object) -> None:
    """A killed run's log (verl's file logger writes each line unbuffered): its complete steps
    are read and a note says the partial last line was left out. Before: "Unmatched ''"' when
    when decoding 'string' at position 5416"."""
    lines = [line(i, r) for i, r in enumerate(_records())]  # type: ignore[operator]
    lines[-1] = lines[-1][:40]
    log = read_log(_write(tmp_path, lines, end=""))
    assert len(log) == 7 and any("cut mid-write" in n and "line (8)" in n for n in log.notes)


def test_a_byte_order_mark_before_the_first_json_line_is_read(tmp_path: Path) -> None:
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + "\n".join(_flat(i, r) for i, r in enumerate(_records())).encode())
    assert len(read_log(p)) == 8
