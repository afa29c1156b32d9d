# tinycuda: the two commands a fresh machine needs are `make train` (the main
# job: install, then `tinycuda train`) and `make test` (install everything, run
# the suite). See README.md.
PY ?= python3
PIP = $(PY) -m pip
# torch is pinned only when missing: a machine that has a (CUDA) torch keeps it.
TORCH_PIN ?= torch==2.13.0
TEST_DEPS = pytest pytest-xdist hypothesis numpy ninja rich matplotlib

.PHONY: install test sanitize train lib clean

install:
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q $(TORCH_PIN)
	$(PIP) install -q $(TEST_DEPS)
	$(PIP) install -q --no-build-isolation --no-deps -e .

test: install
	$(PY) -m pytest -q -n auto

# On a GPU machine: the same suite (CUDA tests run when a GPU is visible),
# then compute-sanitizer: memcheck over every CUDA test but the >2^31-element
# and torch.compile ones; racecheck (slow) over the kernels that share memory
# (sum, scale_bias_relu, the tiled GEMMs, the row reductions of softmax, the
# norms and cross-entropy) in float32 and bfloat16.
MEMCHECK_TESTS = -k "cuda and not large and not compile"
RACECHECK_TESTS = -k "cuda and (float32 or bfloat16) and (sum or scale_bias_relu or variants or softmax or layer_norm or rms_norm or cross_entropy) and not opcheck and not compile and not large"
SANITIZE = compute-sanitizer --error-exitcode 1
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
