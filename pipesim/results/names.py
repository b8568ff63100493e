"""One name per metric: the names a run's summary used before, and the one each has now.

verl logs the trainer's and the rollouter's idle shares as ``trainer/idle_ratio`` and
``rollouter/idle_ratio`` (``verl/experimental/fully_async_policy``), so the summary keeps those and
drops the duplicates it printed beside them (``trainer_idle_ratio``, ``rollout_idle_ratio``: the
same numbers). A name that was renamed stays readable:

* :class:`Summary` (what :meth:`pipesim.results.run.RunResult.summary` returns) answers an old
  name with the new one's value, although it lists only the new names;
* :func:`renamed` gives a summary or a table written before (a saved run's ``summary.json``, a
  sweep's columns) the new names, keeping the old ones it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RENAMED", "Summary", "renamed"]

RENAMED = {"trainer_idle_ratio": "trainer/idle_ratio", "rollout_idle_ratio": "rollouter/idle_ratio"}
"""Old summary key -> the key it is now."""


class Summary(dict[str, Any]):
    """A summary dict in which an old name (:data:`RENAMED`) reads its new name's value; the old
    names are not listed (iteration, ``keys()``, JSON and DataFrames show one name per metric)."""

    def __missing__(self, key: str) -> Any:
        new = RENAMED.get(key)
        if new is not None and new in self:
            return self[new]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (
            isinstance(key, str) and key in RENAMED and dict.__contains__(self, RENAMED[key])
        )


def renamed(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each old name's value also under its new name where the new one is missing
    (a summary saved before the rename); the old keys are kept, so nothing written before is lost."""
    out = dict(data)
    for old, new in RENAMED.items():
        if old in out and new not in out:
            out[new] = out[old]
    return out
