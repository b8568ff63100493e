"""How pipesim refuses bad input: one exception, :class:`FieldError`, and the checks that raise it.

Every refusal of a user's value (a config field, a key of a spec or scenario file, an argument of
a constructor) is a :class:`FieldError`. It is a ``ValueError`` (so ``except ValueError`` keeps
working) and carries

* ``err.field``: the field's dotted path (``"max_staleness"`` from a :class:`PipelineConfig`,
  ``"pipeline.max_staleness"`` once a scenario or a file composes it, ``"cluster.n_gpus"``,
  ``"workload.response.median_tokens"``, ``"values[7]"``), the part a program or a test reads;
* ``err.file``: the file it came from, or None;
* a message that starts with the field (or with the file, then the field) and shows the user's
  value bounded (:func:`shown`): the part a person reads. Tests assert the type and ``.field``,
  never the sentence.

:class:`FieldTypeError` is the same refusal where it was a ``TypeError`` (an argument of the
wrong kind of object, a numpy generator expected), so ``except TypeError`` keeps working too.
:class:`pipesim.plan.checks.PlanError` and :class:`pipesim.io.scenario_schema.ScenarioFileError`
are subclasses.

Nested configs: a config validated inside another one raises its own field name; the outer one
adds its prefix with :func:`within` (or :meth:`FieldError.nested`), so a ``PipelineConfig`` field
refused inside a scenario file reads ``pipeline.n_slots``.

``offpolicy`` and ``mismatch`` do not import pipesim; ``offpolicy/checks.py`` keeps a small twin
of this class and of :func:`check_int` / :func:`check_number`.
"""

from __future__ import annotations

import decimal
import math
import numbers
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict = 2, 4, 4, 4
_SHOWN.maxset, _SHOWN.maxfrozenset, _SHOWN.maxdeque = 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 60, 60, 40
MAX_SHOWN_CHARS = 80
"""The most characters of a user's value an error message shows."""


def shown(value: object) -> str:
    """A user's value as an error message shows it: a repr bounded in depth, count and length.

    Never the whole repr: a few hundred bytes of YAML aliases expand to a value whose full repr
    is gigabytes, and a message must stay one short line whatever the file holds."""
    try:
        text = _SHOWN.repr(value)
    except Exception:  # a user's object whose repr fails: its type is still worth naming
        text = f"<{type(value).__name__}>"
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def int_shown(value: int) -> str:
    """An int as a message shows it: with thousands separators (``16,777,216``) below 10**24,
    a larger one in scientific notation, truncated (``1.00e+308``): a 1e308 read as an int is
    309 digits, and past ``sys.get_int_max_str_digits()`` (4,300) Python refuses to write one."""
    v = abs(value)
    if v < 10**24:
        return f"{value:,}"
    n = int((v.bit_length() - 1) * math.log10(2))  # the exponent, or one less
    n += v >= 10 ** (n + 1)
    lead = str(v // 10 ** (n - 2))  # the first three digits
    return f"{'-' if value < 0 else ''}{lead[0]}.{lead[1:]}e+{n}"


class FieldError(ValueError):
    """A value a field cannot take. ``field``: its dotted path; ``file``: the file, or None."""

    def __init__(self, message: str, field: str = "", file: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.file = file

    def __reduce__(self) -> tuple[Any, ...]:  # a sweep worker's error crosses a process boundary
        return (type(self), (str(self), self.field, self.file), self.__dict__)

    def nested(self, prefix: str) -> FieldError:
        """This error seen from the config ``prefix`` that holds the field (same type): the
        field becomes ``prefix.field``, and so does the message where it starts with the field."""
        if not prefix:
            return self
        field = f"{prefix}.{self.field}" if self.field else prefix
        text = str(self)
        if self.field and self.file is None and text.startswith(self.field):
            text = f"{prefix}.{text}"
        err = type(self)(text, field, self.file)
        err.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("field", "file")})
        return err


class FieldTypeError(FieldError, TypeError):
    """A :class:`FieldError` that was a ``TypeError``: an argument of the wrong kind of object."""


class CrossFieldError(FieldError):
    """A value refused only beside another field's (a batch that is not whole groups of its batch
    policy, fewer slots than replicas, a ``max_staleness`` no policy reads): changing either field
    settles it, so a sequence of changes (``--set`` pairs) waits for the next one before it is the
    error (:func:`pipesim.io.overrides.apply_overrides`)."""


MAX_KEY_CHARS = 60
"""The most characters of a user's key (a file's, a spec's, a table's) an error names: a key is a
word, and a 100 kB one (a slip, or a hostile file) must not make a 100 kB message."""


def key_shown(key: object) -> str:
    """A user's key as a message names it: whole when short, else its ends around ``...``."""
    text = str(key)
    if len(text) <= MAX_KEY_CHARS:
        return text
    half = (MAX_KEY_CHARS - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def refuse(field: str, problem: str, kind: type[FieldError] = FieldError) -> FieldError:
    """The error saying ``field`` ``problem`` (``"must be a bool, got 3"``): its message is the
    field's name followed by the problem, so the name a program reads is the one a person reads."""
    return kind(f"{field} {problem}", field)


def protocol_lacks(value: object, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``value`` lacks, in the order declared: a method it has
    no callable of that name for, an attribute (annotated) or property it does not have. A policy
    slot's Protocol (:func:`pipesim.config.check_policy`) holds methods only; a seam's
    (:mod:`pipesim.core.seams`, not runtime-checkable) attributes too."""
    own = vars(protocol)
    members = dict.fromkeys(n for n in (*own.get("__annotations__", {}), *own) if not n.startswith("_"))
    return [
        n
        for n in members
        if not (callable(getattr(value, n, None)) if callable(own.get(n)) else hasattr(value, n))
    ]


def check_seam(name: str, value: object, protocol: type, what: str, got: str = "") -> None:
    """Raise a FieldError for ``name`` unless ``value`` is an instance with every member of the
    seam's ``protocol`` (:func:`protocol_lacks`), as :func:`pipesim.config.check_policy` checks a
    policy. Called where the pipeline is built, so a wrong object is named before the run, not by
    an AttributeError from inside the kernel at its first batch or sync. ``got``: where ``value``
    came from (a factory's answer)."""
    if isinstance(value, type):
        raise refuse(name, f"must be {what} instance, got the class {value.__name__}{got}; call it")
    if missing := protocol_lacks(value, protocol):
        raise refuse(
            name,
            f"must be {what} ({protocol.__module__}.{protocol.__name__}), got {shown(value)}{got}, "
            f"which lacks {', '.join(missing)}",
        )


@contextmanager
def within(prefix: str) -> Iterator[None]:
    """Re-raise a :class:`FieldError` raised inside as :meth:`FieldError.nested` under ``prefix``."""
    try:
        yield
    except FieldError as exc:
        raise exc.nested(prefix) from None


@contextmanager
def across(prefix: str) -> Iterator[None]:
    """:func:`within`, the error re-raised as a :class:`CrossFieldError`: for a check a config asks
    of two of its fields together."""
    try:
        yield
    except FieldError as exc:
        err = exc.nested(prefix)
        cross = CrossFieldError(str(err), err.field, err.file)
        cross.__dict__.update({k: v for k, v in err.__dict__.items() if k not in ("field", "file")})
        raise cross from None


def float_hint(value: object) -> str:
    """What to say of a real number that is not a Python int or float (a numpy float32, a
    Fraction, a Decimal): a field takes a Python number, so its arithmetic is a C double's in
    both builds; the user converts it."""
    if not isinstance(value, bool | int | float) and isinstance(value, numbers.Real | decimal.Decimal):
        return f" (a Python float: float(x) converts a {type(value).__name__})"
    return ""


def check_int(name: str, value: object, minimum: int, maximum: int | None = None, why: str = "") -> None:
    """:class:`FieldError` for ``name`` unless ``value`` is an int (not a bool) >= ``minimum`` (and
    <= ``maximum``, where given, ``why`` saying why): the one integer check of every config (the
    kernel's options, the scenario, the policies)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        hint = ""
        if not isinstance(value, bool | int) and isinstance(value, numbers.Integral):
            hint = " (a Python int: int(x) converts a numpy integer)"
        raise refuse(name, f"must be an integer >= {minimum}{hint}, got {shown(value)}")
    if maximum is not None and value > maximum:
        raise refuse(name, f"must be at most {maximum:,}{f' ({why})' if why else ''}, got {int_shown(value)}")


def check_number(name: str, value: object, minimum: float, strict: bool = False, unit: str = "") -> None:
    """:class:`FieldError` for ``name`` unless ``value`` is a finite int or float (not a bool)
    ``>= minimum`` (``> minimum`` where ``strict``): the one number check of the configs.
    ``unit`` follows "a finite number" in the message (" of seconds"). An int past a float's
    range (``10**400``) is not finite as a float: it is refused, not an ``OverflowError``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and _finite(value)
    if not ok or value < minimum or (strict and value == minimum):  # type: ignore[operator]
        bound = f"{'>' if strict else '>='} {minimum}"
        raise refuse(name, f"must be a finite number{unit} {bound}{float_hint(value)}, got {shown(value)}")


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite float or an int a float holds (``math.isfinite`` raises an
    ``OverflowError`` for an int past 1.8e308)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_bool(name: str, value: object) -> None:
    """:class:`FieldError` for ``name`` unless ``value`` is a bool (a 0 or a "no" is not one)."""
    if not isinstance(value, bool):
        raise refuse(name, f"must be a bool, got {shown(value)}")


TAIL_SIGMAS = 8.0
"""A log-normal's draw this many sigmas above its median must be a finite float (a spread beyond
it overflows draws to inf: a configuration error, not a workload)."""


def check_tail(names: tuple[str, str], median: float, sigma: float) -> None:
    """:class:`FieldError` naming both fields when ``median * exp(TAIL_SIGMAS * sigma)``
    overflows; its ``field`` is the spread's (``names[1]``), the one to lower."""
    if median == 0:
        return
    try:
        top = median * math.exp(TAIL_SIGMAS * sigma)
    except OverflowError:
        top = math.inf
    if not top < math.inf:
        raise FieldError(
            f"{names[0]} ({shown(median)}) with {names[1]} ({shown(sigma)}): draws {TAIL_SIGMAS:g} sigmas "
            "above the median overflow to infinity",
            names[1],
        )


MAX_NESTING = 32
"""How deep a spec or scenario file (or a ``--set`` value) may nest arrays and tables. Real ones
nest three or four levels; a parser or a copy recursing through hundreds of levels would die of a
``RecursionError`` instead of naming the file."""


def nested_too_deep(data: object, limit: int = MAX_NESTING) -> bool:
    """Whether ``data``'s lists, tuples and dicts nest more than ``limit`` levels (walked without
    recursion, so any depth a parser returned is measured).

    A container met again (YAML aliases share one object) is walked again only from a greater depth
    than before, where its subtree could reach deeper: a few hundred bytes of aliases expand to 10**8
    leaves, which a walk of every path would visit. A self-referring alias deepens on every lap, so
    it is found too deep rather than walked forever."""
    stack: list[tuple[object, int]] = [(data, 0)]
    deepest: dict[int, int] = {}  # id of a container -> the greatest depth it was walked from
    while stack:
        node, depth = stack.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list | tuple) else None
        )
        if children is None:
            continue
        if depth >= limit:
            return True
        if deepest.get(id(node), -1) >= depth:
            continue
        deepest[id(node)] = depth
        stack.extend((child, depth + 1) for child in children)
    return False
