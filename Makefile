# Two entry points: `make run` starts the proxy, `make test` runs the test suite.
# Both create .venv with Python >= 3.12 and install freezeframe into it first.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test bench lint

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || "$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

run: setup
	$(VENV)/bin/freezeframe run

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) tests/benchmarks/bench_proxy.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
