"""A property-testing kit for pipelines and for the policies users write.

``check_invariants(result)`` asserts what every run must keep; ``check_promises(scenario)`` that
the promises a policy makes change nothing but speed; the strategies draw every policy family.
See :mod:`pipesim.testing.invariants` and :mod:`pipesim.testing.strategies`.
"""

from pipesim.testing.invariants import (
    InvariantError,
    admissions,
    batchings,
    check_invariants,
    check_promises,
    duration_lists,
    duration_models,
    failure_policies,
    pipeline_configs,
    policy_scenarios,
    promised_staleness_bound,
    replica_configs,
    run_trace,
    scenarios,
    timeouts,
    weight_updates,
)

__all__ = [
    "InvariantError",
    "admissions",
    "batchings",
    "check_invariants",
    "check_promises",
    "duration_lists",
    "duration_models",
    "failure_policies",
    "pipeline_configs",
    "policy_scenarios",
    "promised_staleness_bound",
    "replica_configs",
    "run_trace",
    "scenarios",
    "timeouts",
    "weight_updates",
]
