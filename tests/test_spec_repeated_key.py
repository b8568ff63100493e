"""A plan or run spec's TOML key given twice was "not valid TOML: Cannot overwrite a value (at
line 4, column 12)"; it is named by its dotted path, as a scenario file's is."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.plan import specfile
from pipesim.plan.checks import PlanError


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[cluster]\ngpu = "h100-sxm"\nn_gpus = 8\nn_gpus = 16\n', "cluster.n_gpus"),
        ('kind = "compute"\nkind = "compute"\n', "kind"),
        ("[search]\nsteps = 4\n[cluster]\nn_gpus = 8\n[search]\nseeds = 2\n", None),  # a table twice
    ],
)
def test_a_repeated_key_is_named(text: str, key: str | None, tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    with pytest.raises(PlanError) as info:
        specfile.read(path)
    if key is None:  # tomllib names a repeated table itself
        assert "not valid TOML" in str(info.value)
    else:
        assert info.value.field == key and f"{key}: the key is given twice" in str(info.value)
