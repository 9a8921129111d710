# fastpad: `make test` and `make bench` each set up a fresh machine first (see README.md).
# Override the interpreter with `make test PYTHON=/path/to/python`.
PYTHON ?= python3
PIP = $(PYTHON) -m pip
# torch is installed only when it is missing. TORCH_INDEX_URL picks where from, e.g.
# https://download.pytorch.org/whl/cpu for a CPU-only build; see README.md for CUDA builds.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX_URL ?=

.PHONY: install test test-sanitize check-cuda bench check

install:
	@if ! $(PYTHON) -c "import torch" 2>/dev/null; then \
		echo "torch is missing: installing torch==$(TORCH_VERSION)$(if $(TORCH_INDEX_URL), from $(TORCH_INDEX_URL))."; \
		echo "For a CUDA build instead, install the torch that https://pytorch.org/get-started/locally/ gives"; \
		echo "for your CUDA version first; this step then leaves it alone."; \
		$(PIP) install torch==$(TORCH_VERSION) $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)); \
	fi
	$(PIP) install -q ninja hypothesis pytest numpy "setuptools>=64" wheel
	@# The ecosystem tests: ONNX export (onnx, onnxscript, onnxruntime) and timm models. timm goes in without its
	@# dependencies, which would pull torchvision (and with it another torch); the tests stand in for torchvision.
	$(PIP) install -q onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.31.1
	$(PIP) install -q --no-deps timm==1.0.31
	$(PIP) install --no-build-isolation -e .

test: install
	$(PYTHON) -m pytest tests -q

# The CPU kernels built with AddressSanitizer and UBSan (in build/sanitize/), under a subset of the tests.
test-sanitize: install
	PYTHON=$(PYTHON) scripts/sanitize.sh

# Compiles every csrc/cuda/*.cu with nvcc for sm_80 and sm_90; needs torch and nvcc, not a GPU.
check-cuda:
	PYTHON=$(PYTHON) scripts/cuda_compile_check.sh 80 90

bench: install
	$(PIP) install -q matplotlib  # for the PNG chart; bench still writes JSON and markdown without it
	$(PYTHON) -m fastpad bench

check: install
	$(PYTHON) -m fastpad check
