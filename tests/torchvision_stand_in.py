"""A stand-in for torchvision, so that timm imports on machines without a torchvision build (CPU-only torch).

timm imports torchvision at module level (transforms, datasets, FrozenBatchNorm2d) but the tf_* models never call
it. `install()` registers a `torchvision` package whose every module and attribute is a placeholder; using one
raises, so a model that really needs torchvision fails loudly instead of computing something else.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


class _PlaceholderMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}")


def _placeholder(qualname: str) -> type:
    def refuse(*args, **kwargs):
        raise RuntimeError(f"{qualname} comes from the torchvision stand-in: install torchvision to use it")

    return _PlaceholderMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname, "__init__": refuse})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{self.__name__}.{name}")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        # Below every real release, so that libraries that check torchvision's version (transformers does, when it
        # is imported after this is installed) take their paths without it.
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module):
        pass


def install() -> None:
    """Makes `import torchvision...` succeed with placeholders, unless a real torchvision is importable."""
    if importlib.util.find_spec("torchvision") is None:
        sys.meta_path.append(_StandInFinder())
