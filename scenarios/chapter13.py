"""Every pipeline table of chapter 13, rebuilt with pipesim's policies; ``python -m scenarios.chapter13``.

Each function returns plain data (so tests can compare it with the chapter) and :func:`main`
prints it in the chapter's layout. All runs share the chapter's pool,
``agent_episode_durations(65_536, torch.Generator().manual_seed(0))``, consumed in order, so every
design sees the same episodes. The timeout row uses the :class:`~pipesim.policies.faults.Timeout` policy
rather than clamping the pool, and reproduces the chapter's numbers; exercise 2 uses
:class:`~pipesim.policies.batching.DropStale` with AReaL's throttle (the chapter's count throttle counts
dropped episodes, so each drop would permanently spend its headroom of eta batches).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from pipesim import PipelineConfig, Scenario, run
from pipesim.io.registry import CHAPTER_DESIGNS, get_scenario
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import Drain, PartialRollout
from pipesim.policies.batching import DropStale
from pipesim.policies.faults import DropFailed, RequeueFailed, Timeout
from pipesim.policies.synccost import sync_time_table
from pipesim.workload.durations import ExponentialDurations, chapter_pool, straggler_ratios

# torch is imported inside the two tables that draw with it, not here: every ``pipesim`` command
# that looks a name up loads this module through the registry's entry points, and importing
# torch costs about 2 s of CPU per command (``python -X importtime -m pipesim export
# systems:areal``), more than the rest of the command.

DESIGNS: dict[str, dict[str, Any]] = {
    name: dict(max_staleness=eta, interrupt=not drain) for name, (eta, drain) in CHAPTER_DESIGNS.items()
}
HAZARD_PER_S = 1 / 2000


def chapter_scenario(
    max_staleness: int = 0, interrupt: bool = True, sync_time_s: float = 10.0, **kw: Any
) -> Scenario:
    """64 slots, 64 episodes per step, 60 s training, 20 steps: the chapter's pipeline."""
    cfg = PipelineConfig(64, 64, 60.0, sync_time_s, max_staleness, 20)
    return Scenario(
        pipeline=cfg, weight_update=PartialRollout() if interrupt else Drain(), name="chapter13", **kw
    )


def _row(scenario: Scenario) -> dict[str, float]:
    s = run(scenario, chapter_pool()).summary()
    keys = ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max", "trained_duration_mean")
    out = {k: s[k] for k in keys}
    out.update(
        truncated_share=s["truncated_share"], discarded_share=s["episodes_discarded"] / s["episodes_launched"]
    )
    return out


def weight_sync_table() -> list[tuple[str, float, list[float]]]:
    """Section 13.1: GB in bf16 and sync seconds at 100, 10 and 1 GB/s."""
    return sync_time_table()


def duration_stats() -> dict[str, float]:
    """Section 13.2: the pool's mean, quantiles, and the straggler ratios at B = 8, 64, 512."""
    import torch

    d = chapter_pool()
    q = d.quantile(torch.tensor([0.5, 0.9, 0.99]))
    out = {"mean": d.mean().item(), "median": q[0].item(), "p90": q[1].item(), "p99": q[2].item()}
    out["max"] = d.max().item()
    out.update({f"straggler_{b}": r for b, r in straggler_ratios(d).items()})
    return out


def figure13_1() -> dict[str, float]:
    """Figure 13.1: the simulated seconds of the 4 steps of 8 slots, synchronous and asynchronous
    (eta = 1, partial): the ``fig13.1-sync`` and ``fig13.1-async`` scenarios that draw it."""
    return {
        name: run(get_scenario(f"fig13.1-{name}"), chapter_pool()).summary()["sim_time_s"]
        for name in ("sync", "async")
    }


def designs() -> dict[str, dict[str, float]]:
    """Section 13.3: the five designs."""
    return {name: _row(chapter_scenario(**kw)) for name, kw in DESIGNS.items()}


def staleness_sweep(etas: range = range(9)) -> dict[int, dict[str, dict[str, float]]]:
    """Figure 13.2: throughput and staleness against eta, partial rollouts against draining."""
    return {
        eta: {m: _row(chapter_scenario(eta, m == "partial")) for m in ("partial", "drain")} for eta in etas
    }


def timeout_p95() -> dict[str, Any]:
    """Section 13.7: a synchronous pipeline with and without a timeout at the pool's 95th percentile."""
    cap = chapter_pool().quantile(0.95).item()
    return {
        "cap_s": cap,
        "no_timeout": _row(chapter_scenario(0)),
        "timeout": _row(chapter_scenario(0, timeout=Timeout(cap))),
        "truncated_share_of_pool": (chapter_pool() > cap).float().mean().item(),
    }


def sync_sweep(sync_times_s: tuple[float, ...] = (1.0, 10.0, 60.0)) -> dict[float, dict[str, float]]:
    """Section 13.7: throughput of the synchronous and the eta=2 partial designs against sync time."""
    return {
        t: {
            name: _row(chapter_scenario(eta, sync_time_s=t))["throughput_per_hour"]
            for name, eta in _SWEPT.items()
        }
        for t in sync_times_s
    }


_SWEPT = {"synchronous": 0, "async eta=2, partial": 2}


def failure_bias() -> dict[str, float]:
    """Section 13.7: a constant hazard of one failure per 2,000 s, drawn as the chapter does (seed 1)."""
    import torch

    d = chapter_pool()
    fail = torch.rand(len(d), generator=torch.Generator().manual_seed(1)) < 1 - torch.exp(-d * HAZARD_PER_S)
    long = d > d.quantile(0.9)
    return {
        "fail_share": fail.float().mean().item(),
        "fail_share_longest10": fail[long].float().mean().item(),
        "mean_all": d.mean().item(),
        "mean_survivors": d[~fail].mean().item(),
    }


def failure_policies() -> dict[str, dict[str, float]]:
    """Beyond the chapter: the same hazard at eta=2, dropping failures or requeueing their tasks."""
    out = {}
    for name, pol in {"drop": DropFailed(HAZARD_PER_S), "requeue": RequeueFailed(HAZARD_PER_S)}.items():
        s = run(chapter_scenario(2, admission=AReaLThrottle(), failures=pol), chapter_pool()).summary()
        out[name] = {k: s[k] for k in ("throughput_per_hour", "trained_duration_mean", "episodes_failed")}
    return out


def exercise1(
    batch_sizes: tuple[int, ...] = (8, 64, 512), mean_s: float = 96.0, steps: int = 400
) -> dict[int, dict[str, float]]:
    """Exercise 1: synchronous step time with exponential durations against m * H_B + train + sync.
    A step's time is a maximum of ``B`` draws, so its mean settles slowly: 30 steps printed 361.8 s
    for B = 8 against 330.9 s (9% off, noise); 400 steps give 331.4 s."""
    out = {}
    for b in batch_sizes:
        cfg = PipelineConfig(b, b, 60.0, 10.0, 0, steps)
        sc = Scenario(pipeline=cfg, durations=ExponentialDurations(mean_s), seed=0)
        harmonic = sum(1 / k for k in range(1, b + 1))
        out[b] = {
            "predicted_step_s": mean_s * harmonic + 70.0,
            "simulated_step_s": run(sc).sim_time_s / steps,
            "m_ln_B_plus_gamma_s": mean_s * (math.log(b) + 0.5772156649) + 70.0,
        }
    return out


def exercise2(etas: range = range(9)) -> dict[int, dict[str, float]]:
    """Exercise 2: drop episodes older than eta at consumption; throughput and discarded share against eta."""
    return {
        eta: _row(chapter_scenario(eta, admission=AReaLThrottle(), batching=DropStale()))
        | {"plain_throughput_per_hour": _row(chapter_scenario(eta))["throughput_per_hour"]}
        for eta in etas
    }


def free_from(ex2: dict[int, dict[str, float]], tol: float = 1e-3) -> int:  # tol: the 0.1% printed
    """The smallest eta from which dropping stale episodes costs no throughput (within ``tol``)."""
    out = max(ex2)
    for eta in sorted(ex2, reverse=True):
        r = ex2[eta]
        if r["throughput_per_hour"] < (1 - tol) * r["plain_throughput_per_hour"]:
            break
        out = eta
    return out


def main(argv: list[str] | None = None) -> None:
    """Print every table; ``argv`` (default: none, whatever the process's own arguments) takes
    only ``--help``: the tables have no knobs, so any other argument is a usage error."""
    ap = argparse.ArgumentParser(
        prog="python -m scenarios.chapter13",
        description="Print every pipeline table of chapter 13 (13.1-13.7 and the exercises).",
    )
    ap.parse_args([] if argv is None else argv)
    print("13.1 weight sync (bf16)")
    for name, gb, times in weight_sync_table():
        cols = ", ".join(f"{t:6.2f} s at {bw:>3.0f} GB/s" for t, bw in zip(times, (100, 10, 1)))
        print(f"  {name:<11} {gb:5.1f} GB | {cols}")
    st = duration_stats()
    print("\n13.2 durations and stragglers")
    print("  " + " | ".join(f"{k} {st[k]:.0f} s" for k in ("mean", "median", "p90", "p99", "max")))
    for b in (8, 64, 512):
        ratio = st[f"straggler_{b}"]
        print(f"  B = {b:3d}: expected slowest episode {ratio * st['mean']:4.0f} s = {ratio:.1f} x the mean")
    fig = figure13_1()
    print(
        f"\nFigure 13.1: 8 slots, 4 steps: synchronous {fig['sync']:.0f} s | "
        f"async eta=1, partial {fig['async']:.0f} s"
    )
    print("\n13.3 designs: episodes/hour | slot util | staleness mean, max | trained episode mean (s)")
    for name, r in designs().items():
        print(
            f"  {name:<22} | {r['throughput_per_hour']:6.0f} | {r['gen_util']:4.2f} | "
            f"{r['staleness_mean']:4.2f}, {r['staleness_max']:2.0f} | {r['trained_duration_mean']:5.1f}"
        )
    print("\nFigure 13.2: eta | partial: episodes/hour, staleness mean, max | drain: episodes/hour")
    for eta, pair in staleness_sweep().items():
        p, d = pair["partial"], pair["drain"]
        stale = f"{p['staleness_mean']:5.2f} {p['staleness_max']:2.0f}"
        print(f"  {eta} | {p['throughput_per_hour']:6.0f} {stale} | {d['throughput_per_hour']:6.0f}")
    t = timeout_p95()
    print(f"\n13.7 timeout at p95 ({t['cap_s']:.0f} s), synchronous")
    for key in ("no_timeout", "timeout"):
        row = t[key]
        print(f"  {key:<10} {row['throughput_per_hour']:5.0f} episodes/hour | util {row['gen_util']:.2f}")
    pool_share, trained_share = t["truncated_share_of_pool"], t["timeout"]["truncated_share"]
    print(f"  truncated: {pool_share:.1%} of the pool, {trained_share:.1%} of trained")
    print("\n13.7 sync time (s) | synchronous | async eta=2, partial (episodes/hour)")
    for s_t, r in sync_sweep().items():
        print(f"  {s_t:5.0f} | {r['synchronous']:6.0f} | {r['async eta=2, partial']:6.0f}")
    f = failure_bias()
    print("\n13.7 failures, hazard 1 per 2,000 s")
    print(f"  failing: {f['fail_share']:.1%} | among the longest 10%: {f['fail_share_longest10']:.1%}")
    print(f"  mean duration: all {f['mean_all']:.0f} s | survivors {f['mean_survivors']:.0f} s")
    for name, r in failure_policies().items():
        print(
            f"  simulated eta=2, {name:<7}: {r['throughput_per_hour']:5.0f} episodes/hour, trained mean "
            f"{r['trained_duration_mean']:.1f} s, {r['episodes_failed']:.0f} failed"
        )
    print("\nExercise 1: exponential durations (m = 96 s), synchronous step time over 400 steps")
    for b, r in exercise1().items():
        pred, sim = r["predicted_step_s"], r["simulated_step_s"]
        print(f"  B = {b:3d}: m*H_B + 70 = {pred:6.1f} s | simulated {sim:6.1f} s")
    print("\nExercise 2: drop stale at consumption | eta | episodes/hour | discarded | plain throttle")
    ex2 = exercise2()
    for eta, r in ex2.items():
        print(
            f"  {eta} | {r['throughput_per_hour']:6.0f} | {r['discarded_share']:6.1%} | "
            f"{r['plain_throughput_per_hour']:6.0f}"
        )

    print(
        f"  discarding stops costing throughput at eta = {free_from(ex2)} (within 0.1% of the plain throttle)"
    )


def cli(argv: list[str] | None = None) -> int:
    """``python -m scenarios.chapter13``: the process's arguments (``argv``, default
    ``sys.argv[1:]``) go to :func:`main`, so ``--help`` prints its usage and anything else is a
    usage error, exit 2 (it called ``main()`` with none and ran every table whatever was given).
    Ctrl-C or SIGTERM stops it with one line and status 130 (it printed a torch traceback from
    inside the chapter's draws); it writes no file."""
    from pipesim.io.interrupts import reader_may_leave, sigterm_as_interrupt

    args = sys.argv[1:] if argv is None else argv
    try:
        with sigterm_as_interrupt():
            return reader_may_leave(lambda: main(args))
    except KeyboardInterrupt:
        print("python -m scenarios.chapter13: interrupted (it writes no file)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(cli())
