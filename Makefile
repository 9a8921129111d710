# fastpad: `make test` and `make bench` each set up a fresh machine first (see README.md).
# Override the interpreter with `make test PYTHON=/path/to/python`.
PYTHON ?= python3
PIP = $(PYTHON) -m pip
# torch is installed only when it is missing. TORCH_INDEX_URL picks where from, e.g.
# https://download.pytorch.org/whl/cpu for a CPU-only build; see README.md for CUDA builds.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX_URL ?=

.PHONY: install test test-sanitize check-cuda bench check info

# `install` remembers what it did for this interpreter in two stamp files under build/make/, so that a second make
# target with nothing changed installs and rebuilds nothing: the pinned packages again only when this Makefile
# changes, the extension again only when csrc/, setup.py or pyproject.toml is newer than the last build, or when
# `import fastpad` does not find this checkout's build.
STAMP := build/make/$(shell $(PYTHON) -c "import sys; print(sys.executable.strip('/').replace('/', '_'))")
BUILD_INPUTS := csrc setup.py pyproject.toml

install: $(STAMP).packages
	@if [ ! -e $(STAMP).built ] || [ -n "$$(find $(BUILD_INPUTS) -newer $(STAMP).built | head -n 1)" ] || \
	    ! $(PYTHON) -c "import fastpad, sys; sys.exit(not fastpad.__file__.startswith('$(CURDIR)/'))" 2>/dev/null; \
	then \
		$(PIP) install --no-build-isolation -e . && touch $(STAMP).built; \
	else \
		echo "fastpad's extension is built from the current sources: nothing to rebuild"; \
	fi

$(STAMP).packages: Makefile
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
	$(PIP) install -q --no-deps timm==1.0.31 pillow==12.3.0
	@# The ported models of the compile-backend tests: transformers and Keras 3 (on the torch backend). Neither depends
	@# on torch, but --no-deps with their pure-Python dependencies pinned keeps the set fixed and brings in no
	@# tensorflow or jax. transformers: huggingface-hub (with httpx2, httpcore2, truststore, h11, anyio), tokenizers,
	@# safetensors, tqdm; keras: absl-py, namex, optree, rich, h5py (which copying a Keras model needs).
	$(PIP) install -q --no-deps transformers==5.23.0 huggingface-hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 \
		tqdm==4.70.1 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 h11==0.16.0 anyio==4.16.0
	$(PIP) install -q --no-deps keras==3.15.1 absl-py==2.5.1 namex==0.1.0 optree==0.20.0 rich==15.0.0 h5py==3.16.0
	mkdir -p $(@D) && touch $@

# The 15 slowest tests are listed at the end (--durations), to keep CI's 30-minute budget in view on slow hosts.
# Then tests/test_cuda.py once more on the CPU kernels (FASTPAD_CUDA_TESTS_ON_CPU=1, about 30 s): on a machine without
# a GPU that module would only skip, and this runs its own logic (cases, references, tolerances) everywhere.
test: install
	$(PYTHON) -m pytest tests -q --durations=15
	FASTPAD_CUDA_TESTS_ON_CPU=1 $(PYTHON) -m pytest tests/test_cuda.py -q -p no:cacheprovider

# The CPU kernels built with AddressSanitizer and UBSan (in build/sanitize/), under a subset of the tests.
test-sanitize: install
	PYTHON=$(PYTHON) scripts/sanitize.sh

# Compiles every csrc/cuda/*.cu with nvcc for sm_80 and sm_90; needs torch and nvcc, not a GPU.
check-cuda:
	PYTHON=$(PYTHON) scripts/cuda_compile_check.sh 80 90

bench: install
	$(PYTHON) -c "import matplotlib" 2>/dev/null || $(PIP) install -q matplotlib  # the PNG chart (optional)
	$(PYTHON) -m fastpad bench --out-dir benchmarks/out

check: install
	$(PYTHON) -m fastpad check

info: install
	$(PYTHON) -m fastpad info
