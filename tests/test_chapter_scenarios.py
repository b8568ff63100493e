"""scenarios.chapter13 reproduces the chapter's tables where the chapter gives numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scenarios import chapter13

EXPECTED = Path("/work/shared/reference/chapter13_expected.json")
if not EXPECTED.exists():  # the repository's copy, if the lead vendors it
    EXPECTED = Path(__file__).parent / "data" / "chapter13_expected.json"


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    if not EXPECTED.exists():
        pytest.skip("chapter13_expected.json not available")
    return json.loads(EXPECTED.read_text())


def test_weight_sync_table() -> None:
    rows = {name: [round(t, 2) for t in times] for name, _, times in chapter13.weight_sync_table()}
    assert rows == {
        "Qwen3-0.6B": [0.01, 0.12, 1.2],
        "Qwen3-8B": [0.16, 1.64, 16.4],
        "Qwen3-32B": [0.66, 6.56, 65.6],
    }


def test_straggler_ratios(expected: dict[str, Any]) -> None:
    st = chapter13.duration_stats()
    for b, want in expected["straggler"].items():
        assert round(st[f"straggler_{b}"], 3) == pytest.approx(want, abs=1e-3)
    assert [round(st[f"straggler_{b}"], 1) for b in (8, 64, 512)] == [2.6, 4.3, 5.4]


def test_five_designs(expected: dict[str, Any]) -> None:
    got = chapter13.designs()
    for name, want in expected["designs"].items():
        r, w = got[name], want["result"]
        assert r["throughput_per_hour"] == pytest.approx(w["throughput"], abs=0.01)
        assert r["gen_util"] == pytest.approx(w["gen_util"], abs=1e-4)
        assert r["staleness_mean"] == pytest.approx(w["staleness_mean"], abs=1e-4)
        assert r["staleness_max"] == w["staleness_max"]
        assert r["trained_duration_mean"] == pytest.approx(w["trained_duration"], abs=1e-3)


def test_timeout_at_p95_uses_the_timeout_policy(expected: dict[str, Any]) -> None:
    t, w = chapter13.timeout_p95(), expected["timeout_p95"]
    assert t["cap_s"] == pytest.approx(w["cap"], abs=1e-3)
    assert round(t["no_timeout"]["throughput_per_hour"]) == 451
    assert t["timeout"]["throughput_per_hour"] == pytest.approx(w["timeout"]["throughput"], abs=0.01)
    assert round(t["timeout"]["throughput_per_hour"]) == 661
    assert t["truncated_share_of_pool"] == pytest.approx(w["truncated_share"], abs=5e-4)
    assert t["timeout"]["truncated_share"] > 0


def test_sync_sweep(expected: dict[str, Any]) -> None:
    got = chapter13.sync_sweep()
    for t, row in expected["sync_sweep"].items():
        for name, want in row.items():
            assert got[float(t)][name] == pytest.approx(want, abs=0.01)


def test_failure_bias(expected: dict[str, Any]) -> None:
    f, w = chapter13.failure_bias(), expected["failure_bias"]
    for key in w:
        assert f[key] == pytest.approx(w[key], abs=6e-3 if key.startswith("mean") else 1e-4)
    assert (round(100 * f["fail_share"], 1), round(100 * f["fail_share_longest10"], 1)) == (4.5, 13.6)
    assert (round(f["mean_all"]), round(f["mean_survivors"])) == (96, 92)


def test_staleness_sweep_shape() -> None:
    sweep = chapter13.staleness_sweep(range(0, 3))
    assert (
        round(sweep[0]["partial"]["throughput_per_hour"])
        == round(sweep[0]["drain"]["throughput_per_hour"])
        == 451
    )
    assert round(sweep[2]["partial"]["throughput_per_hour"]) == 2077
    assert sweep[2]["partial"]["staleness_max"] > 2 >= sweep[2]["drain"]["staleness_max"]


def test_exercise1_closed_form() -> None:
    # 120 steps: at B = 8 the mean step of 30 steps has a spread of about the band's width
    got = chapter13.exercise1(batch_sizes=(8, 64), steps=120)
    for b, r in got.items():  # the simulated mean step time is within 6% of m * H_B + train + sync
        assert r["simulated_step_s"] == pytest.approx(r["predicted_step_s"], rel=0.06), b
    assert got[8]["predicted_step_s"] == pytest.approx(96 * sum(1 / k for k in range(1, 9)) + 70)


def test_exercise2_drop_at_consumption_bounds_staleness() -> None:
    got = chapter13.exercise2(range(1, 3))
    for eta, r in got.items():
        assert r["staleness_max"] <= eta < 7
        assert r["discarded_share"] > 0 and r["throughput_per_hour"] < r["plain_throughput_per_hour"]
    assert got[2]["discarded_share"] < got[1]["discarded_share"]
    fake = {
        e: {"throughput_per_hour": t, "plain_throughput_per_hour": 10.0}
        for e, t in enumerate([10, 5, 9, 10, 10])
    }
    assert chapter13.free_from(fake) == 3


def test_main_prints_every_section(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, ex1, ex2 = chapter13.staleness_sweep, chapter13.exercise1, chapter13.exercise2
    monkeypatch.setattr(chapter13, "staleness_sweep", lambda: sweep(range(1)))
    monkeypatch.setattr(chapter13, "exercise1", lambda: ex1((8,), steps=3))
    monkeypatch.setattr(chapter13, "exercise2", lambda: ex2(range(1)))
    monkeypatch.setattr(chapter13, "failure_policies", dict)
    chapter13.main()
    out = capsys.readouterr().out
    for text in ("65.6 GB", "4.3 x", "2077", "661", "2261", "13.6%", "m*H_B", "Exercise 2", "max 624 s"):
        assert text in out, text
    # the chapter's own lines: its pool's expected stragglers, and Figure 13.1's two spans
    for text in (
        "expected slowest episode  251 s",
        " 415 s",
        " 515 s",
        "synchronous 1130 s",
        "partial 493 s",
    ):
        assert text in out, text
