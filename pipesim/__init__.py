"""pipesim: discrete-event simulation of RL rollout pipelines, on SimPy.

Concepts
    Scenario        a frozen description of one design: a :class:`PipelineConfig` (slots, batch
                    size B, train and sync seconds, staleness bound eta, steps), a duration model,
                    and the policy objects that decide (admission, weight update, batching, and
                    optionally timeouts, failures and engine replicas). ``Scenario.with_`` copies
                    with fields replaced.
    Episode         one launched agent episode: its task, duration, the version that started it,
                    and the range of weight updates it lived through, from which its
                    (version, start, end) segments are rebuilt.
    PipelineView    the port: what a policy sees of a running pipeline (read-only counters,
                    versions and replicas) and the few actions it may take (:mod:`pipesim.core.port`).
                    Policies are typed against it, never against the engine.
    Pipeline        one run: four kinds of SimPy process -- the controller (admits episodes at the
                    end of each simulated instant), the generation slots of each engine replica
                    (a heap on a pausable virtual clock), the trainer (takes batches from a SimPy
                    resource), and the weight sync (runs the weight-update policy).
    RunResult       typed output: ``events`` (one row per gen / pause / train / sync interval),
                    ``trained`` (staleness by oldest and newest version, duration, spans),
                    ``episode_table`` and a flat ``summary()``.

Entry points
    ``run(scenario)`` -> RunResult; ``simulate_pipeline(...)`` -> the chapter's dict, computed by
    the same engine; ``pipesim.testing`` for property tests of your own policies; and, imported
    lazily so that ``import pipesim`` stays light: ``sweep`` (grids over seeds on any
    Executor, Dask included), ``timeline`` / ``timelines`` (Plotly), ``build_report``, and
    ``write_trace`` (Chrome / Perfetto trace events). The ``pipesim`` command wraps them.
"""

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.engine import Pipeline, PipelineError
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED, RUNNING, TRAINED, Episode
from pipesim.core.port import PipelineView, ReplicaView
from pipesim.core.seams import BatchObserver, EngineOptions, EngineReplica, EpisodeSource, TrainerModel
from pipesim.io.api import draw_pool, run, simulate_pipeline
from pipesim.io.html import attach_views as _attach_views
from pipesim.policies.base import CountThrottle, Drain, OldestFinishedFirst, PartialRollout
from pipesim.results.run import RunResult
from pipesim.workload.durations import (
    AgentDurations,
    ExponentialDurations,
    LogNormalDurations,
    TraceDurations,
    agent_episode_durations,
)

_attach_views()  # Scenario and RunResult draw themselves in a notebook (pipesim.io.html)

__all__ = [
    "ABORTED",
    "BUFFERED",
    "DISCARDED",
    "FAILED",
    "RUNNING",
    "TRAINED",
    "BatchObserver",
    "EngineOptions",
    "EngineReplica",
    "EpisodeSource",
    "PipelineView",
    "ReplicaView",
    "TrainerModel",
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

# -- scheduling policies of real systems ---------------------------------------------------------
from pipesim.policies.admission import (  # noqa: E402
    AReaLThrottle,
    AsyncRatio,
    BatchThrottle,
    LagBound,
    OverSample,
    QueueAhead,
    StaleFraction,
)
from pipesim.policies.batching import (  # noqa: E402
    DropOverlong,
    DropStale,
    EvictStalest,
    LowestVersionFirst,
    WindowedFIFO,
)
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed, Timeout  # noqa: E402
from pipesim.policies.groups import WholeGroups  # noqa: E402
from pipesim.policies.replicas import GroupAffinity, LeastLoaded, PerReplicaSync, Replicas, RoundRobin  # noqa: E402
from pipesim.policies.synccost import WeightSyncCost  # noqa: E402
from pipesim.policies.updates import (  # noqa: E402
    AbortReprefill,
    AbortRestart,
    AfterNextBatch,
    BatchDrain,
    InFlightUpdate,
    OverlappedSwap,
    SyncEveryK,
)

__all__ += [
    "AReaLThrottle",
    "AbortReprefill",
    "AbortRestart",
    "AfterNextBatch",
    "AsyncRatio",
    "BatchDrain",
    "BatchThrottle",
    "DropFailed",
    "DropOverlong",
    "DropStale",
    "EvictStalest",
    "InFlightUpdate",
    "LagBound",
    "GroupAffinity",
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
    "WholeGroups",
    "WindowedFIFO",
]

# -- hardware and models, as data ----------------------------------------------------------------
from pipesim.compute import GPUS, MODELS, Efficiency, GPUSpec, ModelSpec  # noqa: E402
from pipesim.core.errors import shown  # noqa: E402

__all__ += ["GPUS", "MODELS", "Efficiency", "GPUSpec", "ModelSpec"]

# -- heavy helpers, imported on first use (plotly, dask, tqdm stay out of `import pipesim`) ------
_LAZY = {
    "sweep": "pipesim.io.sweeps",
    "SweepResult": "pipesim.io.sweeps",
    "timeline": "pipesim.io.viz",
    "timelines": "pipesim.io.viz",
    "build_report": "pipesim.io.report",
    "run_to_trace": "pipesim.io.trace",
    "write_trace": "pipesim.io.trace",
    "load": "pipesim.io.saved",
    "compare": "pipesim.io.compare",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipesim' has no attribute {shown(name)}")
