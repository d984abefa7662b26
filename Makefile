# Two entry points: `make run` starts the proxy, `make test` runs the test suite.
# Both create .venv with Python >= 3.12 first; `run` installs what running freezeframe
# needs, `test` adds the test and development tools.
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup run test bench lint

setup: $(RUN_STAMP)

$(PY):
	"$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/freezeframe run

# Two workers (pytest-xdist), each test file on one of them (tests/conftest.py groups them):
# most of the suite's time is real proxies starting and serving, which two cores share.
# The checkout's modules compiled first: where PYTHONDONTWRITEBYTECODE is set (CI sandboxes
# set it), every proxy and CLI process the suite starts compiled them from source again.
test: $(TEST_STAMP)
	$(PY) -m compileall -q -j 0 -x '/(\.venv|node_modules|build)/' .
	$(PY) -m pytest -n 2 --dist loadgroup

bench: $(TEST_STAMP)
	$(PY) tests/benchmarks/bench_proxy.py

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
