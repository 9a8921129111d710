"""`python -m fastpad bench`: the layer suite (layers.py) and the runner that times it (runner.py).

Both ship with the package, so the benchmark runs from a plain `pip install .`. The measured tables and the
whole-model scripts stay in the repository's benchmarks/ folder.
"""
