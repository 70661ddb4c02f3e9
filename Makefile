# The two quick-start commands: `make demo` and `make test`. Both create .venv when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= examples/shortest_paths.py

PYRIGHT := tools/pyright/node_modules/.bin/pyright

.PHONY: demo test test-all test-fast test-py312 test-py313 lint typecheck typecheck-examples bench clean

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

# The suite CI runs: everything but the tests marked slow (each slow test has a short version
# that runs here). `make test-all` adds the slow ones (the 120-kill durability test, the full
# fuzz, spark-submit on local-cluster, ...).
test: $(VENV)/.stamp-test
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: $(VENV)/.stamp-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(VENV)/.stamp-test
	$(BIN)/python -m pytest -m "not spark and not slow" $(PYTEST_ARGS)

# The non-Spark, non-slow suite on another supported CPython: `make test-py313`, `make test-py312`.
# The interpreter comes from pyenv (.ci/find-python says what it tried when it is missing);
# its venv is .venv313 / .venv312 (not in git).
test-py312 test-py313: test-py%:
	@py="$$(.ci/find-python $(patsubst 3%,3.%,$*))" || exit 1; \
	if [ ! -x .venv$*/bin/python ]; then "$$py" -m venv .venv$* || exit 1; fi; \
	echo "== $$(.venv$*/bin/python -c 'import sys; print(sys.version.split()[0])') ($$py)"; \
	.venv$*/bin/python -m pip install -q -e ".[test]" || exit 1; \
	.venv$*/bin/python -m pytest -m "not spark and not slow" $(PYTEST_ARGS)

lint: $(VENV)/.stamp-dev typecheck-examples
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

# The pinned pyright of tools/pyright/package-lock.json, installed from npm (needs node and npm).
$(PYRIGHT): tools/pyright/package.json tools/pyright/package-lock.json
	npm ci --prefix tools/pyright --no-audit --no-fund
	touch $@

# User code as documented must type-check: mypy --strict and pyright (strict, pyrightconfig.json).
typecheck-examples: $(VENV)/.stamp-dev $(PYRIGHT)
	$(BIN)/mypy --strict examples
	$(PYRIGHT) -p pyrightconfig.json

typecheck: $(VENV)/.stamp-dev
	$(BIN)/mypy src/blooml

bench: $(VENV)/.stamp-test
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis .ruff_cache .mypy_cache \
		tools/pyright/node_modules
