"""The README's command-line tools run end to end: `python -m fastpad check`, `bench` and `info`."""
import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from fastpad.bench import runner

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE_SMALL_LAYER = ("--quick", "--batch", "1", "--layers", "encodec*", "--device", "cpu", "--peers", "none")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_fastpad(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fastpad", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def test_check_quick_passes_and_prints_its_table():
    result = run_fastpad("check", "--quick", "--device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "worst rel. error" in result.stdout
    assert ", 0 failed" in result.stdout


def test_bench_times_one_layer_and_writes_json_and_markdown(tmp_path):
    json_path, markdown_path = tmp_path / "run.json", tmp_path / "run.md"
    result = run_fastpad("bench", *ONE_SMALL_LAYER, "--json", str(json_path), "--markdown", str(markdown_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "encodec.conv1d_k8s4_reflect" in markdown_path.read_text()
    rows = json.loads(json_path.read_text())
    text = json.dumps(rows)
    assert "encodec.conv1d_k8s4_reflect" in text and "fwd+bwd" in text
    assert sorted(tmp_path.iterdir()) == [json_path, markdown_path]  # only the outputs asked for
    assert "[1/1] encodec.conv1d_k8s4_reflect ... " in result.stderr  # the plain progress line, outside a terminal


def test_bench_writes_json_markdown_and_png_chart_to_out_dir_by_default(tmp_path):
    pytest.importorskip("matplotlib")
    result = run_fastpad("bench", *ONE_SMALL_LAYER, "--out-dir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    for suffix in ("json", "md", "png"):
        path = tmp_path / f"bench-cpu-float32-contiguous.{suffix}"
        assert path.is_file() and f"wrote {path}" in result.stdout
    png = (tmp_path / "bench-cpu-float32-contiguous.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 10_000


def test_bench_without_matplotlib_warns_and_writes_the_other_outputs(tmp_path):
    hidden = tmp_path / "hide_matplotlib" / "matplotlib"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(hidden.parent), os.environ.get("PYTHONPATH")])))
    outputs = tmp_path / "out"
    result = run_fastpad("bench", *ONE_SMALL_LAYER, "--json", str(outputs / "run.json"), "--png",
                         str(outputs / "run.png"), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pip install matplotlib" in result.stderr
    assert sorted(path.name for path in outputs.iterdir()) == ["run.json"]


def test_bench_random_smoke_prints_seed_losers_and_geomeans(tmp_path):
    """The random-layer mode on 5 layers: the seed to replay it, the losers (or that there are none), the geomeans;
    the same seed draws the same layers."""
    json_path = tmp_path / "run.json"
    result = run_fastpad("bench", "--random", "5", "--seed", "7", "--quick", "--device", "cpu", "--peers", "none",
                         "--json", str(json_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "random layers: 5 drawn from seed 7 (again: --random 5 --seed 7)" in result.stdout
    assert "slower than F.pad + conv" in result.stdout
    assert "forward: geomean fastpad/(pad+conv) = " in result.stdout and "over 5 layers" in result.stdout
    rows = json.loads(json_path.read_text())
    assert rows["context"]["layers"] == "random 5, seed 7"
    from fastpad.bench.random_layers import random_layers
    drawn = {layer.name: layer.case.shape_text() for layer in random_layers(5, 7)}
    assert {row["layer"]: row["shape"].replace(" channels_last", "") for row in rows["results"]} == drawn


def test_random_layer_op_calls_records_the_forward_and_backward_op_calls():
    """The benchmark scripts' recorder of a random layer's op calls: a dense 2-d conv's forward is one conv call, its
    backward adds the input gradient (conv_transpose) and the weight gradient; each call run again reproduces the
    output the layer's function gives, and the leaves come back without gradients."""
    from fastpad.bench.op_calls import random_layer_op_calls
    function, leaves, calls = random_layer_op_calls(2, "random061")
    assert [op for op, _ in calls] == ["conv", "conv_transpose", "conv_weight_grad"]
    assert all(leaf.requires_grad and leaf.grad is None for leaf in leaves)
    _, _, forward_only = random_layer_op_calls(2, "random061", backward=False)
    assert [op for op, _ in forward_only] == ["conv"]
    op, args = calls[0]
    with torch.no_grad():
        torch.testing.assert_close(getattr(torch.ops.fastpad, op)(*args), function(*leaves))


def test_bench_times_rows_near_parity_again_and_reports_their_median_run(monkeypatch):
    """At full effort each row above RECHECK_ABOVE is timed Effort.rechecks more times, its layer and mode alone, and
    reports its median run with every run's ratio in the order run; the other rows keep their one run, and the quick
    effort times nothing again."""
    def row(layer, mode, ratio):
        return runner.Measurement(layer, "model", "shape", mode, fastpad_ms=ratio, pad_conv_ms=1.0, floor_ms=1.0,
                                  repeats=7, max_rel_error=0.0, runs=[ratio])
    later = {("a", "fwd+bwd"): [0.9, 1.1], ("b", "forward"): [1.3, 1.0]}
    calls = []

    def measure_layer(layer, settings, on_phase, notes=None, modes=runner.MODES):
        (mode,) = modes
        calls.append((layer.name, mode))
        return [row(layer.name, mode, later[(layer.name, mode)].pop(0))]
    monkeypatch.setattr(runner, "measure_layer", measure_layer)
    first = [row("a", "forward", 0.5), row("a", "fwd+bwd", 1.2), row("b", "forward", runner.RECHECK_ABOVE + 0.01),
             row("b", "fwd+bwd", runner.RECHECK_ABOVE)]
    layers = [SimpleNamespace(name="a"), SimpleNamespace(name="b")]
    settings = runner.Settings(torch.device("cpu"), torch.float32, None, False, runner.FULL_EFFORT, peers="none")
    assert runner.FULL_EFFORT.rechecks == 2
    quick = runner.rechecked(first, layers, replace(settings, effort=runner.QUICK_EFFORT), runner.PeerNotes(),
                             io.StringIO())
    assert quick == first and calls == []
    result = runner.rechecked(first, layers, settings, runner.PeerNotes(), io.StringIO())
    assert calls == [("a", "fwd+bwd")] * 2 + [("b", "forward")] * 2
    assert [(m.layer, m.mode, m.ratio_to_pad_conv) for m in result] == [
        ("a", "forward", 0.5), ("a", "fwd+bwd", 1.1), ("b", "forward", 1.0), ("b", "fwd+bwd", runner.RECHECK_ABOVE)]
    assert [m.runs for m in result] == [[0.5], [1.2, 0.9, 1.1], [runner.RECHECK_ABOVE + 0.01, 1.3, 1.0],
                                        [runner.RECHECK_ABOVE]]
    assert runner.loser_lines(result) == ["1 (layer, mode) slower than F.pad + conv, worst first:",
                                          "  1.10  a fwd+bwd: shape (median of 3 runs: 1.20, 0.90, 1.10)"]


def test_bench_refuses_out_dir_with_explicit_outputs(tmp_path):
    result = run_fastpad("bench", *ONE_SMALL_LAYER, "--out-dir", str(tmp_path), "--json", str(tmp_path / "run.json"))
    assert result.returncode == 2 and "--out-dir" in result.stderr
    assert not any(tmp_path.iterdir())


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_redraws_one_line_on_a_terminal():
    stream = Terminal()
    progress = runner.Progress(2, stream)
    for index, name in enumerate(["first", "second"], start=1):
        progress.start_layer(index, name)
        for phase in ("error check", "forward", "fwd+bwd"):
            progress.start_phase(phase)
        progress.finish_layer(failure="RuntimeError: boom" if name == "second" else None)
    progress.close()
    text = stream.getvalue()
    assert text.count("\n") == 2  # the failure and the closing line; everything else was redrawn in place
    assert "[1/2] [" in text and "first fwd+bwd" in text and "ETA ?" in text and "ETA 0:" in text
    assert "[2/2] second FAILED: RuntimeError: boom" in text and text.endswith("[2/2] done in 0:00\n")


def test_info_names_versions_build_cpu_threads_and_cuda():
    result = run_fastpad("info")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fastpad ") and "extension built from commit" in lines[1]
    for wanted in (f"torch {torch.__version__}", "CPU: ", "CPU kernels: built for ", "threads: ", "CUDA kernels: "):
        assert any(line.startswith(wanted) for line in lines), (wanted, result.stdout)


def test_unknown_command_fails():
    assert run_fastpad("frobnicate").returncode != 0
