"""Shared test setup: Hypothesis profiles.

``ci`` (used by ``make test``) is derandomized with a bounded number of examples and no deadline,
so a CI run is reproducible on a loaded 2-core machine. ``dev`` draws fresh random examples; run
it locally with ``HYPOTHESIS_PROFILE=dev pytest``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=40,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
