"""How the invariant kit fails: :class:`InvariantError`, naming the invariant and the evidence.

Its own module so that the kit's checks can live in several modules (:mod:`pipesim.testing.invariants`,
:mod:`pipesim.testing.slot_time`) and raise the one error; :mod:`pipesim.testing.invariants`
re-exports it.
"""

from __future__ import annotations

EPS = 1e-9


class InvariantError(AssertionError):
    """An invariant of the pipeline does not hold; the message names it and the evidence.

    ``err.invariant`` is the invariant's name (``"promised staleness bound"``, ``"promises
    hold"``), the part a program or a test reads, as ``FieldError.field`` is for a refusal: the
    evidence in the message may be reworded, the names stay."""

    def __init__(self, message: str, invariant: str = "") -> None:
        super().__init__(message)
        self.invariant = invariant

    def __reduce__(self) -> tuple[object, ...]:  # a sweep worker's failure crosses a process boundary
        return (type(self), (str(self), self.invariant))


def _fail(name: str, detail: str) -> None:
    raise InvariantError(f"invariant '{name}' violated: {detail}", name)
