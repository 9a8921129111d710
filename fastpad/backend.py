"""`torch.compile(model, backend="fastpad")`: inductor, after fusing every pad into its convolution.

The backend is registered under the `torch_dynamo_backends` entry point (pyproject.toml), so the name works right
after `pip install`, with no `import fastpad` in the model's code. It rewrites the graph Dynamo captured
(fastpad/_graph_fusion.py) and hands it to inductor, which compiles everything else as usual. The fastpad ops carry
their own autograd, so a training graph is fused in the backward too.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

from torch import fx

from ._graph_fusion import count_pad_ops, fuse_padded_convolutions


def compile_backend(graph_module: fx.GraphModule, example_inputs: Sequence[Any], *, mode: Optional[str] = None,
                    options: Optional[Dict[str, Any]] = None, verbose: bool = False) -> Callable:
    """A torch.compile backend: fuses the pads of `graph_module` into fastpad convolutions, then compiles it with
    inductor.

    `mode` and `options` are inductor's, as `torch.compile(model, backend="fastpad", mode=..., options=...)` passes
    them. verbose: print what was fused in each graph. For options of your own, pass a partial:

    >>> import functools
    >>> backend = functools.partial(compile_backend, verbose=True)   # torch.compile(model, backend=backend)
    """
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx

    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"fastpad.compile_backend: mode must be a str (inductor's modes), got {mode!r}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"fastpad.compile_backend: options must be a dict of inductor options, got {options!r}")
    fusions = fuse_padded_convolutions(graph_module, inductor_layout=True)
    if verbose:
        print(f"fastpad backend: {len(fusions.replaced)} fused, {len(fusions.skipped)} left as they were, "
              f"{count_pad_ops(graph_module.graph)} pad ops left in the graph")
        for replacement in fusions.replaced:
            print(f"  fused   {replacement}")
        for node, reason in fusions.skipped:
            print(f"  skipped {node}: {reason}")
    config_patches = {**(list_mode_options(mode) if mode not in (None, "default") else {}), **(options or {})}
    return compile_fx(graph_module, example_inputs, config_patches=config_patches)
