"""``--policies FILE`` whose class misspells its method (``admit`` for ``admits``) says which class
lacks what, and the role it came closest to; it said only "defines no policy class"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipesim.core.validate import FieldError
from pipesim.policies.catalog import register_module

SOURCE = """
from dataclasses import dataclass

@dataclass(frozen=True)
class Bad:
    def admit(self, p):
        return True
"""


def test_a_misspelt_method_is_named_with_the_class_and_the_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "badpol_hint.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(FieldError) as e:
            register_module("badpol_hint")
    finally:
        sys.modules.pop("badpol_hint", None)
    assert e.value.field == "module"
    message = str(e.value)
    assert "Bad lacks admits (it has admit)" in message and "admission" in message
