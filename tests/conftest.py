"""Shared fixtures: the devices to run on, a per-test seed, and a gate for @pytest.mark.slow."""

import os
import sys
import zlib

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

from reference import DEVICES  # noqa: E402


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def seed(request):
    """A fresh, reproducible seed per test (derived from its id), so every case draws new inputs."""
    value = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(value)
    return value


def pytest_configure(config):
    # fp32 is judged to 1e-5 (DESIGN.md section 7): keep TF32 out of both fastpad and torch on CUDA.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # torch.compile's tracing touches a deprecated torch.jit helper: not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


def pytest_collection_modifyitems(config, items):
    """Slow sweeps run only when asked for: `-m slow`, or FASTPAD_SLOW=1."""
    if os.environ.get("FASTPAD_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow sweep: run with -m slow or FASTPAD_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
