"""The repository's benchmarks beyond `python -m fastpad bench` (whose suite and runner are fastpad/bench/): whole models
(models.py, compile_models.py), the symmetric-pad kernel choice (symmetric_pad_kernels.py), and the measured tables
(RESULTS.md). Run them from the repository root, e.g. `python -m benchmarks.models`."""
