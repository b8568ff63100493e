# Two entry points: `make demo` and `make test`. Each creates .venv when it is missing.
# The CPU torch wheel is pinned here (it lies on disk); pyproject only declares a range.
PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: demo test lint typecheck pytest bench clean report

$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 -e ".[dev]"
	touch $(VENV_STAMP)

demo: $(VENV_STAMP)
	$(PY) -m pipesim.io.demo

test: $(VENV_STAMP) lint typecheck pytest

lint: $(VENV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(VENV_STAMP)
	$(PY) -m mypy pipesim scenarios offpolicy mismatch

pytest: $(VENV_STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q

bench: $(VENV_STAMP)
	$(PY) benchmarks/bench_pipeline.py

clean:
	rm -rf .venv build *.egg-info .mypy_cache .ruff_cache .hypothesis
