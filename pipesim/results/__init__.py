"""Typed results: :class:`RunResult` (:mod:`pipesim.results.run`) and its columnar records
(:mod:`pipesim.results.columns`)."""

from pipesim.results.run import RunResult

__all__ = ["RunResult"]
