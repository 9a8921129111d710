"""The README's command-line tools run end to end: `python -m fastpad check` and `python -m fastpad bench`."""
import json
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_fastpad(*args):
    return subprocess.run([sys.executable, "-m", "fastpad", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)


def test_check_quick_passes_and_prints_its_table():
    result = run_fastpad("check", "--quick", "--device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "worst rel. error" in result.stdout
    assert ", 0 failed" in result.stdout


def test_bench_times_one_layer_and_writes_json_and_markdown(tmp_path):
    json_path, markdown_path = tmp_path / "run.json", tmp_path / "run.md"
    result = run_fastpad("bench", "--quick", "--batch", "1", "--layers", "encodec*", "--json", str(json_path),
                         "--markdown", str(markdown_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "encodec.conv1d_k8s4_reflect" in markdown_path.read_text()
    rows = json.loads(json_path.read_text())
    text = json.dumps(rows)
    assert "encodec.conv1d_k8s4_reflect" in text and "fwd+bwd" in text


def test_unknown_command_fails():
    assert run_fastpad("frobnicate").returncode != 0
