"""pipesim: discrete-event simulation of RL rollout pipelines, on SimPy."""

from pipesim.api import draw_pool, run, simulate_pipeline
from pipesim.config import PipelineConfig, Scenario
from pipesim.durations import (
    AgentDurations,
    ExponentialDurations,
    LogNormalDurations,
    TraceDurations,
    agent_episode_durations,
)
from pipesim.engine import Pipeline, PipelineError
from pipesim.episode import Episode
from pipesim.policies import CountThrottle, Drain, OldestFinishedFirst, PartialRollout
from pipesim.results import RunResult

__all__ = [
    "AgentDurations",
    "CountThrottle",
    "Drain",
    "Episode",
    "ExponentialDurations",
    "LogNormalDurations",
    "OldestFinishedFirst",
    "PartialRollout",
    "Pipeline",
    "PipelineConfig",
    "PipelineError",
    "RunResult",
    "Scenario",
    "TraceDurations",
    "agent_episode_durations",
    "draw_pool",
    "run",
    "simulate_pipeline",
]

# -- scheduling policies of real systems (issue 3) ------------------------------------------------
from pipesim.admission import AReaLThrottle, AsyncRatio, LagBound, OverSample, QueueAhead, StaleFraction  # noqa: E402
from pipesim.batching import DropStale, EvictStalest, LowestVersionFirst, WindowedFIFO  # noqa: E402
from pipesim.faults import DropFailed, RequeueFailed, RetryFailed, Timeout  # noqa: E402
from pipesim.replicas import LeastLoaded, PerReplicaSync, Replicas, RoundRobin  # noqa: E402
from pipesim.synccost import WeightSyncCost  # noqa: E402
from pipesim.updates import AbortReprefill, AbortRestart, InFlightUpdate, OverlappedSwap, SyncEveryK  # noqa: E402

__all__ += [
    "AReaLThrottle",
    "AbortReprefill",
    "AbortRestart",
    "AsyncRatio",
    "DropFailed",
    "DropStale",
    "EvictStalest",
    "InFlightUpdate",
    "LagBound",
    "LeastLoaded",
    "LowestVersionFirst",
    "OverSample",
    "OverlappedSwap",
    "PerReplicaSync",
    "QueueAhead",
    "Replicas",
    "RequeueFailed",
    "RetryFailed",
    "RoundRobin",
    "StaleFraction",
    "SyncEveryK",
    "Timeout",
    "WeightSyncCost",
    "WindowedFIFO",
]
