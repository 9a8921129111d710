"""fastpad's benchmark: the layer suite (layers.py), the runner (runner.py) and the measured tables (RESULTS.md)."""
