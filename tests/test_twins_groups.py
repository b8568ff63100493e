"""A batch of whole prompt groups is checked once (:func:`pipesim.policies.bookkeeping.check_whole_groups`):
the scenario asks it at construction, and the group book asks it again for a pipeline built some
other way. The book had its own copy of the check, which refused the same batch naming
``batch_size`` where the scenario names ``samples_per_group``."""

from __future__ import annotations

import pytest

from pipesim.core.validate import FieldError
from pipesim.policies.bookkeeping import GroupBook, check_whole_groups, group_book


class _Run:
    """What the book is keyed by: a run's pipeline (weakly referenced)."""


@pytest.mark.parametrize(("batch_size", "n"), [(5, 2), (7, 3), (4, 8), (9, 6)])
def test_the_book_refuses_what_the_scenario_refuses_naming_the_same_field(batch_size: int, n: int) -> None:
    with pytest.raises(FieldError) as built:
        check_whole_groups(batch_size, n)
    with pytest.raises(FieldError) as mid_run:
        group_book(_Run(), n, batch_size, "VerlMessageQueue")  # type: ignore[arg-type]
    assert built.value.field == mid_run.value.field == "samples_per_group"
    assert "VerlMessageQueue" in str(mid_run.value)  # the rule that asked


@pytest.mark.parametrize(("batch_size", "n"), [(6, 3), (4, 1), (8, 8)])
def test_the_book_takes_what_the_scenario_takes(batch_size: int, n: int) -> None:
    check_whole_groups(batch_size, n)
    run = _Run()
    book = group_book(run, n, batch_size, "RollReplayBuffer")  # type: ignore[arg-type]
    assert isinstance(book, GroupBook) and book.n == n
    again = group_book(run, n, batch_size, "RollReplayBuffer")  # type: ignore[arg-type]
    assert again is book  # one book a run
