"""An unknown policy's error tells a user where the Python registration lives: the dotted path it
names imports and is the function that makes the class known."""

from __future__ import annotations

import importlib
import re

import pytest

from pipesim.policies import catalog


def test_the_unknown_policy_error_names_an_importable_register_function() -> None:
    with pytest.raises(catalog.UnknownPolicyError) as info:
        catalog.lookup("NoSuchPolicyAnywhere")
    assert info.value.field == "type"
    found = re.search(r"(pipesim(?:\.\w+)+\.register_module)\(", str(info.value))
    assert found, str(info.value)
    module, _, name = found.group(1).rpartition(".")
    assert getattr(importlib.import_module(module), name) is catalog.register_module
