"""Length trajectories as inputs, walkthrough fixes (lenfix): CSV errors that name the file, the
line and the column and stay short; unknown or repeated columns refused; a mean after the cap
(what training logs report) solved for the log-normal it stands for; drifts and means that leave
the token range refused naming the field; a binary file named; ``--json`` to a removed folder."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.compute.capped import capped_solution
from pipesim.compute.lengths import length_spec
from pipesim.compute.source import TokenSource
from pipesim.compute.trajectory import LengthPoint, LengthTrajectory
from pipesim.compute.workload import EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.core.readfile import read_text
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal


def PHI(x: float) -> float:  # noqa: N802 - the standard normal CDF, exact in the far tail (erfc)
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _csv(tmp_path: Path, text: str | bytes, name: str = "u.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


# -- CSV errors: the file, the line, bounded ---------------------------------------------------


@pytest.mark.parametrize("rows", [2, 400])
@pytest.mark.parametrize("bad", ["0", "same"])
def test_a_step_out_of_order_names_the_file_and_both_lines(tmp_path: Path, rows: int, bad: str) -> None:
    steps = list(range(1, rows + 1))
    last = 0 if bad == "0" else steps[-1]
    text = "step,mean_tokens\n" + "".join(f"{s},{1000 + s}\n" for s in steps) + f"{last},900\n"
    path = _csv(tmp_path, text)
    err = check_refusal(lambda: LengthTrajectory.from_csv(path), FieldError, "step")
    assert err.file == str(path)
    msg = str(err)
    assert f"line {rows + 2}" in msg and f"line {rows + 1}" in msg and str(path) in msg
    assert len(msg) < 300 + len(str(path))  # not every step of the file


def test_the_points_check_shows_one_pair_not_the_list() -> None:
    pts = tuple(LengthPoint(s, 100.0) for s in range(1000)) + (LengthPoint(3, 100.0),)
    err = check_refusal(lambda: LengthTrajectory(pts), FieldError, "points")
    assert "points[1000]" in str(err) and len(str(err)) < 200


def test_a_header_only_csv_names_the_file(tmp_path: Path) -> None:
    path = _csv(tmp_path, "step,mean_tokens\n")
    err = check_refusal(lambda: LengthTrajectory.from_csv(path), FieldError, "rows")
    assert err.file == str(path) and str(path) in str(err)


@pytest.mark.parametrize(
    "header,near",
    [
        ("step,mean_tokens,clip_ratio", "clip_share"),
        ("step,mean_tokens,p99", "p99_tokens"),
        ("step,mean_tokens,p99_token", "p99_tokens"),
        ("step,mean_tokens,notes", None),
    ],
)
def test_an_unknown_column_is_refused_naming_the_known_ones(
    tmp_path: Path, header: str, near: str | None
) -> None:
    path = _csv(tmp_path, f"{header}\n0,1200,0.1\n")
    err = check_refusal(lambda: LengthTrajectory.from_csv(path), FieldError, "column")
    assert err.file == str(path) and header.rsplit(",", 1)[1] in str(err)
    assert "clip_share" in str(err) and "p99_tokens" in str(err)  # the columns it knows
    if near:
        assert f"did you mean '{near}'" in str(err)


@pytest.mark.parametrize(
    "text",
    [
        "step,step,mean_tokens\n0,5,1200\n",
        "step,mean_tokens,mean_capped_tokens\n0,1,2\n",
        "step,mean_tokens\n0,1,2\n",
    ],
    ids=["duplicate", "both-means", "extra-cell"],
)
def test_repeated_columns_and_extra_cells_are_refused(tmp_path: Path, text: str) -> None:
    path = _csv(tmp_path, text)
    err = check_refusal(lambda: LengthTrajectory.from_csv(path), FieldError, "column")
    assert err.file == str(path)


def test_a_latin1_file_names_the_file_and_the_byte(tmp_path: Path) -> None:
    path = _csv(tmp_path, b"step,mean_tokens\n0,12\xe900\n")
    with pytest.raises(UnicodeDecodeError) as info:  # still the type callers catch
        read_text(path, "length trajectories", 1 << 20)
    assert str(path) in str(info.value) and "byte 21" in str(info.value)
    with pytest.raises(FieldError) as traj:
        LengthTrajectory.from_csv(path)
    assert traj.value.file == str(path) and "byte 21" in str(traj.value)
    trace = _csv(tmp_path, b"num_decode_tokens\n12\n\xff\xfe\n", "t.csv")
    with pytest.raises(ValueError, match="byte 21"):
        EmpiricalLengths.from_csv(trace)


def test_a_bom_does_not_shift_the_byte_offset(tmp_path: Path) -> None:
    path = _csv(tmp_path, b"\xef\xbb\xbfab\n\xe9")
    with pytest.raises(UnicodeDecodeError) as info:
        read_text(path, "x", 1 << 20)
    assert "byte 6 (line 2)" in str(info.value)


# -- the token range ---------------------------------------------------------------------------


def _wl7b(**kw: object) -> TokenWorkload:
    import dataclasses

    return dataclasses.replace(length_spec("math-reasoning-7b").workload(28 * 1024, 16, 256), **kw)


@pytest.mark.parametrize(("drift", "stop"), [(0.01, 100_000), (2.0, 50_000), (-0.5, 2_000), (-0.999, 40)])
def test_a_drift_leaving_the_token_range_names_the_drift_and_the_step(drift: float, stop: int) -> None:
    wl = _wl7b(drift_per_version=drift)
    err = check_refusal(lambda: wl.over_window(0, stop), FieldError, "drift_per_version")
    found = re.search(r"at step ([\d,]+);", str(err))
    assert found is not None, str(err)
    k = int(found.group(1).replace(",", ""))
    mean = wl.base_mean_tokens * (1 + drift) ** k
    before = wl.base_mean_tokens * (1 + drift) ** (k - 1)
    assert 0 < k <= stop
    assert (mean > 2**31 - 1 >= before) if drift > 0 else (mean < 1 <= before)


def test_a_drift_inside_the_range_still_windows() -> None:
    win = _wl7b(drift_per_version=0.01).over_window(0, 400)
    assert win.trajectory is not None and win.trajectory.points[0].mean_tokens > 1700


@pytest.mark.parametrize("mean", [1e308, 2.0**31, 0.5])
def test_a_point_mean_outside_the_token_range_is_refused(mean: float) -> None:
    check_refusal(lambda: LengthPoint(0, mean), FieldError, "mean_tokens")


def test_a_window_is_bounded() -> None:
    traj = LengthTrajectory((LengthPoint(0, 500.0), LengthPoint(10, 900.0)))
    check_refusal(lambda: traj.window_point(0, 10**9, 8192, 0.5), FieldError, "stop")


def test_the_cached_steps_give_the_same_points_and_are_fast(tmp_path: Path) -> None:
    n = 20_000
    path = _csv(tmp_path, "step,mean_tokens\n" + "".join(f"{s},{500 + s % 97}\n" for s in range(n)))
    wl = TokenWorkload(response=LogNormalLengths(500.0, 0.6), trajectory=LengthTrajectory.from_csv(path))
    res = wl.trajectory.resolved(wl.max_response_tokens, wl.base_sigma)  # type: ignore[union-attr]
    plain = tuple(res)  # no cached steps: the list is rebuilt
    for v in (0, 1.5, 9_999, 19_999, 25_000):
        assert LengthTrajectory.at(res, v) == LengthTrajectory.at(plain, v)
    t0 = time.perf_counter()
    win = wl.over_window(0, n)
    assert time.perf_counter() - t0 < 4.0  # 8.3 s before (the step list rebuilt per step)
    expect = sum(500 + s % 97 for s in range(n)) / n
    assert win.trajectory.points[0].mean_tokens == pytest.approx(expect, rel=1e-9)  # type: ignore[union-attr]


# -- a mean after the cap ------------------------------------------------------------------------


def _capped_mean(mean: float, s: float, cap: float) -> tuple[float, float]:
    """Closed form: ``E[min(X, cap)]`` and ``P(X > cap)`` of the log-normal of mean ``mean``."""
    mu = math.log(mean) - s * s / 2
    u = (math.log(cap) - mu) / s
    return mean * PHI(u - s) + cap * (1 - PHI(u)), 1 - PHI(u)


@settings(max_examples=60, deadline=None)
@given(frac=st.floats(0.02, 0.98), clip=st.floats(0.001, 0.45), cap=st.integers(512, 65_536))
def test_a_capped_mean_and_clip_share_solve_to_their_log_normal(frac: float, clip: float, cap: int) -> None:
    mc = clip * cap + frac * (cap - clip * cap)  # between the clipped share's own mass and the cap
    try:
        mean, s = capped_solution(mc, cap, None, clip)
    except FieldError as e:  # only at the extremes a spread of 30 cannot reach
        assert e.field == "mean_tokens" and frac < 0.05
        return
    got_mean, got_clip = _capped_mean(mean, s, cap)
    assert got_mean == pytest.approx(mc, rel=1e-7) and got_clip == pytest.approx(clip, rel=1e-7)
    assert mean >= mc  # the cap only lowers the mean


@settings(max_examples=40, deadline=None)
@given(frac=st.floats(0.01, 0.99), s=st.floats(0.05, 2.5))
def test_a_capped_mean_at_a_fixed_spread_solves_the_scale(frac: float, s: float) -> None:
    cap = 8192
    mean, got_s = capped_solution(frac * cap, cap, s, None)
    assert got_s == s and _capped_mean(mean, s, cap)[0] == pytest.approx(frac * cap, rel=1e-7)


def test_a_logged_capped_mean_is_drawn_as_logged() -> None:
    """verl logs mean 3,000 after an 8,192 cap with 10% clipped: read as a mean before the cap it
    is refused; as a capped point the draws have that mean and that clip share."""
    cap, n = 8192, 40_000
    base = {"response": LogNormalLengths(1000.0, 0.8), "max_response_tokens": cap, "difficulty_sigma": 0.5}
    check_refusal(
        lambda: TokenWorkload(**base, trajectory=LengthTrajectory((LengthPoint(0, 3000.0, clip_share=0.1),))),  # type: ignore[arg-type]
        FieldError,
        "clip_share",
    )
    point = LengthPoint(0, 3000.0, clip_share=0.1, capped=True)
    wl = TokenWorkload(**base, samples_per_prompt=1, trajectory=LengthTrajectory((point,)))  # type: ignore[arg-type]
    src = TokenSource(wl, np.random.default_rng(11))
    for i in range(n):
        src.work_s(i, i, 0, -1)
    resp = np.asarray(src.response, dtype=float)
    assert abs(resp.mean() - 3000.0) <= 4 * resp.std() / math.sqrt(n) + 1.0  # + rounding
    share = float(np.mean(src.truncated))
    assert abs(share - 0.1) <= 4 * math.sqrt(0.1 * 0.9 / n) + 1e-3


def test_a_capped_csv_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "step,mean_capped_tokens,clip_share\n0,1200,\n400,3000,0.1\n")
    traj = LengthTrajectory.from_csv(path)
    assert all(p.capped for p in traj.points)
    wl = TokenWorkload(response=LogNormalLengths(1000.0, 0.8), max_response_tokens=8192, trajectory=traj)
    mean, s = LengthTrajectory.at(wl.trajectory.resolved(8192, wl.base_sigma), 400)  # type: ignore[union-attr]
    assert _capped_mean(mean, s, 8192)[0] == pytest.approx(3000.0, rel=1e-6)


@pytest.mark.parametrize(
    "make,field",
    [
        (lambda: LengthPoint(0, 900.0, p99_tokens=5000.0, capped=True), "capped"),
        (lambda: LengthPoint(0, 900.0, capped=1), "capped"),
        (
            lambda: TokenWorkload(
                response=LogNormalLengths(500.0, 0.6), max_response_tokens=1024,
                trajectory=LengthTrajectory((LengthPoint(0, 2000.0, capped=True),)),
            ),
            "mean_tokens",
        ),  # a mean after the cap above the cap
        (
            lambda: TokenWorkload(
                response=LogNormalLengths(500.0, 0.6), max_response_tokens=8192,
                trajectory=LengthTrajectory((LengthPoint(0, 500.0, clip_share=0.2, capped=True),)),
            ),
            "mean_tokens",
        ),  # 20% at 8,192 alone is a mean of 1,638
        (
            lambda: TokenWorkload(
                response=EmpiricalLengths((100, 200, 300)), max_response_tokens=8192,
                trajectory=LengthTrajectory((LengthPoint(0, 500.0, capped=True),)),
            ),
            "capped",
        ),
    ],
)  # fmt: skip
def test_bad_capped_points_name_the_field(make: object, field: str) -> None:
    check_refusal(make, FieldError, field)  # type: ignore[arg-type]


# -- --json to a folder removed during the run ---------------------------------------------------


def test_json_to_a_removed_folder_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    import scenarios.published.april as april
    from scenarios.published.table import main

    out = tmp_path / "gone"
    out.mkdir()

    def rows() -> list[dict]:
        out.rmdir()  # removed while the runs go
        return [{"a": 1}]

    monkeypatch.setattr(april, "offpolicy_sensitivity", rows)
    monkeypatch.setattr(april, "offpolicy_report", lambda r: "the table")
    with pytest.raises(SystemExit) as info:
        main(["--april-offpolicy", "--json", str(out / "a.json")])
    assert info.value.code not in (0, None)
    assert str(out / "a.json") in str(info.value.code) and "\n" not in str(info.value.code)
    assert "the table" in capsys.readouterr().out
