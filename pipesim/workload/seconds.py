"""Arrays of durations a user hands in: what counts as a number of seconds.

A pool given to ``pipesim.run``, a trace column (:class:`~pipesim.workload.durations.TraceDurations`)
and a saved run's ``duration_s`` are checked here, the same way, before any simulation: numpy
turns booleans, text digits, dates and timedeltas into floats without complaint, and a NaN or a
negative time would run and give silently wrong numbers. Each refusal is a
:class:`~pipesim.core.validate.FieldError` naming the argument and the first bad index. Apart from
the duration models because it is their input's contract, not a model.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import numpy.typing as npt

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse

__all__ = ["Array", "as_durations", "check_durations"]

Array = npt.NDArray[np.float64]

_NOT_SECONDS = (bool, np.bool_, str, bytes, np.datetime64, np.timedelta64, dt.datetime, dt.date, dt.timedelta)
"""What numpy turns into a float without complaint but is not a number of seconds."""


def as_durations(values: npt.ArrayLike, name: str = "durations") -> Array:
    """``values`` as a checked one-dimensional float64 array (see :func:`check_durations`).

    Takes lists, numpy arrays and CPU torch tensors alike (through ``numpy.asarray``; torch is not
    imported). A float32 tensor's values convert exactly, so a pool gives the same run either way.
    """
    if isinstance(values, np.ma.MaskedArray):
        raise refuse(
            name, "is a masked array: fill or drop its masked values first (.filled(x) or .compressed())"
        )
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged, or not array-like
        raise refuse(name, f"must be a sequence of numbers: {exc}") from None
    if raw.dtype.kind not in "fiuO":  # complex, datetime, timedelta, bool, text: not seconds
        raise refuse(name, f"must hold real numbers of seconds, got dtype {raw.dtype}")
    if raw.dtype.kind == "O" or isinstance(values, list | tuple):  # numpy converts these silently
        items = raw.ravel().tolist() if raw.dtype.kind == "O" else values
        for i, x in enumerate(items):  # type: ignore[arg-type]
            if isinstance(x, _NOT_SECONDS):
                raise FieldError(
                    f"{name}[{i}] = {shown(x)}: durations must be real numbers of seconds", f"{name}[{i}]"
                )
    try:
        t = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:  # objects that are not numbers
        raise refuse(name, f"must be a sequence of numbers: {exc}") from None
    if t.ndim != 1:
        raise refuse(name, f"must be one-dimensional, got shape {tuple(t.shape)}")
    bad = ~np.isfinite(t) | (t < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FieldError(
            f"{name}[{i}] = {shown(float(t[i]))}: durations must be finite and >= 0", f"{name}[{i}]"
        )
    return t


def check_durations(values: npt.ArrayLike, name: str = "durations") -> None:
    """Raise ValueError naming ``name`` and the first bad index if any value is NaN, inf or < 0."""
    as_durations(values, name)
