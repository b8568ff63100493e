"""What a plan's outputs record about where they came from, and the on-disk cache of its runs.

A run of the plan is a pure function of (spec's run-relevant parts, design, steps, seed): the
simulation reads the cluster, the model constants, the engine settings, the workload, the weight
sync and the design, never the constraints or the search settings. :func:`run_key` hashes exactly
those, plus pipesim's version and the hash of its code (:func:`code_hash`), so

* a re-run with a changed constraint, a widened space or other search settings finds every run it
  already did (the constraints are not in the key);
* a changed model constant (a GPU's bandwidth, a model's layer count), workload, run length or
  seed, or another pipesim version, misses: its runs are not the same runs;
* so does any change to pipesim's code, released or not (a checkout between two commits of the
  same version): a model fixed since a run was cached must not be answered from it.

:class:`DiskCache` keeps one small JSON file per run under a directory (default
``~/.cache/pipesim/plan``, or ``$PIPESIM_CACHE``), written whole or not at all
(:func:`pipesim.io.interrupts.write_text_atomic`), so an interrupted plan leaves only finished
runs behind and ``--resume`` (or any re-run) picks them up. A run cached by another build (the
code changed since) is not reused, and the plan says how many were passed over
(:attr:`DiskCache.stale`). :func:`spec_hash` is the hash every
output records: the whole spec, constraints and search settings included.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DiskCache", "canonical", "code_hash", "default_dir", "run_key", "spec_hash", "version"]

# the PlanSpec fields a run does not read: limits and search settings
_NOT_RUN = {"constraints", "space", "steps", "screen_steps", "seeds", "sim_seed", "method", "trials"}
_NOT_RUN |= {"grid_limit", "reduction", "min_full", "batch", "baseline", "cost_per_gpu_hour", "first_cut"}


RUNS_FORMAT = 4
"""The metrics a run records (:func:`pipesim.plan.evaluate.run_design`); part of every key, raised
when they change, so a cache written by older code of the same version is not read as new (4:
``tool_slot_limited``, which a format-3 record lacks and would have read as "not limited")."""


def version() -> str:
    """pipesim's installed version (``pyproject.toml``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version("pipesim")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "unknown"


@functools.cache
def code_hash() -> str:
    """The SHA-256 of pipesim's Python source (every ``.py`` file of the package, by its path
    inside it; about 150 files, read once per process): part of every run's key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def canonical(obj: Any) -> Any:
    """``obj`` as plain JSON values, the same for equal specs: dataclasses as their class name and
    fields, arrays as their dtype, shape and a hash of their bytes, floats by ``repr``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            "__class__": type(obj).__qualname__,
            **{f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)},
        }
    if isinstance(obj, enum.Enum):
        return canonical(obj.value)
    if isinstance(obj, np.ndarray):
        data = np.ascontiguousarray(obj)
        return {"dtype": str(data.dtype), "shape": list(data.shape), "sha256": _sha(data.tobytes())}
    if isinstance(obj, np.generic):
        return canonical(obj.item())
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, float):
        return repr(obj) if not math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple | set | frozenset):
        items = [canonical(v) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, set | frozenset) else items
    if hasattr(obj, "__dict__"):  # a plain object (a length model): its class and attributes
        return {"__class__": type(obj).__qualname__, **canonical(vars(obj))}
    return repr(obj)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest(obj: Any) -> str:
    return _sha(json.dumps(canonical(obj), sort_keys=True, separators=(",", ":")).encode())


def spec_hash(spec: Any) -> str:
    """The hash of the whole spec (16 hex digits): equal specs, from TOML or YAML, hash alike."""
    return _digest(spec)[:16]


def run_key(spec: Any, design: Any, steps: int, seed: int) -> str:
    """The key of one run, ``RUN-BUILD``: RUN hashes what the simulation reads of ``spec`` (not its
    constraints or search settings), the design, the run length and the seed; BUILD hashes
    pipesim's version, its code (:func:`code_hash`) and :data:`RUNS_FORMAT`. Both are part of the
    key (a run of other code is never reused); they are apart so that a miss can tell a run cached
    by other code (:attr:`DiskCache.stale`) from one never run."""
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in _NOT_RUN}
    run = _digest({"spec": fields, "design": design, "steps": steps, "seed": seed})
    build = _digest({"version": version(), "code": code_hash(), "format": RUNS_FORMAT})
    return f"{run}-{build[:16]}"


def default_dir() -> Path:
    """``$PIPESIM_CACHE`` or ``~/.cache/pipesim/plan``."""
    env = os.environ.get("PIPESIM_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pipesim" / "plan"


class DiskCache:
    """One JSON file per run under ``root``, keyed by :func:`run_key`: ``<run[:2]>/<run>/<build>.json``
    (``RUN-BUILD``), so the runs of one spec, design, length and seed by every build of pipesim sit
    in one directory; a key without a ``-`` is kept as ``<key[:2]>/<key>.json``."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.hits = 0
        """Runs found (and reused)."""
        self.stale = 0
        """Runs missed while the same run (spec, design, length, seed) is cached from another build
        of pipesim (other code or version): not reused, by design, but a user is told so."""

    def _path(self, key: str) -> Path:
        run, sep, build = key.partition("-")
        if not sep:
            return self.root / key[:2] / f"{key}.json"
        return self.root / run[:2] / run / f"{build}.json"

    def _other_builds(self, key: str) -> bool:
        """Whether the run of ``key`` is cached by another build (a sibling file of its path)."""
        if "-" not in key:
            return False
        path = self._path(key)
        try:
            return any(p.suffix == ".json" and p.name != path.name for p in path.parent.iterdir())
        except OSError:  # no directory: never run
            return False

    def files(self) -> int:
        """How many runs the cache holds, of every spec and build (a walk of ``root``)."""
        try:
            return sum(1 for p in self.root.rglob("*.json") if not p.name.startswith("."))
        except OSError:
            return 0

    def get(self, key: str) -> dict[str, Any] | None:
        """The metrics stored under ``key``; None when absent or unreadable (then it is re-run),
        counted in :attr:`stale` when another build cached the same run."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.stale += self._other_builds(key)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
            return None
        self.hits += 1
        return {k: _number(v) for k, v in data["metrics"].items()}

    def put(self, key: str, metrics: dict[str, Any]) -> None:
        from pipesim.io.interrupts import write_text_atomic

        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        clean = {
            k: (repr(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()
        }
        write_text_atomic(path, json.dumps({"version": version(), "metrics": clean}))


def _number(v: Any) -> Any:
    """A stored value back: ``'inf'``/``'nan'`` as floats, other strings (an error) as they are."""
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    return v
