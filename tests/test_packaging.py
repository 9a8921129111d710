"""fastpad as a user installs it: `pip install .` (not editable) into a fresh virtual environment, then the
command-line tools run from a folder outside the checkout, where only the installed package can be imported.

Slow (a full build of the extension, about 4 minutes on 2 cores, then `check --quick`): `pytest -m slow`.
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def run(command, cwd, timeout=1200):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"})
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def copy_checkout(destination: Path) -> None:
    """The checkout's files as they are now (tracked, and untracked but not ignored) and its .git, without builds."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    shutil.copytree(REPO_ROOT / ".git", destination / ".git", symlinks=True)


def imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_the_package_imports_nothing_from_the_repository_folders_and_nothing_edits_sys_path():
    top_level_folders = {path.name for path in REPO_ROOT.iterdir() if path.is_dir()} - {"fastpad"}
    for path in sorted((REPO_ROOT / "fastpad").rglob("*.py")):
        upward = [name for name in imported_modules(path) if name.split(".")[0] in top_level_folders]
        assert not upward, f"{path.relative_to(REPO_ROOT)} imports {upward} from outside the package"
    for folder in ("fastpad", "tests", "benchmarks", "scripts"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            uses = [node.lineno for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)
                    and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys"]
            assert not uses, f"{path.relative_to(REPO_ROOT)} uses sys.path on line(s) {uses}"


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv_and_run_the_tools_outside_the_checkout(tmp_path):
    source, environment, outside = tmp_path / "source", tmp_path / "venv", tmp_path / "elsewhere"
    copy_checkout(source)
    outside.mkdir()
    # torch comes from the interpreter running the tests (a fresh torch download is gigabytes); fastpad does not.
    venv.create(environment, system_site_packages=True, with_pip=True)
    python = str(environment / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", "--no-build-isolation", str(source)], cwd=outside)

    # Only the installed package: -I leaves out the current folder, PYTHONPATH and the user site.
    where = run([python, "-I", "-c", "import fastpad, fastpad.bench; print(fastpad.__file__)"], cwd=outside)
    assert where.strip().startswith(str(environment)), where
    build = json.loads(run([python, "-I", "-c", "import fastpad._info as i, json; print(json.dumps(i.build_info()))"],
                           cwd=outside))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    assert build["commit"] == head and build["torch"]

    info = run([python, "-I", "-m", "fastpad", "info"], cwd=outside)
    assert f"extension built from commit {head[:7]}" in info and "source checkout" not in info, info
    check = run([python, "-I", "-m", "fastpad", "check", "--quick", "--device", "cpu"], cwd=outside)
    assert "3582 cases" in check and ", 0 failed" in check, check[-2000:]
    bench = run([python, "-I", "-m", "fastpad", "bench", "--quick", "--batch", "1", "--layers", "encodec*",
                 "--device", "cpu", "--peers", "none", "--json", "run.json"], cwd=outside)
    rows = json.loads((outside / "run.json").read_text())
    assert [row["layer"] for row in rows["results"]] == ["encodec.conv1d_k8s4_reflect"] * 2, bench
    assert rows["context"]["commit"].startswith(head[:7]) and "installed build" in rows["context"]["commit"]
    print(f"\nfresh venv, pip install . from a copy of the checkout ({head[:7]}), run from {outside}:\n{info}\n"
          f"{check.strip().splitlines()[-1]}\n{bench.strip()[-600:]}", file=sys.stderr)


# What setup.py hands to setuptools, without building: setup() is replaced by a probe that prints each extension's
# libraries and sources (torch's CUDAExtension links cudart, its CppExtension does not). CUDA_HOME is pointed at a stand-in toolkit folder, since a CPU build of torch leaves it unset.
SETUP_PROBE = """
import json, os, runpy, sys
import setuptools
import torch.utils.cpp_extension as cpp_extension
cpp_extension.CUDA_HOME = sys.argv[1]
sys.argv = ["setup.py", "--name"]
setuptools.setup = lambda **kwargs: print(json.dumps(
    [[ext.libraries, sorted(ext.sources)] for ext in kwargs["ext_modules"]]))
runpy.run_path("setup.py", run_name="__main__")
"""


@pytest.mark.parametrize("force_cuda", [False, True], ids=["cpu", "forced-cuda"])
def test_setup_declares_the_extension_with_its_sources(tmp_path, force_cuda):
    # FASTPAD_FORCE_CUDA=1 once failed here, before any compiler ran: a GPU machine's build could not start.
    (tmp_path / "lib64").mkdir()
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "FASTPAD_FORCE_CUDA")}
    if force_cuda:
        environment["FASTPAD_FORCE_CUDA"] = "1"
    result = subprocess.run([sys.executable, "-c", SETUP_PROBE, str(tmp_path)], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr[-4000:]
    [(libraries, sources)] = json.loads(result.stdout.strip().splitlines()[-1])
    cuda_sources = [source for source in sources if source.startswith(os.path.join("csrc", "cuda", ""))]
    assert os.path.join("csrc", "fastpad.cpp") in sources
    assert os.path.join("csrc", "cpu", "conv.cpp") in sources
    if force_cuda or torch_has_cuda():
        assert "cudart" in libraries
        assert os.path.join("csrc", "cuda", "conv.cu") in cuda_sources
        assert os.path.join("csrc", "cuda", "register.cpp") in cuda_sources
    else:
        assert "cudart" not in libraries and cuda_sources == []


def torch_has_cuda() -> bool:
    import torch
    return torch.version.cuda is not None and shutil.which("nvcc") is not None
