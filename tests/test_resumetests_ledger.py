"""The token ledger's closure: a ledger that leaks tokens does not close, and ``run_compute``
refuses a run whose ledger does not close (a loss no summary would show) rather than report it.

A mutation audit loosened :meth:`TokenLedger.closes` to a 5% tolerance and every test passed: no
test held a ledger that does not close, nor ran the refusal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import pipesim
import pipesim.compute.cluster as cluster_mod
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.ledger import TokenLedger
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.errors import PipelineError


def _ledger(generated: float) -> TokenLedger:
    """Terms that sum to 10,000 tokens (trained 6,000, discarded 2,000, buffered 1,000, in flight 1,000)."""
    return TokenLedger(
        generated=generated,
        trained=6_000.0,
        discarded_stale=500.0,
        discarded_filtered=400.0,
        discarded_aborted=300.0,
        discarded_failed=200.0,
        buffered=1_000.0,
        in_flight=1_000.0,
        truncated_trained=100.0,
        discarded_over_length=600.0,
        offpolicy_trained=50.0,
    )


@pytest.mark.parametrize(
    ("generated", "closes"),
    [
        (10_000.0, True),  # every token accounted for
        (10_000.0 * (1 + 1e-12), True),  # float rounding
        (10_100.0, False),  # 1% generated and never trained, discarded, buffered or in flight
        (9_900.0, False),  # 1% more accounted than generated
        (10_001.0, False),  # one token
    ],
)
def test_a_ledger_closes_only_when_its_terms_sum_to_the_tokens_generated(
    generated: float, closes: bool
) -> None:
    ledger = _ledger(generated)
    assert ledger.accounted == 10_000.0
    assert ledger.closes() is closes


def test_run_compute_refuses_a_run_whose_ledger_leaks_one_percent(monkeypatch: pytest.MonkeyPatch) -> None:
    real = cluster_mod.token_ledger
    seen: list[TokenLedger] = []

    def leaky(*args: Any, **kwargs: Any) -> TokenLedger:
        ledger = real(*args, **kwargs)
        seen.append(ledger)
        return dataclasses.replace(ledger, generated=ledger.generated * 1.01)

    monkeypatch.setattr(cluster_mod, "token_ledger", leaky)
    h100 = GPUS["h100-sxm"]
    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=h100, max_model_len=4096)
    work = TokenWorkload(
        response=LogNormalLengths(300.0, 0.5), prompt=512, samples_per_prompt=4, max_response_tokens=3000
    )
    scenario = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=1, max_staleness=0))
    with pytest.raises(PipelineError, match="token ledger does not close"):
        run_compute(scenario, Cluster(engine=engine, n_gpus=4, trainer_gpus=2), work, seed=0)
    assert len(seen) == 1 and seen[0].closes() and seen[0].generated > 0  # the true ledger closed
