"""argparse ``type=`` functions for bounded integer flags: a word, zero, a negative count or a
size that would run for hours or fill memory is argparse's usage error naming the flag (exit 2),
before any work starts. The benchmarks' flags use them (``benchmarks/``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["int_in", "int_list"]


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type=``: an integer from ``lo`` to ``hi``; anything else (a word, zero, a
    negative count, a size that would run for hours or fill memory) is argparse's usage error
    naming the flag (exit 2), before any work starts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not an integer (int() also refuses over 4,300 digits)
            value = lo - 1
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer from {lo:,} to {hi:,}, got {text!r}")
        return value

    return parse


def int_list(lo: int, hi: int) -> Callable[[str], list[int]]:
    """An argparse ``type=``: comma-separated integers, each from ``lo`` to ``hi``."""
    each = int_in(lo, hi)

    def parse(text: str) -> list[int]:
        try:
            return [each(s) for s in text.split(",")]
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (in {text!r})" if "," in text else str(exc)) from None

    return parse
