"""Checked values of a plan: the bounds, the checks the configs run at construction, and
:class:`Table`, which reads one table of a spec file and names the key in every error.

Every error is a :class:`PlanError` (a :class:`~pipesim.core.validate.FieldError`) whose ``field``
is the key, as ``table.key`` (``cluster.n_gpus``, ``workload.response.median_tokens``, ``space.tp``),
and whose message starts with it and says what the value must be and what it was.

* An *integer* is an ``int``, never a bool, never a float: ``4.0`` is refused as ``4.7`` is (never
  truncated), the rule scenario files keep (:mod:`pipesim.io.scenario_schema`); TOML, YAML and
  ``--set`` all tell ``4`` from ``4.0``.
* A *number* is a finite int or float, never a bool.

Documented bounds, so that a slip of the keyboard stops at once instead of allocating a search
that never ends:

* :data:`MAX_GPUS` (65,536): ``cluster.n_gpus``, ``space.tp``, ``space.placement``,
  ``constraints.min_trainer_gpus``;
* :data:`MAX_ETA` (1,024): ``space.eta`` (the admission's lead; runs draw a pool of durations
  that grows with it, and a bound beyond a run's steps bounds nothing);
* :data:`MAX_OVERSAMPLE` (16): ``space.oversample`` (the pool grows with it too);
* :data:`MAX_SYNC_EVERY` (2**28, the most steps a run may take): ``space.sync_every``,
  ``design.sync_every``, ``baseline.sync_every`` (an interval beyond every run's steps never syncs,
  and a 300-digit one read from 1e308 made a design's name too long to run);
* :data:`MAX_TOKENS` (2**31 - 1, the largest int32, as for a model's dimensions): every token
  count of a spec (``workload.prompt_tokens``, ``max_response_tokens``, ``max_prompt_tokens``,
  ``agent.observation_tokens``, ``model.max_model_len``); no model's context comes near it,
  and 1e308 read as an int overflowed a float mid-run;
* :data:`MAX_BUDGET` (2**53, the largest integer a float holds exactly): the trainer's batch
  budgets (``model.ppo_mini_batch_samples``, ``model.micro_batch_tokens``,
  ``model.log_prob_micro_batch_tokens``), where a value past every batch means no cap (AReaL
  writes ``int(1e12)``);
* :data:`MAX_DESIGNS` (2**20): the designs a space holds (the product of its axes' lengths, the
  placements counted per ``tp``): every design is enumerated before the search starts, and a few
  long lists made millions of them, gigabytes before the first run;
* :data:`MAX_SEED` (2**32): the search seed (``--seed``, ``plan(seed=)``), the range of Optuna's
  sampler; :data:`MAX_SIM_SEED` (2**32): ``search.sim_seed``, ``run.seed`` and the seeds after
  them (:data:`SEED_SPAN` times ``search.seeds`` of them). A compute run keeps the chapter's
  duration draws, whose torch generator takes 32 bits; at 2**64, a plan on ``sim_seed = 5e9`` was
  accepted and then refused by the first run, naming ``AgentDurations``, not the key.
"""

from __future__ import annotations

import difflib
import math
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from pipesim.core import errors
from pipesim.core.validate import FieldError, key_shown, shown
from pipesim.workload.durations import CHAPTER_SEEDS

MAX_GPUS = 65536
MAX_ETA = 1024
MAX_OVERSAMPLE = 16.0
MAX_SYNC_EVERY = errors.MAX_POOL_TASKS
MAX_TOKENS = 2**31 - 1
MAX_BUDGET = 2**53
MAX_DESIGNS = 2**20
MAX_SEED = 2**32
MAX_SIM_SEED = CHAPTER_SEEDS  # the seeds the chapter's duration draws take
HORIZON = 4
"""Runs a recommendation must hold for, in multiples of the plan's full run (the plan's goal):
verification runs the pick ``HORIZON x search.steps`` steps, the longest run a plan draws."""
SEED_SPAN = 2
"""A plan runs seeds ``sim_seed .. sim_seed + SEED_SPAN x seeds - 1``: the selection's, and as many
more to verify a design whose maximum the tail doubts (:mod:`pipesim.plan.verify`)."""


class PlanError(FieldError):
    """A plan that cannot start (bad spec, a model that does not fit) or has no feasible design.

    A :class:`~pipesim.core.validate.FieldError`: ``err.field`` is the key (``cluster.n_gpus``),
    ``err.file`` the spec file where one is read (set by :mod:`pipesim.plan.specfile`)."""


def nested(prefix: str, e: Exception) -> PlanError:
    """``e``, raised by a config built from the spec's table ``prefix``, as a refusal of the key
    under it (``workload.agent`` + ``tool_latency_sigma``); ``prefix`` itself where ``e`` has no field."""
    field = getattr(e, "field", "")
    return PlanError(f"{prefix}: {e}", f"{prefix}.{field}" if field else prefix)


def did_you_mean(word: object, valid: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``valid``, or ``""``."""
    close = difflib.get_close_matches(str(word), list(valid), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{_fmt(lo)}, {_fmt(hi)}]"
    if lo is not None:
        return f" >= {_fmt(lo)}"
    return f" <= {_fmt(hi)}" if hi is not None else ""


def _bounds(lo: float | None, hi: float | None, above: float | None) -> str:
    """:func:`_range` with an open lower bound ``above``: ``in (0, 10]``, ``> 0``, or ``> 0 and in
    [1, 10]``. Joined bare, ``above=0`` and ``hi`` read ``a finite number > 0 <= 2147483647``."""
    if above is None:
        return _range(lo, hi)
    if lo is None and hi is not None:
        return f" in ({_fmt(above)}, {_fmt(hi)}]"
    return f" > {_fmt(above)}" + (f" and{_range(lo, hi)}" if lo is not None else "")


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> bool:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond any float (YAML's integers are unbounded)
        return False


def integer(where: str, v: object, lo: int | None = None, hi: int | None = None, what: str = "") -> int:
    """``v`` if it is an int (not a bool) in ``[lo, hi]``; PlanError naming ``where`` otherwise."""
    if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):  # type: ignore[operator]
        bounds = what or _range(lo, hi)
        raise PlanError(f"{where} must be an integer{bounds}, got {shown(v)}{_float_hint(v)}", where)
    return v  # type: ignore[return-value]


def _float_hint(v: object) -> str:
    """How to write the integer a float such as ``8.0`` or ``1e12`` meant; "" for anything else.
    The digits alone: ``100_000`` is an integer in TOML and ``--set`` but text in YAML (YAML 1.2,
    which a spec file is read as), so offering it sent a YAML user from one refusal to another."""
    if not (isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 1e18):
        return ""
    return f" (a float: write {int(v)})"


def number(
    where: str,
    v: object,
    lo: float | None = None,
    hi: float | None = None,
    *,
    above: float | None = None,
    what: str = "",
) -> float:
    """``v`` if it is a finite number in ``[lo, hi]`` (``> above``); PlanError naming ``where``."""
    ok = is_number(v)
    if ok:
        f = float(v)  # type: ignore[arg-type]
        ok = (lo is None or f >= lo) and (hi is None or f <= hi) and (above is None or f > above)
    if not ok:
        bounds = what or _bounds(lo, hi, above)
        raise PlanError(f"{where} must be a finite number{bounds}, got {shown(v)}", where)
    return float(v)  # type: ignore[arg-type]


def optional_number(where: str, v: object, lo: float | None = None, hi: float | None = None) -> None:
    if v is not None:
        number(where, v, lo, hi)


def check_seed(seed: object, where: str = "seed") -> int:
    """The search seed: an integer in [0, 2**32) (Optuna's sampler takes no other)."""
    if not is_int(seed) or not 0 <= seed < MAX_SEED:  # type: ignore[operator]
        raise PlanError(f"{where} must be an integer in [0, 2**32), got {shown(seed)}", where)
    return seed  # type: ignore[return-value]


def ints(where: str, values: tuple[Any, ...], lo: int, hi: int | None = None) -> None:
    """Each of ``values`` an integer in ``[lo, hi]`` (the error names the first that is not)."""
    for i, v in enumerate(values):
        integer(f"{where}[{i}]", v, lo, hi)


class Table:
    """One table of a spec file, ``where`` its dotted name (``workload.response``): unknown keys
    are errors (with the closest valid key), and each value is read with its type checked."""

    def __init__(self, where: str, data: object, keys: Iterable[str], what: str = "a table") -> None:
        if not isinstance(data, Mapping):
            raise PlanError(f"{where} must be {what}, got {shown(data)}", where)
        self.where, self.keys = where, tuple(keys)
        self.data = {k: v for k, v in data.items() if v is not None}  # YAML's null: not given
        for key in data:
            if key not in self.keys:
                raise PlanError(
                    f"{self.name(key)}: unknown key{did_you_mean(key, self.keys)} "
                    f"(valid keys of {where}: {', '.join(sorted(self.keys))})",
                    self.name(key),
                )

    def name(self, key: object) -> str:
        return f"{self.where}.{key_shown(key)}"

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def require(self, *keys: str, why: str = "") -> None:
        for key in keys:
            if key not in self.data:
                raise PlanError(
                    f"{self.name(key)} is missing{' (' + why + ')' if why else ''}", self.name(key)
                )

    def table(self, key: str, keys: Iterable[str], what: str = "a table") -> Table:
        return Table(self.name(key), self.data[key], keys, what)

    def integer(self, key: str, default: Any = None, lo: int | None = None, hi: int | None = None) -> Any:
        """An integer in ``[lo, hi]`` (a float, even ``4.0``, is refused); ``default`` when absent."""
        if key not in self.data:
            return default
        return integer(self.name(key), self.data[key], lo, hi)

    def number(
        self,
        key: str,
        default: Any = None,
        lo: float | None = None,
        *,
        above: float | None = None,
        hi: float | None = None,
    ) -> Any:
        """A finite number ``>= lo`` (``> above``, ``<= hi``), as given (an int stays one);
        ``default`` when absent."""
        if key not in self.data:
            return default
        number(self.name(key), self.data[key], lo, hi, above=above)
        return self.data[key]

    def string(self, key: str, default: Any = None) -> Any:
        return as_str(self.name(key), self.data[key]) if key in self.data else default

    def flag(self, key: str, default: Any = None) -> Any:
        if key not in self.data:
            return default
        v = self.data[key]
        if not isinstance(v, bool):
            raise PlanError(f"{self.name(key)} must be true or false, got {shown(v)}", self.name(key))
        return v

    def items(self, key: str) -> list[tuple[str, Any]]:
        """The value's items and their names: a list's as ``key[i]``, a scalar as one item."""
        v = self.data[key]
        if isinstance(v, list | tuple):
            return [(f"{self.name(key)}[{i}]", x) for i, x in enumerate(v)]
        return [(self.name(key), v)]

    def integers(self, key: str) -> tuple[int, ...]:
        return tuple(as_int(where, v) for where, v in self.items(key))

    def numbers(self, key: str) -> tuple[float, ...]:
        return tuple(as_float(where, v) for where, v in self.items(key))  # floats, as Space holds them

    def strings(self, key: str) -> tuple[str, ...]:
        return tuple(as_str(where, v) for where, v in self.items(key))


def as_int(where: str, v: object) -> int:
    """An int (:func:`is_int`: a float, even ``4.0``, is refused); PlanError naming ``where`` otherwise."""
    if not is_int(v):
        raise PlanError(f"{where} must be an integer, got {shown(v)}{_float_hint(v)}", where)
    return v  # type: ignore[return-value]


def as_float(where: str, v: object) -> float:
    if not is_number(v):
        raise PlanError(f"{where} must be a finite number, got {shown(v)}", where)
    return float(v)  # type: ignore[arg-type]


def as_str(where: str, v: object) -> str:
    if not isinstance(v, str):
        raise PlanError(f"{where} must be a string, got {shown(v)}", where)
    return v


@contextmanager
def plain_warnings(out: IO[str] | None = None) -> Iterator[None]:
    """Warnings shown inside (a tight trainer's, :class:`pipesim.plan.build.TrainerMemoryWarning`)
    printed as a person reads the command's other notes: one line each, ``pipesim: warning: ...``,
    on ``out`` (stderr), each text once, whichever line warned. Python's own form gave the
    ``file:line`` and source line of each caller, so ``pipesim plan`` said one trainer twice
    (``build.py:227``, ``search.py:163``). The filters still apply: ``-W error`` raises."""
    said: set[str] = set()

    def show(message: Warning | str, *_: Any, **__: Any) -> None:
        text = " ".join(str(message).split())
        if text not in said:
            said.add(text)
            print(f"pipesim: warning: {text}", file=out or sys.stderr)

    with warnings.catch_warnings():  # restores showwarning and the filters on the way out
        warnings.showwarning = show
        yield
