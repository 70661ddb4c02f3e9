# The two quick-start commands: `make demo` and `make test`. Both create .venv when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= examples/shortest_paths.py

.PHONY: demo test test-fast test-py312 test-py313 lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# One stamp per extras set; re-installs when pyproject.toml changes.
$(VENV)/.stamp-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,spark]"
	touch $@

$(VENV)/.stamp-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

demo: $(VENV)/.stamp-base
	$(BIN)/python $(DEMO)

test: $(VENV)/.stamp-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(VENV)/.stamp-test
	$(BIN)/python -m pytest -m "not spark and not slow" $(PYTEST_ARGS)

# The non-Spark suite on another supported CPython: `make test-py313`, `make test-py312`.
# The interpreter comes from pyenv (.ci/find-python says what it tried when it is missing);
# its venv is .venv313 / .venv312 (not in git).
test-py%:
	@py="$$(.ci/find-python $(patsubst 3%,3.%,$*))" || exit 1; \
	if [ ! -x .venv$*/bin/python ]; then "$$py" -m venv .venv$* || exit 1; fi; \
	echo "== $$(.venv$*/bin/python -c 'import sys; print(sys.version.split()[0])') ($$py)"; \
	.venv$*/bin/python -m pip install -q -e ".[test]" || exit 1; \
	.venv$*/bin/python -m pytest -m "not spark" $(PYTEST_ARGS)

lint: $(VENV)/.stamp-dev
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: $(VENV)/.stamp-dev
	$(BIN)/mypy src/blooml

bench: $(VENV)/.stamp-test
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis .ruff_cache .mypy_cache
