"""The examples in the public docstrings run and print what they say."""
import doctest
import importlib

import pytest
import torch
from torch import nn

MODULES = ["fastpad.functional", "fastpad.nn", "fastpad._geometry", "fastpad._convert"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    globs = {**vars(module), "torch": torch, "nn": nn}
    result = doctest.testmod(module, globs=globs, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0
