"""The benchmark runner behind `python -m fastpad bench`.

For each layer of fastpad/bench/layers.py it times these variants on the same input, in one process:
- fastpad: the fused op;
- pad+conv: F.pad + F.conv* (transposed: the full F.conv_transpose* + crop), i.e. fastpad/reference.py;
- floor: torch's own conv with symmetric padding (max(lo, hi) per dimension; transposed: the nearest symmetric crop
  with output_padding), which reads the input without a padded copy: the time to beat for "padding is free";
- and, unless `--peers none`, two peers (fastpad/bench/peers.py): compile, torch.compile (inductor, dynamic=False)
  of the pad+conv function, compiled per layer and mode before the warm-up; and onnxruntime, forward on the CPU only,
  one ONNX Conv (ConvTranspose) node with the layer's pads as attributes (padding mode "zeros" only; a float32 model
  for bfloat16 runs, none for float64, which ONNX Runtime's CPU Conv lacks; always NCHW input). Each peer's first
  output is checked against the float64 reference: a wrong peer is reported, never timed.
The variants are interleaved (ABCABC...) after warm-up, and the median of the repeats is reported, for forward and
for forward+backward. One such run of a (layer, mode) on a shared machine moves by 15-40%, so at full effort every
row whose fastpad/(pad+conv) ratio exceeds RECHECK_ABOVE is timed again after the last layer, Effort.rechecks more
times, and reports its median run (the JSON's `runs` lists every run's ratio, in the order run). CUDA times come
from CUDA events. The error column is fastpad's relative error (by norm) against the float64 reference on the same
input: the output for forward, output and all gradients for fwd+bwd. The columns fastpad/compile and fastpad/ORT
are the time ratios to the peers ('-' where a peer has no time: the run context says why), and the JSON has each
peer's milliseconds (compile_ms, onnxruntime_ms). On the CPU, where the extension has
torch.ops.fastpad._cpu_fma_peak, the header gives the float32 FMA peak of torch's threads, and the "% peak" column
of the forward rows is fastpad's 2 * multiply-adds / time as a share of it.

While the suite runs, a progress line on stderr shows the layer and mode, the elapsed time and an ETA (redrawn in
place on a terminal; one plain line per finished layer in CI logs and pipes). The results are printed as a table and
written as JSON, a markdown table and a PNG bar chart of the ratios (the chart needs matplotlib, an optional
dependency: `pip install matplotlib`); by default all three go to fastpad-bench/bench-<device>-<dtype>-<memory
format>.{json,md,png} in the current directory.
"""
import datetime
import fnmatch
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, TextIO, Tuple

import torch

from fastpad._info import cpu_model_and_features, source_description
from fastpad._report import markdown_table, text_table
from fastpad.bench import peers as peer_tools
from fastpad.bench.layers import SUITE, Layer
from fastpad.bench.random_layers import random_layers
from fastpad.cases import ConvCase, arrange, dtype_name
from fastpad.reference import CONV_BY_DIMS, CONV_TRANSPOSE_BY_DIMS, output_and_grads, relative_error, tolerance

DEFAULT_OUT_DIR = Path("fastpad-bench")
MODES = ("forward", "fwd+bwd")
BUSY_LOAD_AVERAGE = 0.5  # above this 1-minute load average, CPU timings are flagged as unreliable
FMA_PEAK_SECONDS = 0.3


@dataclass(frozen=True)
class Effort:
    """How long to measure each (layer, mode): a time budget bounded by a minimum and maximum repeat count."""
    warmup_rounds: int
    budget_seconds: float
    min_repeats: int
    max_repeats: int
    rechecks: int = 0  # more runs of each row above RECHECK_ABOVE, after the last layer (the bench alone)


FULL_EFFORT = Effort(warmup_rounds=2, budget_seconds=2.0, min_repeats=7, max_repeats=200, rechecks=2)
QUICK_EFFORT = Effort(warmup_rounds=1, budget_seconds=0.8, min_repeats=3, max_repeats=20, rechecks=0)
# The fastpad/(pad+conv) ratio above which a row is timed again: near parity, not only above it, so that a row
# whose first run came out low by chance is not left out of the loser list either.
RECHECK_ABOVE = 0.95


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
    compile_ms: Optional[float] = None  # None: not timed (--peers none, or the peer could not run the layer)
    onnxruntime_ms: Optional[float] = None
    percent_of_fma_peak: Optional[float] = None  # forward rows on the CPU, where the FMA peak was measured
    runs: List[float] = field(default_factory=list)  # fastpad/(pad+conv) of every run of the row, in the order run

    @property
    def ratio_to_pad_conv(self) -> float:
        return self.fastpad_ms / self.pad_conv_ms

    @property
    def ratio_to_floor(self) -> float:
        return self.fastpad_ms / self.floor_ms

    @property
    def ratio_to_compile(self) -> Optional[float]:
        return None if self.compile_ms is None else self.fastpad_ms / self.compile_ms

    @property
    def ratio_to_onnxruntime(self) -> Optional[float]:
        return None if self.onnxruntime_ms is None else self.fastpad_ms / self.onnxruntime_ms


# ---------------------------------------------------------------------------------------------------------------
# The three variants of one layer, each a function (x, weight, bias) -> output.


def variant_functions(case: ConvCase) -> Dict[str, Callable]:
    """fastpad, F.pad + conv (fastpad/reference.py) and the symmetric-padding floor, each (x, weight, bias) -> y."""
    return {"fastpad": case.fastpad_function(), "pad+conv": case.reference_function(), "floor": floor_function(case)}


def floor_function(case: ConvCase) -> Callable:
    """torch's conv with symmetric padding: same work, no padded copy (the output may be one row larger)."""
    stride, dilation = case.per_dim(case.stride), case.per_dim(case.dilation)
    if case.transposed:
        _, out_size = case.crops()
        full = [(i - 1) * s + d * (k - 1) + 1
                for i, k, s, d in zip(case.size, case.per_dim(case.kernel), stride, dilation)]
        crops = [max(0, math.ceil((f - out) / 2)) for f, out in zip(full, out_size)]
        extra = [out - (f - 2 * crop) for f, out, crop in zip(full, out_size, crops)]
        extra = [e if 0 <= e < max(s, d) else 0 for e, s, d in zip(extra, stride, dilation)]
        conv_transpose = CONV_TRANSPOSE_BY_DIMS[case.dims]
        return lambda x, w, b: conv_transpose(x, w, b, stride, crops, extra, case.groups, dilation)
    symmetric = [max(lo, hi) for lo, hi in case.pads()]
    conv = CONV_BY_DIMS[case.dims]
    return lambda x, w, b: conv(x, w, b, stride, symmetric, dilation, case.groups)


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


def median_times_interleaved(steps: Dict[str, Callable[[], None]], device: torch.device, effort: Effort,
                             settled: Sequence[str] = ()) -> Tuple[Dict[str, float], int]:
    """Median seconds per step, with the steps run in turn (ABCABC...) so drift hits all of them alike.

    A step named in `settled` runs once untimed right before each of its timed runs. This is for a step with its own
    thread pool (onnxruntime): each time the turn passes between it and torch's OpenMP pool, the first call meets the
    other pool's threads still spin-waiting on the same cores (measured on 2 cores, a 4x128x56x56 k3 s2 conv: ORT 7.0
    ms in a block of its own calls, 13.5 ms interleaved with fastpad; and with ORT's spinning on, fastpad 8.6 ms became
    21.6 ms)."""
    for _ in range(effort.warmup_rounds):
        for step in steps.values():
            step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)

    def sample(name: str, step: Callable[[], None]) -> float:
        if name in settled:
            step()
        return timed_seconds(step, device)

    samples = {name: [sample(name, step)] for name, step in steps.items()}
    one_round = sum(times[0] for times in samples.values())
    repeats = int(min(effort.max_repeats, max(effort.min_repeats, effort.budget_seconds / max(one_round, 1e-9))))
    for _ in range(repeats - 1):
        for name, step in steps.items():
            samples[name].append(sample(name, step))
    return {name: statistics.median(times) for name, times in samples.items()}, repeats


def forward_step(function: Callable, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
    def step():
        with torch.no_grad():
            function(*inputs)
    return step


def forward_backward_step(function: Callable, inputs: Sequence[torch.Tensor],
                          grad_output: Optional[torch.Tensor] = None) -> Callable[[], None]:
    leaves = [t.detach().requires_grad_() for t in inputs]
    if grad_output is None:
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
    peers: str = "all"  # or "none": no compile or onnxruntime columns
    fma_peak_gflops: Optional[float] = None  # float32 FMA peak of torch's threads, where measured


def layer_case(layer: Layer, settings: Settings) -> ConvCase:
    """The layer's case in the run's dtype and batch (the layer's own unless --batch), channels_last where the run
    asks for it or the layer has it (a random layer draws its own)."""
    wants_channels_last = settings.channels_last or layer.case.layout == "channels_last"
    layout = "channels_last" if wants_channels_last and layer.case.dims > 1 else "contiguous"
    return replace(layer.case, batch=settings.batch or layer.case.batch, layout=layout,
                   dtype=dtype_name(settings.dtype))


def case_inputs(case: ConvCase, device: torch.device) -> List[torch.Tensor]:
    """Seeded (x, weight[, bias]) with the weight scaled to unit output variance; weight in the input's layout."""
    weight_shape = case.weight_shape()
    x, w, b = case.random_inputs(torch.Generator().manual_seed(0), device,
                                 weight_scale=1 / math.sqrt(math.prod(weight_shape[1:])))
    return [x, arrange(w, case.layout)] + ([b] if case.bias else [])


def with_optional_bias(function: Callable, case: ConvCase) -> Callable:
    """Variants take (x, w, b); cases without bias get b=None and are called with (x, w)."""
    return function if case.bias else (lambda x, w: function(x, w, None))


def errors_against_reference(case: ConvCase, inputs: List[torch.Tensor]) -> Dict[str, float]:
    """fastpad's relative error against the float64 reference: output only, and output plus every gradient."""
    grad_output = {}

    def draw_grad_output(output):
        grad_output.setdefault("value", torch.randn_like(output))
        return grad_output["value"].to(output.dtype)

    functions = variant_functions(case)
    fastpad_output, fastpad_grads = output_and_grads(with_optional_bias(functions["fastpad"], case), inputs,
                                                     draw_grad_output)
    reference_output, reference_grads = output_and_grads(with_optional_bias(functions["pad+conv"], case),
                                                         [t.double() for t in inputs], draw_grad_output)
    output_error = relative_error(fastpad_output, reference_output)
    grad_errors = [relative_error(mine, theirs) for mine, theirs in zip(fastpad_grads, reference_grads)]
    return {"forward": output_error, "fwd+bwd": max([output_error] + grad_errors)}


class PeerNotes:
    """Why the peers have no time for some (layer, mode): each distinct reason once, with where it happened."""
    SHOWN_PLACES = 5

    def __init__(self):
        self.places: Dict[Tuple[str, str], List[str]] = {}  # (peer, reason) -> ['layer mode', ...]
        self.wrong: List[str] = []  # 'peer on layer mode', for each wrong output

    def attempt(self, peer: str, place: str, build: Callable):
        """build() (a step or peer object), or None, with the reason noted, where the peer cannot run the layer."""
        try:
            return build()
        except peer_tools.PeerUnavailable as reason:
            self.note(peer, str(reason), place)
        except peer_tools.PeerWrong as reason:
            self.wrong.append(f"{peer} on {place}")
            self.note(peer, f"WRONG OUTPUT, not timed: {reason}", place)
        except Exception as error:  # e.g. no C++ compiler for inductor: the column shows '-' and the run goes on
            text = str(error).strip()
            self.note(peer, f"{type(error).__name__}: {text.splitlines()[0][:300] if text else ''}", place)
        return None

    def note(self, peer: str, reason: str, place: str) -> None:
        self.places.setdefault((peer, reason), []).append(place)

    def context_entries(self) -> Dict[str, str]:
        """e.g. {'onnxruntime not timed': "padding_mode 'reflect' needs ... (encodec.conv1d_k8s4_reflect forward)"}"""
        entries: Dict[str, List[str]] = {}
        for (peer, reason), places in self.places.items():
            shown = ", ".join(places[:self.SHOWN_PLACES])
            more = f" and {len(places) - self.SHOWN_PLACES} more" if len(places) > self.SHOWN_PLACES else ""
            entries.setdefault(f"{peer} not timed", []).append(f"{reason} ({shown}{more})")
        return {key: "; ".join(reasons) for key, reasons in entries.items()}


def reference_output(case: ConvCase, inputs: List[torch.Tensor]) -> torch.Tensor:
    """The float64 reference output on `inputs`, which the peers' outputs are checked against."""
    with torch.no_grad():
        return with_optional_bias(case.reference_function(), case)(*[t.double() for t in inputs])


def compile_step(function: Callable, inputs: List[torch.Tensor], mode: str, expected: torch.Tensor,
                 limit: float) -> Callable[[], None]:
    """The timed step of torch.compile(function) in `mode`, compiled here by one call (forward: its output checked
    against `expected`; fwd+bwd: forward and backward once), so the compile time stays out of the timing."""
    compiled = peer_tools.compiled(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "forward":
            with torch.no_grad():
                output = compiled(*inputs)
            peer_tools.check_output("compile", output, expected, limit)
            return forward_step(compiled, inputs)
        # A grad_output of the reference's shape: drawing it from compiled() itself would compile a no-grad graph too.
        grad_output = torch.randn(expected.shape, dtype=inputs[0].dtype, device=inputs[0].device)
        step = forward_backward_step(compiled, inputs, grad_output)
        step()
        return step


# The convolutions one step of each mode runs: the forward, and with the backward also the input gradient and the
# weight gradient, each as many multiply-adds as the forward (the bias gradient's sum is not counted).
CONVOLUTIONS_PER_STEP = {"forward": 1, "fwd+bwd": 3}


def fma_peak_percent(case: ConvCase, mode: str, fastpad_ms: float, peak_gflops: Optional[float]) -> Optional[float]:
    """fastpad's FLOP/s in one step of `mode` (2 per multiply-add) as a percentage of the FMA peak."""
    if not peak_gflops:
        return None
    flops = 2 * CONVOLUTIONS_PER_STEP[mode] * peer_tools.multiply_adds(case)
    return 100 * flops / (fastpad_ms * 1e-3) / (peak_gflops * 1e9)


def measure_layer(layer: Layer, settings: Settings, on_phase: Callable[[str], None],
                  notes: Optional[PeerNotes] = None, modes: Sequence[str] = MODES) -> List[Measurement]:
    """Timings of the variants in each of `modes` (forward, fwd+bwd), with fastpad's error. on_phase(name) is called
    as each phase starts: 'error check', then each mode (with the peers, '<mode> compile' before it). The peers run
    where settings.peers is 'all' and they can; `notes` collects why not."""
    case = layer_case(layer, settings)
    inputs = case_inputs(case, settings.device)
    functions = {name: with_optional_bias(function, case) for name, function in variant_functions(case).items()}
    on_phase("error check")
    errors = errors_against_reference(case, inputs)
    with_peers = settings.peers == "all"
    notes = notes if notes is not None else PeerNotes()
    onnxruntime = None
    if with_peers:
        expected = reference_output(case, inputs)
        if settings.device.type == "cpu" and peer_tools.onnxruntime_version():  # else the run context says why not
            onnxruntime = notes.attempt("onnxruntime", f"{layer.name} forward", lambda: peer_tools.onnxruntime_conv(
                case, inputs, expected, torch.get_num_threads()))
    make_step = {"forward": forward_step, "fwd+bwd": forward_backward_step}
    measurements = []
    for mode in modes:
        steps = {name: make_step[mode](function, inputs) for name, function in functions.items()}
        if with_peers:
            on_phase(f"{mode} compile")
            step = notes.attempt("compile", f"{layer.name} {mode}", lambda: compile_step(
                functions["pad+conv"], inputs, mode, expected, tolerance(settings.dtype, settings.device)))
            if step is not None:
                steps["compile"] = step
            if mode == "forward" and onnxruntime is not None:
                steps["onnxruntime"] = onnxruntime.run
        on_phase(mode)
        medians, repeats = median_times_interleaved(steps, settings.device, settings.effort, settled=["onnxruntime"])
        milliseconds = {name: 1e3 * seconds for name, seconds in medians.items()}
        measurements.append(Measurement(
            layer=layer.name, model=layer.model, mode=mode,
            shape=case.shape_text() + (" channels_last" if case.layout == "channels_last" else ""),
            fastpad_ms=milliseconds["fastpad"], pad_conv_ms=milliseconds["pad+conv"],
            floor_ms=milliseconds["floor"], repeats=repeats, max_rel_error=errors[mode],
            compile_ms=milliseconds.get("compile"), onnxruntime_ms=milliseconds.get("onnxruntime"),
            percent_of_fma_peak=fma_peak_percent(case, mode, milliseconds["fastpad"], settings.fma_peak_gflops),
            runs=[milliseconds["fastpad"] / milliseconds["pad+conv"]]))
    return measurements


def median_run(runs: Sequence[Measurement]) -> Measurement:
    """The run of a row whose fastpad/(pad+conv) is the median (the lower middle of an even count), holding every
    run's ratio in the order run."""
    middle = sorted(runs, key=lambda m: m.ratio_to_pad_conv)[(len(runs) - 1) // 2]
    return replace(middle, runs=[m.ratio_to_pad_conv for m in runs])


def rechecked(measurements: Sequence[Measurement], layers: Sequence[Layer], settings: Settings, notes: PeerNotes,
              stream: TextIO) -> List[Measurement]:
    """The measurements with each row above RECHECK_ABOVE replaced by its median run of 1 + settings.effort.rechecks
    (the runs after the first made now, the row's layer and mode alone; a run that raises is left out)."""
    due = [m for m in measurements if m.ratio_to_pad_conv > RECHECK_ABOVE] if settings.effort.rechecks else []
    if not due:
        return list(measurements)
    by_name = {layer.name: layer for layer in layers}
    progress = Progress(len(due), stream)
    replaced = {}
    for index, first in enumerate(due, start=1):
        progress.start_layer(index, f"{first.layer} {first.mode} (recheck)")
        runs = [first]
        for _ in range(settings.effort.rechecks):
            try:
                runs += measure_layer(by_name[first.layer], settings, progress.start_phase, notes, modes=[first.mode])
            except Exception as exception:  # keep the runs made; the first run already stands for the row
                progress.write(f"({type(exception).__name__}: {exception}) ")
        progress.finish_layer()
        replaced[(first.layer, first.mode)] = median_run(runs)
    progress.close()
    return [replaced.get((m.layer, m.mode), m) for m in measurements]


# ---------------------------------------------------------------------------------------------------------------
# Progress.


def minutes_seconds(seconds: float) -> str:
    """e.g. '2:05'"""
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d}"


class Progress:
    """The suite's progress on `stream`. On a terminal, one line redrawn in place at the start of each phase of a layer
    (error check, each mode; never inside a timed loop): [k/N], a bar, the layer, the phase, the elapsed time and an
    ETA from the layers done. Elsewhere (CI logs, pipes), one plain line per layer: '[k/N] name ... 4.1 s'."""
    BAR_WIDTH = 20

    def __init__(self, total: int, stream: TextIO):
        self.total, self.stream = total, stream
        self.in_place = stream.isatty()
        self.started = self.layer_started = time.perf_counter()
        self.index, self.finished, self.name = 0, 0, ""
        self.drawn_width = 0  # of the line now on the terminal, which the next draw must cover

    def start_layer(self, index: int, name: str) -> None:
        self.index, self.name, self.layer_started = index, name, time.perf_counter()
        if not self.in_place:
            self.write(f"[{index}/{self.total}] {name} ... ")

    def start_phase(self, phase: str) -> None:
        if self.in_place:
            self.draw(phase)

    def finish_layer(self, failure: Optional[str] = None) -> None:
        self.finished += 1
        outcome = f"FAILED: {failure}" if failure else f"{time.perf_counter() - self.layer_started:.1f} s"
        if not self.in_place:
            self.write(outcome + "\n")
        elif failure:  # failures stay on the terminal, above the progress line
            self.replace_line(f"[{self.index}/{self.total}] {self.name} {outcome}", end="\n")

    def close(self) -> None:
        if self.in_place:
            elapsed = minutes_seconds(time.perf_counter() - self.started)
            self.replace_line(f"[{self.finished}/{self.total}] done in {elapsed}", end="\n")

    def draw(self, phase: str) -> None:
        elapsed = time.perf_counter() - self.started
        eta = minutes_seconds(elapsed / self.finished * (self.total - self.finished)) if self.finished else "?"
        filled = round(self.BAR_WIDTH * self.finished / self.total)
        bar = "#" * filled + "." * (self.BAR_WIDTH - filled)
        line = f"[{self.index}/{self.total}] [{bar}] {self.name} {phase}  {minutes_seconds(elapsed)}, ETA {eta}"
        self.replace_line(line[:shutil.get_terminal_size().columns - 1])  # a wrapped line could not be redrawn

    def replace_line(self, text: str, end: str = "") -> None:
        self.write("\r" + text.ljust(self.drawn_width) + end)
        self.drawn_width = 0 if end else len(text)

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


# ---------------------------------------------------------------------------------------------------------------
# The run: selection, context, tables, output files.


def select_layers(candidates: Sequence[Layer], pattern: Optional[str]) -> List[Layer]:
    """Layers whose name matches `pattern`: glob alternatives separated by '|', each matched anywhere in the name
    ('dw_k3*', 'stem|encodec'), or a regular expression after 're:' ('re:dw_k[35]s2')."""
    if not pattern:
        return list(candidates)
    if pattern.startswith("re:"):
        expression = re.compile(pattern[len("re:"):])
        return [layer for layer in candidates if expression.search(layer.name)]
    globs = [f"*{alternative}*" for alternative in pattern.split("|") if alternative]
    return [layer for layer in candidates if any(fnmatch.fnmatchcase(layer.name, glob) for glob in globs)]


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"{cpu_model_and_features()[0]}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def run_context(settings: Settings, layer_set: str) -> Dict[str, str]:
    context = {
        "layers": layer_set,
        "machine": machine_description(settings.device),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": source_description(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(settings.device),
        "dtype": dtype_name(settings.dtype),
        "batch": "per layer" if settings.batch is None else str(settings.batch),
        "memory_format": "channels_last" if settings.channels_last else "contiguous (random layers: their own)",
        "effort": "quick" if settings.effort == QUICK_EFFORT else "full",
        # Other processes skew CPU timings; the 1-minute load average at the start (and end) says how busy it was.
        "load_average": current_load_average(),
        "peers": settings.peers,
    }
    if settings.peers == "all":
        context["compile"] = f"torch.compile of pad+conv, inductor, dynamic=False (torch {torch.__version__})"
        context["onnxruntime"] = onnxruntime_description(settings)
    return context


def onnxruntime_description(settings: Settings) -> str:
    """The onnxruntime peer in the header: its version and settings, or why it does not run at all."""
    version = peer_tools.onnxruntime_version()
    if version is None:
        return "not installed"
    if settings.device.type != "cpu":
        return f"{version}, not run: the onnxruntime column is CPU only"
    return (f"{version}, CPU execution provider, {torch.get_num_threads()} intra-op threads (no spinning), "
            f"ORT_ENABLE_ALL, {dtype_name(peer_tools.onnx_dtype(settings.dtype))} model, NCHW input")


def fma_peak_text(gflops: float) -> str:
    return f"{gflops:.1f} GFLOP/s (float32, {torch.get_num_threads()} threads)"


def current_load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "unknown"


TABLE_HEADERS = ["layer", "shape", "mode", "fastpad ms", "pad+conv ms", "floor ms", "fastpad/(pad+conv)",
                 "fastpad/floor", "max rel. error"]
PEER_HEADERS = ["fastpad/compile", "fastpad/ORT"]
PEAK_HEADER = "% peak"


def table_rows(measurements: Sequence[Measurement]) -> List[List[str]]:
    return [[m.layer, m.shape, m.mode, f"{m.fastpad_ms:.3f}", f"{m.pad_conv_ms:.3f}", f"{m.floor_ms:.3f}",
             f"{m.ratio_to_pad_conv:.2f}", f"{m.ratio_to_floor:.2f}", f"{m.max_rel_error:.1e}"]
            for m in measurements]


def optional_number(value: Optional[float], form: str) -> str:
    return "-" if value is None else format(value, form)


def table(context: Dict[str, str], measurements: Sequence[Measurement]) -> Tuple[List[str], List[List[str]]]:
    """Headers and rows: TABLE_HEADERS, then the peer ratios (unless --peers none) and % peak (where measured)."""
    headers, rows = list(TABLE_HEADERS), table_rows(measurements)
    if context.get("peers") == "all":
        headers += PEER_HEADERS
        for row, m in zip(rows, measurements):
            row += [optional_number(m.ratio_to_compile, ".2f"), optional_number(m.ratio_to_onnxruntime, ".2f")]
    if "fma_peak" in context:
        headers.append(PEAK_HEADER)
        for row, m in zip(rows, measurements):
            row.append(optional_number(m.percent_of_fma_peak, ".1f"))
    return headers, rows


def legend_lines(context: Dict[str, str]) -> List[str]:
    """What the added columns mean, and where they show '-'."""
    lines = []
    if context.get("peers") == "all":
        lines += [
            "fastpad/compile: the time ratio to torch.compile (inductor, dynamic=False) of the pad+conv function, its "
            "compile time not counted",
            "fastpad/ORT: the time ratio to onnxruntime running one Conv (ConvTranspose) node with the pads as "
            "attributes; forward on the CPU only; '-' for padding modes reflect, replicate and circular (a Pad node "
            "would be needed), for float64 (no float64 Conv in onnxruntime's CPU provider) and for transposed layers "
            "no one node expresses; onnxruntime always takes NCHW (channels_last runs feed it an NCHW copy of the "
            "same values, made before the timing) and bfloat16 runs give it a float32 model",
        ]
    if "fma_peak" in context:
        lines.append("% peak: fastpad's FLOP/s (2 per multiply-add; fwd+bwd counts three convolutions: the forward, "
                     "the input gradient and the weight gradient) as a percentage of the float32 FMA peak of "
                     f"{context['fma_peak']}, whatever the run's dtype")
    return lines


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary_lines(measurements: Sequence[Measurement]) -> List[str]:
    lines = []
    for mode in MODES:
        chosen = [m for m in measurements if m.mode == mode]
        if chosen:
            line = (f"{mode}: geomean fastpad/(pad+conv) = "
                    f"{geometric_mean([m.ratio_to_pad_conv for m in chosen]):.2f}, geomean fastpad/floor = "
                    f"{geometric_mean([m.ratio_to_floor for m in chosen]):.2f} over {len(chosen)} layers")
            # The peers' geomeans over the layers where they have a time.
            for label, ratio in (("fastpad/compile", lambda m: m.ratio_to_compile),
                                 ("fastpad/ORT", lambda m: m.ratio_to_onnxruntime)):
                values = [ratio(m) for m in chosen if ratio(m) is not None]
                if values:
                    line += f"; geomean {label} = {geometric_mean(values):.2f} over {len(values)} layers"
            lines.append(line)
    return lines


def loser_lines(measurements: Sequence[Measurement]) -> List[str]:
    """The (layer, mode) pairs where fastpad is slower than F.pad + conv, worst first, with every run's ratio where a
    row was timed more than once."""
    losers = sorted((m for m in measurements if m.ratio_to_pad_conv > 1.0), key=lambda m: -m.ratio_to_pad_conv)
    if not losers:
        return ["no layer slower than F.pad + conv"]

    def runs_text(m: Measurement) -> str:
        return f" (median of {len(m.runs)} runs: {', '.join(f'{r:.2f}' for r in m.runs)})" if len(m.runs) > 1 else ""
    return [f"{len(losers)} (layer, mode) slower than F.pad + conv, worst first:"] + [
        f"  {m.ratio_to_pad_conv:.2f}  {m.layer} {m.mode}: {m.shape}{runs_text(m)}" for m in losers]


def write_json(path: Path, context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    rows = [dict(asdict(m), ratio_to_pad_conv=m.ratio_to_pad_conv, ratio_to_floor=m.ratio_to_floor,
                 ratio_to_compile=m.ratio_to_compile, ratio_to_onnxruntime=m.ratio_to_onnxruntime)
            for m in measurements]
    path.write_text(json.dumps({"context": context, "results": rows}, indent=2) + "\n")


def write_markdown(path: Path, context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    title = f"### {context['device']}, {context['dtype']}, {context['memory_format']}, {context['date']}"
    details = "\n".join(f"- {key}: {value}" for key, value in context.items())
    summary = "\n".join(f"- {line}" for line in summary_lines(measurements))
    legend = "\n".join(f"- {line}" for line in legend_lines(context))
    text = "\n\n".join(filter(None, [title, details, markdown_table(*table(context, measurements)), legend,
                                      summary]))
    path.write_text(text + "\n")


def write_png(path: Path, context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    """A bar chart of fastpad/(pad+conv) and fastpad/floor per layer, one panel per mode, on a log scale: the bars
    start at 1.0 and go down where fastpad is faster. Raises ImportError without matplotlib (an optional dependency)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    layers = list(dict.fromkeys(m.layer for m in measurements))
    positions = range(len(layers))
    figure = Figure(figsize=(max(8.0, 3.0 + 0.6 * len(layers)), 10.0), layout="constrained")
    FigureCanvasAgg(figure)  # the non-interactive Agg backend: a file, never a window
    panels = figure.subplots(len(MODES), 1, sharex=True)
    bar_width = 0.4
    ratios = (("fastpad / (pad+conv)", lambda m: m.ratio_to_pad_conv), ("fastpad / floor", lambda m: m.ratio_to_floor))
    # The same y range in both panels, symmetric around 1.0 (2x faster looks as big as 2x slower), at least 0.5 to 2.
    extent = 1.25 * max([2.0] + [max(ratio(m), 1 / ratio(m)) for m in measurements for _, ratio in ratios])
    for axes, mode in zip(panels, MODES):
        by_layer = {m.layer: m for m in measurements if m.mode == mode}
        for offset, (label, ratio) in zip((-bar_width / 2, bar_width / 2), ratios):
            values = [ratio(by_layer[name]) for name in layers]
            bars = axes.bar([p + offset for p in positions], [v - 1.0 for v in values], bar_width, bottom=1.0,
                            label=label)
            axes.bar_label(bars, labels=[f"{v:.2f}" for v in values], fontsize=7)
        axes.axhline(1.0, color="black", linewidth=0.8)
        axes.set_yscale("log")
        axes.set_ylim(1 / extent, extent)
        axes.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 0.5, not 5e-01
        axes.yaxis.set_minor_formatter(NullFormatter())
        axes.set_ylabel("time ratio (below 1: fastpad faster)")
        axes.set_title(mode)
    panels[0].legend()
    panels[-1].set_xticks(positions, layers, rotation=45, ha="right")
    figure.suptitle(f"fastpad bench: {context['device']}, {context['dtype']}, {context['memory_format']}\n"
                    f"{context['date']}, commit {context['commit']}\n{context['machine']}")
    figure.savefig(path, dpi=100)


WRITERS = {"json": write_json, "md": write_markdown, "png": write_png}


def output_paths(stem: str, requested: Dict[str, Optional[str]], out_dir: Optional[str]) -> Dict[str, Path]:
    """The outputs to write, by suffix: those requested; with none requested, all three in out_dir (default
    ./fastpad-bench), named `stem`, e.g. bench-cpu-float32-contiguous.png."""
    if any(requested.values()):
        return {suffix: Path(path) for suffix, path in requested.items() if path}
    return {suffix: Path(out_dir or DEFAULT_OUT_DIR) / f"{stem}.{suffix}" for suffix in WRITERS}


def write_outputs(paths: Dict[str, Path], context: Dict[str, str], measurements: Sequence[Measurement]) -> None:
    """Writes each output and prints its path; without matplotlib, warns that the chart is missing and goes on."""
    for suffix, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            WRITERS[suffix](path, context, measurements)
        except ImportError as error:  # only the chart has an optional dependency
            print(f"warning: {path} not written: the chart needs matplotlib ({error}); run `pip install matplotlib` "
                  "(or `pip install -e '.[bench]'`) to get it", file=sys.stderr)
        else:
            print(f"wrote {path}")


def main(device: Optional[str], dtype: str, batch: Optional[int], layers: Optional[str], channels_last: bool,
         quick: bool, json_path: Optional[str], markdown_path: Optional[str], png_path: Optional[str],
         out_dir: Optional[str], random_count: Optional[int] = None, seed: Optional[int] = None,
         peers: str = "all") -> int:
    resolved_device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    settings = Settings(resolved_device, getattr(torch, dtype), batch, channels_last,
                        QUICK_EFFORT if quick else FULL_EFFORT, peers=peers)
    stem = "-".join(["bench", str(resolved_device).replace(":", ""), dtype,
                     "channels_last" if channels_last else "contiguous"])
    if random_count:
        seed = random.randrange(2**31) if seed is None else seed
        candidates, layer_set = random_layers(random_count, seed), f"random {random_count}, seed {seed}"
        stem += f"-random{random_count}-seed{seed}"
        print(f"random layers: {random_count} drawn from seed {seed} (again: --random {random_count} --seed {seed})")
    else:
        candidates, layer_set = SUITE, f"suite ({len(SUITE)})"
    chosen = select_layers(candidates, layers)
    if not chosen:
        print(f"no layer matches {layers!r}; the layers are: {', '.join(layer.name for layer in candidates)}",
              file=sys.stderr)
        return 2
    requested = {"json": json_path, "md": markdown_path, "png": png_path}
    if out_dir and any(requested.values()):
        print("--out-dir is the folder of the default outputs; it does not combine with --json, --markdown or --png",
              file=sys.stderr)
        return 2
    context = run_context(settings, layer_set)  # reads the load average before the FMA peak loads the CPU
    peak = peer_tools.fma_peak_gflops(FMA_PEAK_SECONDS) if settings.device.type == "cpu" else None
    if peak:
        settings = replace(settings, fma_peak_gflops=peak)
        context["fma_peak"] = fma_peak_text(peak)
    print("fastpad bench: " + ", ".join(f"{key} {value}" for key, value in context.items()))
    if "fma_peak" in context:
        print(f"FMA peak: {context['fma_peak']}")
    if settings.device.type == "cpu" and context["load_average"] != "unknown" \
            and float(context["load_average"]) > BUSY_LOAD_AVERAGE:
        print(f"warning: load average {context['load_average']}: other processes are using the CPU, so these "
              "timings are unreliable; measure on an idle machine", file=sys.stderr)
    measurements, failed, notes = [], [], PeerNotes()
    progress = Progress(len(chosen), sys.stderr)
    for index, layer in enumerate(chosen, start=1):
        progress.start_layer(index, layer.name)
        try:
            measurements += measure_layer(layer, settings, progress.start_phase, notes)
        except Exception as exception:  # report the layer and go on with the rest of the suite
            progress.finish_layer(failure=f"{type(exception).__name__}: {exception}")
            failed.append(layer.name)
        else:
            progress.finish_layer()
    progress.close()
    if settings.effort.rechecks:
        context["rechecks"] = (f"rows above {RECHECK_ABOVE} fastpad/(pad+conv) timed {1 + settings.effort.rechecks} "
                               "times, the median run reported")
        measurements = rechecked(measurements, chosen, settings, notes, sys.stderr)
    context.update(notes.context_entries())  # why a peer column shows '-', each reason once
    print(text_table(*table(context, measurements)))
    print("\n".join(legend_lines(context) + loser_lines(measurements) + summary_lines(measurements)))
    for key, value in notes.context_entries().items():
        print(f"{key}: {value}")
    limit = tolerance(settings.dtype, settings.device)
    inaccurate = sorted({m.layer for m in measurements if not m.max_rel_error <= limit})
    for problem, names in (("raised an exception", failed), ("exceeded the error tolerance", inaccurate)):
        if names:
            print(f"{len(names)} layer(s) {problem}: {', '.join(names)}")
    if notes.wrong:
        print(f"{len(notes.wrong)} peer output(s) off the float64 reference, not timed: {', '.join(notes.wrong)}")
    context["load_average_at_end"] = current_load_average()
    write_outputs(output_paths(stem, requested, out_dir), context, measurements)
    return 1 if failed or inaccurate or notes.wrong else 0
