"""Workloads: duration models and pools (:mod:`pipesim.workload.durations`)."""
