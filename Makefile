# tinycuda: the two commands a fresh machine needs are `make demo` (the main
# job) and `make test` (install everything, run the suite). See README.md.
PY ?= python3
PIP = $(PY) -m pip
# torch is pinned only when missing: a machine that has a (CUDA) torch keeps it.
TORCH_PIN ?= torch==2.13.0
TEST_DEPS = pytest hypothesis numpy ninja

.PHONY: install test test-gpu sanitize demo clean

install:
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q $(TORCH_PIN)
	$(PIP) install -q $(TEST_DEPS)
	$(PIP) install -q --no-build-isolation --no-deps -e .

test: install
	$(PY) -m pytest -q

# On a GPU machine: the same suite (CUDA tests run when a GPU is visible),
# then compute-sanitizer memcheck and racecheck over the CUDA tests.
SANITIZE_TESTS = tests -k "cuda and not large and not compile" -p no:cacheprovider -q -x
sanitize: install
	compute-sanitizer --tool memcheck --error-exitcode 1 $(PY) -m pytest $(SANITIZE_TESTS)
	compute-sanitizer --tool racecheck --error-exitcode 1 $(PY) -m pytest $(SANITIZE_TESTS)

demo: install
	$(PY) -m tinycuda info
	$(PY) examples/quickstart.py

clean:
	rm -rf build *.egg-info tinycuda/_C*.so tinycuda/_build_info.json
