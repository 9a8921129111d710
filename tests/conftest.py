"""Shared fixtures: the devices to run on, a per-test seed, and gates for the slow, fuzz and bigmem markers."""

import os
import sys
import zlib

import pytest
import torch

from reference import DEVICES  # pytest puts this conftest's folder, tests/, on the import path


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def seed(request):
    """A fresh, reproducible seed per test (derived from its id), so every case draws new inputs."""
    value = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(value)
    return value


@pytest.fixture
def tf32():
    """torch.backends.cudnn.allow_tf32 on for one test (pytest_configure keeps it off)."""
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32 = False


def pytest_configure(config):
    # fp32 is judged to 1e-5 (docs/DESIGN.md section 7): keep TF32 out of both fastpad and torch on CUDA.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # torch.compile's tracing touches a deprecated torch.jit helper: not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


# Markers that only run when asked for: `-m <marker>` (any expression naming it), or the environment variable.
GATED_MARKERS = {
    "slow": ("FASTPAD_SLOW", "slow sweep"),
    "fuzz": ("FASTPAD_FUZZ", "long fuzz against the reference"),
    "bigmem": ("FASTPAD_BIGMEM", "tensors above 2^31 elements, about 20 GiB of memory"),
}


def pytest_collection_modifyitems(config, items):
    """Gated tests run only when asked for: `-m slow`, or FASTPAD_SLOW=1 (likewise fuzz and bigmem)."""
    markexpr = config.getoption("markexpr") or ""
    for marker, (variable, what) in GATED_MARKERS.items():
        if os.environ.get(variable) == "1" or marker in markexpr:
            continue
        skip = pytest.mark.skip(reason=f"{what}: run with -m {marker} or {variable}=1")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    """The fuzz tests' counts, worst errors per dtype and seeds (tests/test_fuzz.py)."""
    fuzz = sys.modules.get("fuzz")
    if fuzz is not None and fuzz.REPORTS:
        terminalreporter.section("fuzz against the reference")
        for report in fuzz.REPORTS:
            terminalreporter.write_line(report.summary())
