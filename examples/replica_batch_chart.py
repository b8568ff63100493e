"""One replica's batch over time, as text: the charts of docs/compute.md ("One replica's batch over time").

python examples/replica_batch_chart.py [--steps N] [--replica I]

For two of ``scenarios.compute``'s designs (colocated sync, and the 4:4 split at eta 2 with partial
rollouts), replica I's running sequences over the run (72 columns, each the time-weighted mean of
the bins it covers; a row's ``#`` marks a column whose mean reaches that tenth of the replica's
largest bin) and, below, its KV cache's occupancy: blank for none, ``.`` under 10%, ``-=+*#%``
rising, ``@`` from 95%. The series is the run's own (``run_compute(..., record=True)``,
``ComputeRun.replica_timeline``); nothing is drawn at random here beyond the run's seed 0.
"""

from __future__ import annotations

import argparse

import numpy as np

from pipesim.compute.cluster import run_compute
from scenarios import compute as designs_module

WIDTH, HEIGHT = 72, 10
DESIGNS = {
    "colocated sync": "colocated sync (Drain)",
    "split 4:4 async eta=2": "split 4:4 async eta=2 (PartialRollout)",
}


def shade(occupancy: float) -> str:
    """The KV occupancy of one column as a character (module docstring)."""
    if not occupancy > 0:
        return " "
    if occupancy < 0.1:
        return "."
    if occupancy >= 0.95:
        return "@"
    return "-=+*#%"[min(int((occupancy - 0.1) / 0.85 * 6), 5)]


def chart(name: str, label: str, steps: int, replica: int) -> str:
    """The chart of design ``name`` of ``scenarios.compute.designs(steps)``, headed by ``label``."""
    scenario, cluster, groups = designs_module.designs(steps)[name]
    run = run_compute(scenario, cluster, designs_module.WORKLOAD, seed=0, groups=groups, record=True)
    end_s = float(run.summary()["sim_time_s"])
    frame = run.replica_timeline
    frame = frame[frame["replica"] == replica]
    start, stop = frame["t_start_s"].to_numpy(), frame["t_end_s"].to_numpy()
    column = np.clip(
        np.searchsorted(np.linspace(0.0, end_s, WIDTH + 1), (start + stop) / 2, "right") - 1, 0, WIDTH - 1
    )
    width = stop - start
    weight = np.bincount(column, width, WIDTH)
    running = np.bincount(column, frame["running"].to_numpy() * width, WIDTH) / np.maximum(weight, 1e-12)
    kv = np.bincount(column, frame["kv_occupancy"].to_numpy() * width, WIDTH) / np.maximum(weight, 1e-12)
    top = max(int(round(frame["running"].max())), 1)
    lines = [f"{label}: running sequences over {end_s:.0f} s (max {top})"]
    for level in range(HEIGHT, 0, -1):
        row = "".join("#" if r >= top * (level - 0.5) / HEIGHT else " " for r in running)
        lines.append(f"|{row}".rstrip())
    lines += ["+" + "-" * WIDTH, (" " + "".join(shade(k) for k in kv)).rstrip()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=3, choices=range(1, 21), metavar="N", help="steps per design (1-20)"
    )
    parser.add_argument(
        "--replica", type=int, default=0, choices=range(4), metavar="I", help="the replica drawn (0-3)"
    )
    args = parser.parse_args()
    print("\n\n".join(chart(name, label, args.steps, args.replica) for name, label in DESIGNS.items()))


if __name__ == "__main__":
    main()
