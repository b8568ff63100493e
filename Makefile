# Two entry points: `make demo` and `make test`. Each creates .venv when it is missing.
# The CPU torch wheel is pinned here (it lies on disk); pyproject only declares a range.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: demo test lint typecheck pytest test-full bench clean report fast test-compiled bench-compute

# Imports cache their bytecode: a PYTHONDONTWRITEBYTECODE=1 in the caller's environment (this
# machine's image sets it) would make every process of the suite, each pytest worker and each CLI
# test's subprocess, recompile torch, pandas and pipesim from source; a clean clone's suite took
# about 120 s longer for it. The cache lies beside the sources, in .venv and the checkout.
unexport PYTHONDONTWRITEBYTECODE

# --no-compile: pip would byte-compile every module of every package (torch and transformers hold
# thousands), 134 s of a 2-core machine's install against 37 s without; Python compiles the modules
# a run imports the first time it imports them, and caches them as pip would have.
$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile torch==2.13.0 -e ".[dev]"
	touch $(VENV_STAMP)

demo: $(VENV_STAMP)
	$(PY) -m pipesim.io.demo

test: $(VENV_STAMP) lint typecheck pytest

lint: $(VENV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(VENV_STAMP)
	$(PY) -m mypy pipesim pipesim_entry scenarios offpolicy mismatch

# The suite on PYTEST_WORKERS processes (pytest-xdist): 2, the CI machine's cores; 1 runs it in
# this process. Every test is independent of the others' order and process (Hypothesis's ci
# profile is derandomized), so the same tests pass either way. --dist loadfile sends each test file
# to one worker whole, so a module's shared setup (a calibration, a fork server, a trained base) is
# built once, not once a worker: the suite took 296 s (510 CPU s) against 347 s (613) dealt test
# by test, back to back (docs/testing.md).
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter 1,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)
pytest: $(VENV_STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q $(XDIST)

# The whole suite a CPU can run: the default run's tests, the variants marked full (another signal,
# study or size of a path a default test covers; kept out of CI's 9 minutes) and the slow experiments.
test-full: $(VENV_STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -m 'not gpu and not benchmark' $(XDIST)

bench: $(VENV_STAMP)
	$(PY) benchmarks/bench_pipeline.py

# The compiled build (setup.py): the compute engine's hot modules through mypyc, installed with the
# rest of the project into build/compiled, never into the source tree. Rebuilt when a file of the
# packages it copies changes, from scratch: mypyc keeps its incremental cache apart from the type check's
# (build/mypyc-cache) and drops it first, since an incremental rebuild crashed inside mypyc (ValueError:
# value is not in list, in emit_undefined_attr_check), with the shared cache and with its own.
# setuptools' own build/lib.* and build/temp.* go too: it copies what build/lib holds into the
# install, so an extension of a module setup.py no longer compiles would shadow its .py.
COMPILED := build/compiled
$(COMPILED)/.built: $(VENV_STAMP) setup.py pyproject.toml $(shell find pipesim scenarios offpolicy mismatch -type f -not -path '*/__pycache__/*')
	rm -rf $(COMPILED) build/mypyc-cache build/lib.* build/temp.*
	MYPY_CACHE_DIR=build/mypyc-cache PIPESIM_COMPILE=1 $(PY) -m pip install -q --no-deps --no-build-isolation --target $(COMPILED) .
	touch $@

fast: $(COMPILED)/.built

# The compiled build: the tests that can tell the builds apart, not the whole suite again (the
# pure pass above already ran it): test_compiled.py compares its runs with pure Python's bit for
# bit, and the engine, compute and error-path tests exercise every compiled module and every
# switch or hook a compiled class could ignore. The build must come first on the path:
# PYTHONSAFEPATH keeps the working directory (the source tree) off it, and pytest appends the
# tests' root instead of prepending it.
COMPILED_TESTS := tests/test_compiled.py tests/test_engine_numpy.py tests/test_policy_errors.py tests/test_clock.py \
	tests/test_kernel_survivors.py $(wildcard tests/test_engine_*.py) $(wildcard tests/test_compute_*.py) \
	tests/test_core_golden.py
test-compiled: $(COMPILED)/.built
	PIPESIM_EXPECT_COMPILED=1 PYTHONSAFEPATH=1 PYTHONPATH=$(COMPILED) HYPOTHESIS_PROFILE=ci \
		$(PY) -m pytest -q --import-mode=append $(XDIST) \
		$(sort $(COMPILED_TESTS))

bench-compute: $(COMPILED)/.built
	PYTHONSAFEPATH=1 PYTHONPATH=$(COMPILED) $(PY) benchmarks/bench_compute.py --clock cpu

clean:
	rm -rf .venv build *.egg-info .mypy_cache .ruff_cache .hypothesis
