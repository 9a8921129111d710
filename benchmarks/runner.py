"""The benchmark runner behind `python -m fastpad bench`.

For each layer of benchmarks/layers.py it times three variants on the same input, in one process:
- fastpad: the fused op;
- pad+conv: F.pad + F.conv* (transposed: the full F.conv_transpose* + crop), i.e. fastpad/reference.py;
- floor: torch's own conv with symmetric padding (max(lo, hi) per dimension; transposed: the nearest symmetric crop
  with output_padding), which reads the input without a padded copy: the time to beat for "padding is free".
The variants are interleaved (ABCABC...) after warm-up, and the median of the repeats is reported, for forward and
for forward+backward. CUDA times come from CUDA events. The error column is fastpad's relative error (by norm)
against the float64 reference on the same input: the output for forward, output and all gradients for fwd+bwd.
"""
import datetime
import fnmatch
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from fastpad._check import tolerance
from fastpad._report import markdown_table, text_table
from fastpad.reference import CONV_BY_DIMS, CONV_TRANSPOSE_BY_DIMS, output_and_grads, relative_error

from benchmarks.layers import SUITE, Layer

REPO_ROOT = Path(__file__).resolve().parent.parent
MODES = ("forward", "fwd+bwd")
BUSY_LOAD_AVERAGE = 0.5  # above this 1-minute load average, CPU timings are flagged as unreliable


@dataclass(frozen=True)
class Effort:
    """How long to measure each (layer, mode): a time budget bounded by a minimum and maximum repeat count."""
    warmup_rounds: int
    budget_seconds: float
    min_repeats: int
    max_repeats: int


FULL_EFFORT = Effort(warmup_rounds=2, budget_seconds=2.0, min_repeats=7, max_repeats=200)
QUICK_EFFORT = Effort(warmup_rounds=1, budget_seconds=0.8, min_repeats=3, max_repeats=20)


@dataclass
class Measurement:
    layer: str
    model: str
    shape: str
    mode: str
    fastpad_ms: float
    pad_conv_ms: float
    floor_ms: float
    repeats: int
    max_rel_error: float

    @property
    def ratio_to_pad_conv(self) -> float:
        return self.fastpad_ms / self.pad_conv_ms

    @property
    def ratio_to_floor(self) -> float:
        return self.fastpad_ms / self.floor_ms


# ---------------------------------------------------------------------------------------------------------------
# The three variants of one layer, each a function (x, weight, bias) -> output.


def variant_functions(layer: Layer) -> Dict[str, Callable]:
    """fastpad, F.pad + conv (fastpad/reference.py) and the symmetric-padding floor, each (x, weight, bias) -> y."""
    call = layer.call
    return {"fastpad": call.fastpad_function(), "pad+conv": call.reference_function(layer.spatial_size),
            "floor": floor_function(layer)}


def floor_function(layer: Layer) -> Callable:
    """torch's conv with symmetric padding: same work, no padded copy (the output may be one row larger)."""
    call = layer.call
    stride, dilation = call.per_dim(layer.stride), call.per_dim(layer.dilation)
    if layer.transposed:
        _, out_size = call.crops(layer.spatial_size)
        kernel_extent = layer.dilation * (layer.kernel - 1) + 1
        full = [(i - 1) * layer.stride + kernel_extent for i in layer.spatial_size]
        crops = [max(0, math.ceil((f - out) / 2)) for f, out in zip(full, out_size)]
        extra = [out - (f - 2 * crop) for f, out, crop in zip(full, out_size, crops)]
        extra = [e if 0 <= e < max(layer.stride, layer.dilation) else 0 for e in extra]
        conv_transpose = CONV_TRANSPOSE_BY_DIMS[layer.dims]
        return lambda x, w, b: conv_transpose(x, w, b, stride, crops, extra, layer.groups, dilation)
    symmetric = [max(lo, hi) for lo, hi in call.pads(layer.spatial_size)]
    conv = CONV_BY_DIMS[layer.dims]
    return lambda x, w, b: conv(x, w, b, stride, symmetric, dilation, layer.groups)


# ---------------------------------------------------------------------------------------------------------------
# Timing.


def timed_seconds(step: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def median_times_interleaved(steps: Dict[str, Callable[[], None]], device: torch.device,
                             effort: Effort) -> Tuple[Dict[str, float], int]:
    """Median seconds per step, with the steps run in turn (ABCABC...) so drift hits all of them alike."""
    for _ in range(effort.warmup_rounds):
        for step in steps.values():
            step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    samples = {name: [timed_seconds(step, device)] for name, step in steps.items()}
    one_round = sum(times[0] for times in samples.values())
    repeats = int(min(effort.max_repeats, max(effort.min_repeats, effort.budget_seconds / max(one_round, 1e-9))))
    for _ in range(repeats - 1):
        for name, step in steps.items():
            samples[name].append(timed_seconds(step, device))
    return {name: statistics.median(times) for name, times in samples.items()}, repeats


def forward_step(function: Callable, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
    def step():
        with torch.no_grad():
            function(*inputs)
    return step


def forward_backward_step(function: Callable, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
    leaves = [t.detach().requires_grad_() for t in inputs]
    with torch.no_grad():
        grad_output = torch.randn_like(function(*inputs))

    def step():
        for leaf in leaves:
            leaf.grad = None
        function(*leaves).backward(grad_output)
    return step


# ---------------------------------------------------------------------------------------------------------------
# One layer.


@dataclass(frozen=True)
class Settings:
    device: torch.device
    dtype: torch.dtype
    batch: Optional[int]
    channels_last: bool
    effort: Effort


def layer_inputs(layer: Layer, settings: Settings) -> List[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    batch = settings.batch or layer.batch
    x = torch.randn(layer.input_shape(batch), generator=generator)
    w = torch.randn(layer.weight_shape(), generator=generator) / math.sqrt(math.prod(layer.weight_shape()[1:]))
    inputs = [x, w] + ([torch.randn(layer.out_channels, generator=generator)] if layer.bias else [])
    inputs = [t.to(device=settings.device, dtype=settings.dtype) for t in inputs]
    if settings.channels_last and layer.dims > 1:
        memory_format = torch.channels_last if layer.dims == 2 else torch.channels_last_3d
        inputs[:2] = [t.contiguous(memory_format=memory_format) for t in inputs[:2]]
    return inputs


def with_optional_bias(function: Callable, layer: Layer) -> Callable:
    """Variants take (x, w, b); layers without bias get b=None and are called with (x, w)."""
    return function if layer.bias else (lambda x, w: function(x, w, None))


def errors_against_reference(layer: Layer, inputs: List[torch.Tensor]) -> Dict[str, float]:
    """fastpad's relative error against the float64 reference: output only, and output plus every gradient."""
    grad_output = {}

    def draw_grad_output(output):
        grad_output.setdefault("value", torch.randn_like(output))
        return grad_output["value"].to(output.dtype)

    functions = variant_functions(layer)
    fastpad_output, fastpad_grads = output_and_grads(with_optional_bias(functions["fastpad"], layer), inputs,
                                                     draw_grad_output)
    reference_output, reference_grads = output_and_grads(with_optional_bias(functions["pad+conv"], layer),
                                                         [t.double() for t in inputs], draw_grad_output)
    output_error = relative_error(fastpad_output, reference_output)
    grad_errors = [relative_error(mine, theirs) for mine, theirs in zip(fastpad_grads, reference_grads)]
    return {"forward": output_error, "fwd+bwd": max([output_error] + grad_errors)}


def measure_layer(layer: Layer, settings: Settings) -> List[Measurement]:
    inputs = layer_inputs(layer, settings)
    functions = {name: with_optional_bias(function, layer) for name, function in variant_functions(layer).items()}
    errors = errors_against_reference(layer, inputs)
    make_step = {"forward": forward_step, "fwd+bwd": forward_backward_step}
    measurements = []
    for mode in MODES:
        steps = {name: make_step[mode](function, inputs) for name, function in functions.items()}
        medians, repeats = median_times_interleaved(steps, settings.device, settings.effort)
        measurements.append(Measurement(
            layer=layer.name, model=layer.model, shape=layer.describe(settings.batch or layer.batch), mode=mode,
            fastpad_ms=1e3 * medians["fastpad"], pad_conv_ms=1e3 * medians["pad+conv"],
            floor_ms=1e3 * medians["floor"], repeats=repeats, max_rel_error=errors[mode]))
    return measurements


# ---------------------------------------------------------------------------------------------------------------
# The run: selection, context, tables.


def select_layers(pattern: Optional[str]) -> List[Layer]:
    """Layers whose name matches `pattern`: glob alternatives separated by '|', each matched anywhere in the name
    ('dw_k3*', 'stem|encodec'), or a regular expression after 're:' ('re:dw_k[35]s2')."""
    if not pattern:
        return list(SUITE)
    if pattern.startswith("re:"):
        expression = re.compile(pattern[len("re:"):])
        return [layer for layer in SUITE if expression.search(layer.name)]
    globs = [f"*{alternative}*" for alternative in pattern.split("|") if alternative]
    return [layer for layer in SUITE if any(fnmatch.fnmatchcase(layer.name, glob) for glob in globs)]


def git_commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "uncommitted working tree (no commit yet)"
    dirty = git("status", "--porcelain").stdout.strip()
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    cpu_model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu_model = names[0] if names else cpu_model
    return f"{cpu_model}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def run_context(settings: Settings) -> Dict[str, str]:
    return {
        "machine": machine_description(settings.device),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": git_commit(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(settings.device),
        "dtype": str(settings.dtype).replace("torch.", ""),
        "batch": "per layer" if settings.batch is None else str(settings.batch),
        "memory_format": "channels_last" if settings.channels_last else "contiguous",
        "effort": "quick" if settings.effort == QUICK_EFFORT else "full",
        # Other processes skew CPU timings; the 1-minute load average at the start (and end) says how busy it was.
        "load_average": current_load_average(),
    }


def current_load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "unknown"


TABLE_HEADERS = ["layer", "shape", "mode", "fastpad ms", "pad+conv ms", "floor ms", "fastpad/(pad+conv)",
                 "fastpad/floor", "max rel. error"]


def table_rows(measurements: Sequence[Measurement]) -> List[List[str]]:
    return [[m.layer, m.shape, m.mode, f"{m.fastpad_ms:.3f}", f"{m.pad_conv_ms:.3f}", f"{m.floor_ms:.3f}",
             f"{m.ratio_to_pad_conv:.2f}", f"{m.ratio_to_floor:.2f}", f"{m.max_rel_error:.1e}"]
            for m in measurements]


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary_lines(measurements: Sequence[Measurement]) -> List[str]:
    lines = []
    for mode in MODES:
        chosen = [m for m in measurements if m.mode == mode]
        if chosen:
            lines.append(f"{mode}: geomean fastpad/(pad+conv) = "
                         f"{geometric_mean([m.ratio_to_pad_conv for m in chosen]):.2f}, geomean fastpad/floor = "
                         f"{geometric_mean([m.ratio_to_floor for m in chosen]):.2f} over {len(chosen)} layers")
    return lines


def write_json(path: str, context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    rows = [dict(asdict(m), ratio_to_pad_conv=m.ratio_to_pad_conv, ratio_to_floor=m.ratio_to_floor)
            for m in measurements]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"context": context, "results": rows}, indent=2) + "\n")


def write_markdown(path: str, context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    title = f"### {context['device']}, {context['dtype']}, {context['memory_format']}, {context['date']}"
    details = "\n".join(f"- {key}: {value}" for key, value in context.items())
    summary = "\n".join(f"- {line}" for line in summary_lines(measurements))
    text = "\n\n".join([title, details, markdown_table(TABLE_HEADERS, table_rows(measurements)), summary])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text + "\n")


def main(device: Optional[str], dtype: str, batch: Optional[int], layers: Optional[str], channels_last: bool,
         quick: bool, json_path: Optional[str], markdown_path: Optional[str]) -> int:
    resolved_device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    settings = Settings(resolved_device, getattr(torch, dtype), batch, channels_last,
                        QUICK_EFFORT if quick else FULL_EFFORT)
    chosen = select_layers(layers)
    if not chosen:
        print(f"no layer matches {layers!r}; the suite has: {', '.join(layer.name for layer in SUITE)}",
              file=sys.stderr)
        return 2
    context = run_context(settings)
    print("fastpad bench: " + ", ".join(f"{key} {value}" for key, value in context.items()))
    if settings.device.type == "cpu" and context["load_average"] != "unknown" \
            and float(context["load_average"]) > BUSY_LOAD_AVERAGE:
        print(f"warning: load average {context['load_average']}: other processes are using the CPU, so these "
              "timings are unreliable; measure on an idle machine", file=sys.stderr)
    measurements, failed = [], []
    for index, layer in enumerate(chosen, start=1):
        started = time.perf_counter()
        print(f"[{index}/{len(chosen)}] {layer.name} ...", end=" ", file=sys.stderr, flush=True)
        try:
            measurements += measure_layer(layer, settings)
            print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        except Exception as exception:  # report the layer and go on with the rest of the suite
            print(f"FAILED: {type(exception).__name__}: {exception}", file=sys.stderr, flush=True)
            failed.append(layer.name)
    print(text_table(TABLE_HEADERS, table_rows(measurements)))
    print("\n".join(summary_lines(measurements)))
    limit = tolerance(str(settings.device), settings.dtype)
    inaccurate = sorted({m.layer for m in measurements if not m.max_rel_error <= limit})
    for problem, names in (("raised an exception", failed), ("exceeded the error tolerance", inaccurate)):
        if names:
            print(f"{len(names)} layer(s) {problem}: {', '.join(names)}")
    context["load_average_at_end"] = current_load_average()
    if json_path:
        write_json(json_path, context, measurements)
    if markdown_path:
        write_markdown(markdown_path, context, measurements)
    return 1 if failed or inaccurate else 0
