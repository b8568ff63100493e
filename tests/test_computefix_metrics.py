"""The two ``decode_tokens_per_s`` of a compute run are different rates, tied by a relation.

The summary's is the cluster's throughput (every replica's tokens over the run's simulated time,
pauses and idle replicas included); a replica's (``ComputeRun.engines[i]``) is its tokens over its
own busy seconds. Both names stay (saved runs and CSVs hold them); ``docs/compute.md`` defines
them. The relation: the summary's is the sum over replicas of each replica's rate times its
``busy_share``, and no replica's busy rate is below its share of the cluster's time-averaged rate.
"""

from __future__ import annotations

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload


@pytest.mark.parametrize(("trainer_gpus", "staleness"), [(0, 0), (2, 1)])
def test_the_summary_rate_is_the_busy_rates_weighted_by_busy_share(trainer_gpus: int, staleness: int) -> None:
    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    work = TokenWorkload(
        response=LogNormalLengths(400.0, 0.8), prompt=256, samples_per_prompt=4, max_response_tokens=2048
    )
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=3, max_staleness=staleness),
        **({"weight_update": pipesim.PartialRollout()} if staleness else {}),
    )
    run = run_compute(sc, Cluster(engine=engine, n_gpus=4, trainer_gpus=trainer_gpus), work, seed=0)
    s, T = run.summary(), run.result.sim_time_s
    assert s["decode_tokens_per_s"] == pytest.approx(s["tokens_generated"] / T, rel=1e-12)
    weighted = sum(e["decode_tokens_per_s"] * e["busy_share"] for e in run.engines)
    assert s["decode_tokens_per_s"] == pytest.approx(weighted, rel=1e-9)
    for e in run.engines:
        assert 0 < e["busy_share"] <= 1
        assert e["decode_tokens_per_s"] >= e["tokens_generated"] / T
    if trainer_gpus == 0:  # colocated: the engines pause while the trainer trains
        assert all(e["busy_share"] < 1 for e in run.engines)
        assert all(e["decode_tokens_per_s"] > e["tokens_generated"] / T for e in run.engines)
