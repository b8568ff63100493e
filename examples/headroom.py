"""An admission policy of your own, in one file, named from the command line with --policies.

pipesim run synchronous --policies examples/headroom.py --set 'admission=HeadroomThrottle(headroom=8)'
"""

from __future__ import annotations

from dataclasses import dataclass

import pipesim


@dataclass(frozen=True)
class HeadroomThrottle:
    """Admit while live episodes < (v + 1) * B + headroom; dropped episodes free their place."""

    headroom: int = 4

    def __post_init__(self) -> None:
        if isinstance(self.headroom, bool) or not isinstance(self.headroom, int) or self.headroom < 0:
            raise ValueError(f"headroom must be an integer >= 0, got {self.headroom!r}")

    def admits(self, p: pipesim.PipelineView) -> bool:
        return p.started - p.n_dropped < (p.version + 1) * p.batch_size + self.headroom
