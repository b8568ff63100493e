"""Weight-sync cost model: how long moving the weights takes, from the model and the link.

``sync_time_s = params_billion * bytes_per_param / bandwidth_gb_s`` (GB = 1e9 bytes), the
arithmetic of the chapter's Section 13.1: Qwen3-32B is 65.6 GB in bf16, 0.66 s at 100 GB/s
(within a node), 6.56 s at 10 GB/s (across nodes) and 65.6 s at 1 GB/s (a checkpoint reload).
Feed it to a scenario with ``scenario.with_(sync_time_s=cost.sync_time_s)``, or per replica to
:class:`~pipesim.policies.replicas.PerReplicaSync`. Whether generation also pauses while the trainer
trains (colocated) or not (disaggregated) is ``PipelineConfig.colocated``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.policies.faults import check_positive

CHAPTER_MODELS: dict[str, float] = {"Qwen3-0.6B": 0.6, "Qwen3-8B": 8.2, "Qwen3-32B": 32.8}
CHAPTER_BANDWIDTHS_GB_S: tuple[float, ...] = (100.0, 10.0, 1.0)


@dataclass(frozen=True)
class WeightSyncCost:
    """The time to move ``params_billion`` parameters of ``bytes_per_param`` bytes at ``bandwidth_gb_s``."""

    params_billion: float
    bandwidth_gb_s: float
    bytes_per_param: float = 2.0  # bf16

    def __post_init__(self) -> None:
        check_positive("params_billion", self.params_billion)
        check_positive("bandwidth_gb_s", self.bandwidth_gb_s)
        check_positive("bytes_per_param", self.bytes_per_param)

    @property
    def gigabytes(self) -> float:
        return self.params_billion * self.bytes_per_param

    @property
    def sync_time_s(self) -> float:
        return self.gigabytes / self.bandwidth_gb_s


def sync_time_table(
    models: dict[str, float] | None = None, bandwidths_gb_s: tuple[float, ...] = CHAPTER_BANDWIDTHS_GB_S
) -> list[tuple[str, float, list[float]]]:
    """Rows (model, GB in bf16, [sync seconds per bandwidth]) of the chapter's Section 13.1 table."""
    rows = []
    for name, billions in (models or CHAPTER_MODELS).items():
        costs = [WeightSyncCost(billions, bw) for bw in bandwidths_gb_s]
        rows.append((name, costs[0].gigabytes, [c.sync_time_s for c in costs]))
    return rows
