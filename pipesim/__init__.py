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
