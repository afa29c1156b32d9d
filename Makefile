# tinycuda: the two commands a fresh machine needs are `make train` (the main
# job: install, then `tinycuda train`) and `make test` (install everything, run
# the suite). See README.md.
#
# Nothing is redone that is done: the packages are installed once (a stamp in
# build/stamps, renewed when this file or pyproject.toml changes), the
# extension is rebuilt only when a file under csrc/ (or the build scripts)
# changed, and then ninja (build/ext) and make (build/capi) recompile only the
# files that changed and their includers.
PY ?= python3
PIP = $(PY) -m pip
# torch is pinned only when missing: a machine that has a (CUDA) torch keeps it.
TORCH_PIN ?= torch==2.13.0
DEPS = numpy rich cffi pytest pytest-xdist hypothesis ninja matplotlib
STAMPS = build/stamps
BUILD_INPUTS := $(shell find csrc -type f) setup.py tinycuda/_build.py

.PHONY: install test sanitize train lib clean

install: $(STAMPS)/ext

$(STAMPS)/deps: Makefile pyproject.toml
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q $(TORCH_PIN)
	$(PIP) install -q $(DEPS)
	TINYCUDA_EXT=0 $(PIP) install -q --no-build-isolation --no-deps -e .
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/ext: $(STAMPS)/deps $(BUILD_INPUTS)
	$(PY) setup.py -q build_ext --inplace --build-temp build/ext
	@touch $@

test: install
	$(PY) -m pytest -q -n auto

# On a GPU machine: the same suite (CUDA tests run when a GPU is visible),
# then compute-sanitizer: memcheck over every CUDA test but the >2^31-element,
# torch.compile and device-assert ones (those end in an assert on purpose);
# racecheck (slow) over the tests marked `racecheck` (kernels that share
# memory: sum, scale_bias_relu, the tiled GEMMs, the row reductions of
# softmax, the norms and cross-entropy) in float32 and bfloat16.
MEMCHECK_TESTS = -m "cuda and not large and not compile and not device_assert"
RACECHECK_TESTS = -m "cuda and racecheck and not large and not compile and not device_assert" -k "float32 or bfloat16"
# TC_SANITIZER=1: the profiler sees no kernel under the sanitizer (tests/conftest.py launched)
SANITIZE = TC_SANITIZER=1 compute-sanitizer --error-exitcode 1
sanitize: install
	$(SANITIZE) --tool memcheck $(PY) -m pytest tests $(MEMCHECK_TESTS) -p no:cacheprovider -q -x
	$(SANITIZE) --tool racecheck $(PY) -m pytest tests $(RACECHECK_TESTS) -p no:cacheprovider -q -x

train: install
	$(PY) -m tinycuda train

# libtinycuda alone (no torch needed): build/capi/libtinycuda.so
lib:
	$(MAKE) -C csrc

clean:
	rm -rf build *.egg-info tinycuda/_C*.so tinycuda/_build_info.json tinycuda/lib
